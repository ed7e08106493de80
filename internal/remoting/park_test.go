package remoting

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request codes of parkHandler.
const (
	codeEcho = 1  // answered on a goroutine of its own, or inline
	codePark = 10 // parked: "now…" answered at once, the others by the test
)

// parkedCall is a request parkHandler holds: the test answers it with
// reply, and learns from cancelled that the connection cancelled it.
type parkedCall struct {
	value     string
	reply     func(*Command)
	cancelled chan struct{}
}

// parkHandler parks codePark and echoes the rest.
type parkHandler struct{ parked chan *parkedCall }

func (h parkHandler) ServeRemoting(_ context.Context, _ *Conn, req *Command) *Command {
	return req.Reply(Success, "").Set("v", req.String("v"))
}

func (h parkHandler) Parks(req *Command) bool { return req.Code == codePark }

func (h parkHandler) Park(_ context.Context, _ *Conn, req *Command, reply func(*Command)) (*Command, func()) {
	v := req.String("v")
	if strings.HasPrefix(v, "now") {
		return req.Reply(Success, "").Set("v", "at once "+v), nil
	}
	pc := &parkedCall{value: v, reply: reply, cancelled: make(chan struct{})}
	h.parked <- pc
	var once sync.Once
	return nil, func() { once.Do(func() { close(pc.cancelled) }) }
}

func startParkServer(t *testing.T, inline bool) (string, <-chan *parkedCall) {
	t.Helper()
	h := parkHandler{parked: make(chan *parkedCall, 1024)}
	var opts ServerOptions
	if inline {
		opts.Inline = func(req *Command) bool { return req.Code == codeEcho }
	}
	_, addr := startServer(t, h, opts)
	return addr, h.parked
}

func nextParked(t *testing.T, parked <-chan *parkedCall) *parkedCall {
	t.Helper()
	select {
	case pc := <-parked:
		return pc
	case <-time.After(10 * time.Second):
		t.Fatal("no request was parked within 10s")
		return nil
	}
}

func invokeV(ctx context.Context, c *Conn, code int32, v string) (string, error) {
	resp, err := c.Invoke(ctx, NewRequest(code, map[string]string{"v": v}, nil))
	if err != nil {
		return "", err
	}
	return resp.String("v"), nil
}

// TestParkedRemotingRequests: a parked request is answered by whichever
// goroutine calls its reply, and counts as in flight until then; one
// answered at once needs no reply; the connection's end cancels the
// parked requests.
func TestParkedRemotingRequests(t *testing.T) {
	addr, parked := startParkServer(t, false)
	c := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if got, err := invokeV(ctx, c, codePark, "now-1"); err != nil || got != "at once now-1" {
		t.Fatalf("request answered at once: %q, %v", got, err)
	}
	answer := make(chan string, 1)
	go func() {
		got, err := invokeV(ctx, c, codePark, "later")
		if err != nil {
			got = err.Error()
		}
		answer <- got
	}()
	pc := nextParked(t, parked)
	// Other requests are served while it is held.
	if got, err := invokeV(ctx, c, codeEcho, "meanwhile"); err != nil || got != "meanwhile" {
		t.Fatalf("request beside a parked one: %q, %v", got, err)
	}
	go pc.reply(NewRequest(0, nil, nil).Reply(Success, "").Set("v", "answered "+pc.value))
	if got := <-answer; got != "answered later" {
		t.Fatalf("parked request: %q", got)
	}

	// The connection closes: every parked request is cancelled, and their
	// answers after that go nowhere.
	other, err := Dial(ctx, addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := invokeV(ctx, other, codePark, "closing")
			errs <- err
		}()
	}
	pcs := []*parkedCall{nextParked(t, parked), nextParked(t, parked), nextParked(t, parked)}
	_ = other.Close()
	<-other.Done()
	for _, pc := range pcs {
		select {
		case <-pc.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("a parked request was not cancelled within 10s of its connection closing")
		}
		pc.reply(NewRequest(0, nil, nil).Reply(Success, "after close"))
	}
	for range 3 {
		if err := <-errs; err == nil {
			t.Fatal("a call on a closed connection succeeded")
		}
	}
}

// rawParkClient is a connection that writes requests and reads answers
// as bytes, to pipeline many and to read none for a while.
func rawParkClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

func appendRequest(dst []byte, code int32, opaque int32, v string) []byte {
	req := NewRequest(code, map[string]string{"v": v}, nil)
	req.Opaque = opaque
	return AppendFrame(dst, req)
}

// TestParkedRemotingAnswersDoNotWait: a peer that sends parked requests
// and reads nothing cannot hold up the goroutines that answer them; reading
// at last, it gets every answer whole.
func TestParkedRemotingAnswersDoNotWait(t *testing.T) {
	addr, parked := startParkServer(t, false)
	nc := rawParkClient(t, addr)
	const n = 200
	var reqs []byte
	for i := range n {
		reqs = appendRequest(reqs, codePark, int32(i+1), "r")
	}
	if _, err := nc.Write(reqs); err != nil {
		t.Fatal(err)
	}
	// 200 answers of 64 KiB: 12.5 MiB, more than the two sockets' buffers
	// hold while the peer reads nothing.
	body := bytes.Repeat([]byte{'x'}, 64<<10)
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		for range n {
			pc := nextParked(t, parked)
			resp := NewRequest(0, nil, nil).Reply(Success, "")
			resp.Body = body
			pc.reply(resp)
		}
	}()
	select {
	case <-replied:
	case <-time.After(20 * time.Second):
		t.Fatal("replying to a peer that reads nothing blocked")
	}
	br := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	seen := make(map[int32]bool)
	for range n {
		frame, err := ReadFrame(br, DefaultMaxFrame, nil)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		resp, err := DecodeFrame(frame)
		if err != nil || !resp.IsResponse() || !bytes.Equal(resp.Body, body) {
			t.Fatalf("after %d answers: %v, a body of %d bytes", len(seen), err, len(resp.Body))
		}
		if seen[resp.Opaque] || resp.Opaque < 1 || resp.Opaque > n {
			t.Fatalf("answer to %d (seen before: %v)", resp.Opaque, seen[resp.Opaque])
		}
		seen[resp.Opaque] = true
	}
}

// TestParkedRemotingAnswersKeepFramesWhole: a parked answer written
// straight to the socket must not land inside an answer the reader left
// half in its buffer. The peer pipelines echo requests served inline
// (their answers buffered, and flushed as the buffer fills, so that it
// often holds the first part of a frame) among parked requests answered as
// soon as they park; every answer must arrive whole.
func TestParkedRemotingAnswersKeepFramesWhole(t *testing.T) {
	addr, parked := startParkServer(t, true)
	nc := rawParkClient(t, addr)
	const echoes, every = 6000, 20 // a parked request after every 20 echoes
	pad := strings.Repeat("p", 3000)
	want := make(map[int32]string)
	var reqs []byte
	id := int32(0)
	for i := range echoes {
		id++
		want[id] = fmt.Sprint(pad, id)
		reqs = appendRequest(reqs, codeEcho, id, want[id])
		if i%every == every-1 {
			id++
			want[id] = fmt.Sprint("parked ", id)
			reqs = appendRequest(reqs, codePark, id, want[id])
		}
	}
	go func() {
		for range echoes / every {
			pc := nextParked(t, parked)
			pc.reply(NewRequest(0, nil, nil).Reply(Success, "").Set("v", pc.value))
		}
	}()
	go func() { _, _ = nc.Write(reqs) }()
	br := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for n := 0; len(want) > 0; n++ {
		frame, err := ReadFrame(br, DefaultMaxFrame, nil)
		if err != nil {
			t.Fatalf("after %d whole answers: %v", n, err)
		}
		resp, err := DecodeFrame(frame)
		if err != nil {
			t.Fatalf("after %d whole answers: %v", n, err)
		}
		if w, ok := want[resp.Opaque]; !ok || resp.String("v") != w {
			t.Fatalf("after %d whole answers, the answer to %d is not the one asked", n, resp.Opaque)
		}
		delete(want, resp.Opaque)
	}
}
