package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startServer serves h on 127.0.0.1:0 until the test ends.
func startServer(t *testing.T, h Handler, opts ServerOptions) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(h, opts, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, lis.Addr().String()
}

func dial(t *testing.T, addr string, h Handler) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), addr, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); <-c.Done() })
	return c
}

// echo answers code 1 with its "v" field, holds code 2 until the
// connection ends, and answers everything else "not supported".
var echo = HandlerFunc(func(ctx context.Context, c *Conn, req *Command) *Command {
	switch req.Code {
	case 1:
		return req.Reply(Success, "").Set("v", req.String("v"))
	case 2:
		<-ctx.Done()
		return nil
	}
	return req.Reply(RequestCodeNotSupported, "no")
})

func TestInvokeConcurrentOnOneConnection(t *testing.T) {
	_, addr := startServer(t, echo, ServerOptions{})
	c := dial(t, addr, nil)
	// Requests held by the server do not hold up the others.
	for range 10 {
		go func() { _, _ = c.Invoke(context.Background(), NewRequest(2, nil, nil)) }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make(chan error, 100)
	for i := range 100 {
		go func() {
			v := strconv.Itoa(i)
			resp, err := c.Invoke(ctx, NewRequest(1, map[string]string{"v": v}, nil))
			switch {
			case err != nil:
				errs <- err
			case resp.Code != Success || resp.String("v") != v || !resp.IsResponse():
				errs <- errors.New("wrong response " + resp.String("v") + " for " + v)
			default:
				errs <- nil
			}
		}()
	}
	for range 100 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Invoke(ctx, NewRequest(999, nil, nil))
	if err != nil || resp.Code != RequestCodeNotSupported {
		t.Fatalf("unknown code: %+v %v", resp, err)
	}
}

func TestServerCallsClient(t *testing.T) {
	got := make(chan *Command, 1)
	var served atomic.Pointer[Conn]
	h := HandlerFunc(func(ctx context.Context, c *Conn, req *Command) *Command {
		served.Store(c)
		return req.Reply(Success, "")
	})
	_, addr := startServer(t, h, ServerOptions{})
	c := dial(t, addr, HandlerFunc(func(ctx context.Context, c *Conn, req *Command) *Command {
		got <- req
		return req.Reply(Success, "").Set("client", "yes")
	}))
	if _, err := c.Invoke(context.Background(), NewRequest(1, nil, nil)); err != nil {
		t.Fatal(err)
	}
	sc := served.Load()
	resp, err := sc.Invoke(context.Background(), NewRequest(307, map[string]string{"consumerGroup": "g"}, nil))
	if err != nil || resp.String("client") != "yes" {
		t.Fatalf("%+v %v", resp, err)
	}
	<-got
	// A oneway request reaches the client and its answer is not sent.
	if err := sc.Oneway(NewRequest(40, map[string]string{"consumerGroup": "g"}, nil)); err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.Code != 40 || !req.IsOneway() {
		t.Fatalf("%+v", req)
	}
}

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	_, addr := startServer(t, echo, ServerOptions{Options: Options{MaxFrame: 1 << 16}})
	good := dial(t, addr, nil)

	// A header that is not JSON: answered with SYSTEM_ERROR, the
	// connection stays.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The opaque is read before the header breaks off, so the answer can be paired.
	bad := jsonFrame(`{"code":1,"opaque":9,"extFields":{`, "")
	if _, err := raw.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(bad))), bad...)); err != nil {
		t.Fatal(err)
	}
	resp := readResponse(t, raw)
	if resp.Code != SystemError || resp.Opaque != 9 {
		t.Fatalf("%+v", resp)
	}
	if _, err := raw.Write(AppendFrame(nil, &Command{Code: 1, Opaque: 10, Ext: map[string]string{"v": "x"}})); err != nil {
		t.Fatal(err)
	}
	if resp := readResponse(t, raw); resp.Code != Success || resp.String("v") != "x" {
		t.Fatalf("%+v", resp)
	}
	// An oversized frame closes that connection.
	if _, err := raw.Write(binary.BigEndian.AppendUint32(nil, 1<<20)); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection not closed after an oversized frame")
	}
	if resp, err := good.Invoke(context.Background(), NewRequest(1, map[string]string{"v": "ok"}, nil)); err != nil || resp.String("v") != "ok" {
		t.Fatalf("other connection: %+v %v", resp, err)
	}
}

func TestHalfFrameStallsOnlyUntilIdleTimeout(t *testing.T) {
	_, addr := startServer(t, echo, ServerOptions{Options: Options{IdleTimeout: 300 * time.Millisecond}})
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	frame := AppendFrame(nil, NewRequest(1, nil, nil))
	if _, err := raw.Write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stalled half frame kept its connection")
	}
}

func TestShutdownEndsHeldRequests(t *testing.T) {
	s, addr := startServer(t, echo, ServerOptions{})
	c := dial(t, addr, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), NewRequest(2, nil, nil))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = s.Shutdown(ctx) // the held request outlives the drain: cut
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("held request: %v", err)
	}
}

func readResponse(t *testing.T, nc net.Conn) *Command {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := ReadFrame(nc, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInlineRequestsAnsweredTogether(t *testing.T) {
	var onReader atomic.Int32
	h := HandlerFunc(func(ctx context.Context, c *Conn, req *Command) *Command {
		if req.Code == 1 {
			onReader.Add(1)
		}
		return echo(ctx, c, req)
	})
	_, addr := startServer(t, h, ServerOptions{Options: Options{Inline: func(req *Command) bool { return req.Code == 1 }}})
	c := dial(t, addr, nil)
	// A held request (code 2, not inline) does not hold up inline ones.
	go func() { _, _ = c.Invoke(context.Background(), NewRequest(2, nil, nil)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make(chan error, 200)
	for i := range 200 {
		go func() {
			v := strconv.Itoa(i)
			resp, err := c.Invoke(ctx, NewRequest(1, map[string]string{"v": v}, nil))
			if err == nil && resp.String("v") != v {
				err = errors.New("wrong answer")
			}
			errs <- err
		}()
	}
	for range 200 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if onReader.Load() != 200 {
		t.Fatalf("%d inline requests served", onReader.Load())
	}
}
