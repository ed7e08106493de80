package frame

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bolide-mq/bolide/internal/freeport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test methods.
const (
	mEcho      Method = 100 // answers its string, on the reader
	mEchoAsync Method = 101 // answers its string, on its own goroutine
	mPark      Method = 102 // own goroutine: waits for the test's release, or for its context
	mCount     Method = 103 // counts its calls (oneway)
	mKeep      Method = 104 // own goroutine, its request a slice of the payload (KeepsPayload): parks, then answers it
	mKeepNot   Method = 105 // the same without KeepsPayload: the answer shows what the buffer holds by then
)

// testServer is a Server behind a listener that sorts connections by the
// magic, as the broker does.
type testServer struct {
	*Server
	addr    string
	lis     net.Listener
	wg      sync.WaitGroup
	release chan struct{} // closed: parked requests return
	parked  chan string   // a parked request's value once it runs
	ctxDone chan string   // a parked request whose context ended
	count   atomic.Int64
}

func startServer(t *testing.T, opts Options, log *zap.Logger) *testServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: NewServer(opts, log), addr: lis.Addr().String(), lis: lis,
		release: make(chan struct{}), parked: make(chan string, 16), ctxDone: make(chan string, 16)}
	str := func() proto.Message { return new(wrapperspb.StringValue) }
	echo := func(_ context.Context, req proto.Message) proto.Message {
		return wrapperspb.String(req.(*wrapperspb.StringValue).Value)
	}
	ts.Handle(mEcho, Handler{NewRequest: str, Serve: echo})
	ts.Handle(mEchoAsync, Handler{NewRequest: str, Serve: echo, Blocking: func(proto.Message) bool { return true }})
	ts.Handle(mPark, Handler{NewRequest: str, Blocking: func(proto.Message) bool { return true },
		Serve: func(ctx context.Context, req proto.Message) proto.Message {
			v := req.(*wrapperspb.StringValue).Value
			ts.parked <- v
			select {
			case <-ts.release:
			case <-ctx.Done():
				if !strings.HasPrefix(v, "ignore-ctx") {
					ts.ctxDone <- v
					return wrapperspb.String("cancelled")
				}
				<-ts.release
			}
			return wrapperspb.String("released " + v)
		}})
	// The request of mKeep and mKeepNot is the payload itself, not a copy.
	inPlace := func(payload []byte) (proto.Message, error) { return wrapperspb.Bytes(payload), nil }
	parkBytes := func(_ context.Context, req proto.Message) proto.Message {
		ts.parked <- "bytes"
		<-ts.release
		return wrapperspb.String(string(req.(*wrapperspb.BytesValue).Value))
	}
	ts.Handle(mKeep, Handler{Decode: inPlace, KeepsPayload: true, Serve: parkBytes,
		Blocking: func(proto.Message) bool { return true }})
	ts.Handle(mKeepNot, Handler{Decode: inPlace, Serve: parkBytes,
		Blocking: func(proto.Message) bool { return true }})
	ts.Handle(mCount, Handler{NewRequest: str, Serve: func(context.Context, proto.Message) proto.Message {
		ts.count.Add(1)
		return wrapperspb.String("")
	}})
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			ts.wg.Add(1)
			go func() {
				defer ts.wg.Done()
				head := make([]byte, len(Magic))
				if _, err := io.ReadFull(nc, head); err != nil || string(head) != Magic {
					_ = nc.Close()
					return
				}
				ts.ServeConn(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		ts.releaseAll()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ts.Shutdown(ctx)
		ts.wg.Wait()
	})
	return ts
}

func (ts *testServer) releaseAll() {
	select {
	case <-ts.release:
	default:
		close(ts.release)
	}
}

func newClient(t *testing.T, addr string, opts Options) *Client {
	t.Helper()
	c := NewClient(addr, opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func call(ctx context.Context, c *Client, m Method, v string) (string, error) {
	return callWithin(ctx, 0, c, m, v)
}

func callWithin(ctx context.Context, timeout time.Duration, c *Client, m Method, v string) (string, error) {
	var resp wrapperspb.StringValue
	err := c.CallWithin(ctx, timeout, m, wrapperspb.String(v), &resp)
	return resp.Value, err
}

// Many callers share one connection; answers reach the caller that asked,
// whether served on the reader or on their own goroutine.
func TestConcurrentCalls(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				m := mEcho
				if (g+i)%3 == 0 {
					m = mEchoAsync
				}
				want := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("x", i*50))
				got, err := call(ctx, c, m, want)
				if err == nil && got != want {
					err = fmt.Errorf("asked %.20q, got %.20q", want, got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ts.mu.Lock()
	n := len(ts.conns)
	ts.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d server connections for one client, want 1", n)
	}
}

// A request that waits runs on its own goroutine: the requests behind it
// on the same connection are answered meanwhile.
func TestBlockingRequestDoesNotStallConnection(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx := context.Background()
	parked := make(chan error, 1)
	go func() {
		got, err := call(ctx, c, mPark, "p")
		if err == nil && got != "released p" {
			err = fmt.Errorf("parked call answered %q", got)
		}
		parked <- err
	}()
	<-ts.parked
	for i := range 10 {
		if got, err := call(ctx, c, mEcho, fmt.Sprint(i)); err != nil || got != fmt.Sprint(i) {
			t.Fatalf("call behind a parked one: %q, %v", got, err)
		}
	}
	select {
	case err := <-parked:
		t.Fatalf("parked call returned before its release: %v", err)
	default:
	}
	ts.releaseAll()
	if err := <-parked; err != nil {
		t.Fatal(err)
	}
}

// A request that refers to its payload (Handler.KeepsPayload) keeps it
// intact while it is served on its own goroutine and the connection reads
// more frames; without KeepsPayload the next frame lands in the same
// buffer, which is what the flag is for.
func TestKeepsPayload(t *testing.T) {
	for _, tc := range []struct {
		m    Method
		keep bool
	}{{mKeep, true}, {mKeepNot, false}} {
		t.Run(fmt.Sprint(tc.keep), func(t *testing.T) {
			ts := startServer(t, Options{}, nil)
			c := newClient(t, ts.addr, Options{})
			ctx := context.Background()
			sent := "kept-" + strings.Repeat("k", 100)
			want, err := proto.Marshal(wrapperspb.String(sent)) // the payload as the server reads it
			if err != nil {
				t.Fatal(err)
			}
			parked := make(chan string, 1)
			go func() {
				got, err := call(ctx, c, tc.m, sent)
				if err != nil {
					got = "error: " + err.Error()
				}
				parked <- got
			}()
			<-ts.parked
			// Frames of the same size, read while the first is parked.
			other := "next-" + strings.Repeat("n", 100)
			for range 3 {
				if got, err := call(ctx, c, mEcho, other); err != nil || got != other {
					t.Fatalf("echo behind the parked request: %q, %v", got, err)
				}
			}
			ts.releaseAll()
			got := <-parked
			if tc.keep && got != string(want) {
				t.Fatalf("the kept payload changed while its request was served: %q, want %q", got, want)
			}
			if !tc.keep && got == string(want) {
				t.Fatalf("without KeepsPayload the buffer was not reused: the test proves nothing")
			}
		})
	}
}

func TestOneway(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx := context.Background()
	for range 5 {
		if err := c.Oneway(ctx, mCount, wrapperspb.String("")); err != nil {
			t.Fatal(err)
		}
	}
	// Requests on one connection served on the reader are served in order.
	if _, err := call(ctx, c, mEcho, "after"); err != nil {
		t.Fatal(err)
	}
	if n := ts.count.Load(); n != 5 {
		t.Fatalf("%d oneway requests served, want 5", n)
	}
}

// A request over the client's limit fails before anything is written and
// the connection goes on; one over the server's limit makes the server
// close that connection (logged), and the next call dials again.
func TestRequestTooLarge(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	ts := startServer(t, Options{MaxFrame: 4 << 10}, zap.New(core))
	ctx := context.Background()

	small := newClient(t, ts.addr, Options{MaxFrame: 4 << 10})
	if _, err := call(ctx, small, mEcho, "before"); err != nil {
		t.Fatal(err)
	}
	_, err := call(ctx, small, mEcho, strings.Repeat("x", 5<<10))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize request: %v, want ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "exceed the limit of 4096") {
		t.Fatalf("oversize error does not say the limit: %v", err)
	}
	if got, err := call(ctx, small, mEcho, "after"); err != nil || got != "after" {
		t.Fatalf("call after an oversize one: %q, %v", got, err)
	}
	if logs.Len() != 0 {
		t.Fatalf("the server saw the refused request: %v", logs.All())
	}

	big := newClient(t, ts.addr, Options{}) // trusts the default limit
	_, err = call(ctx, big, mEcho, strings.Repeat("x", 5<<10))
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("request over the server's limit: %v, want a *ConnError", err)
	}
	if logs.FilterMessage("frame connection closed: malformed frame").Len() != 1 {
		t.Fatalf("the server did not log the oversize frame: %v", logs.All())
	}
	if got, err := call(ctx, big, mEcho, "again"); err != nil || got != "again" {
		t.Fatalf("call after the server closed the connection: %q, %v", got, err)
	}
	if got, err := call(ctx, small, mEcho, "other"); err != nil || got != "other" {
		t.Fatalf("other connection: %q, %v", got, err)
	}
}

// Bytes that are not frames close that connection only.
func TestMalformedBytes(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	ts := startServer(t, Options{}, zap.New(core))
	ctx := context.Background()
	c := newClient(t, ts.addr, Options{})
	if _, err := call(ctx, c, mEcho, "before"); err != nil {
		t.Fatal(err)
	}
	for _, junk := range [][]byte{
		{0, 0, 0, 7, 9, 0, 1, 0, 0, 0, 1},     // unknown kind
		{0, 0, 0, 2, 1, 0, 1, 0, 0, 0, 1},     // length below the header
		{0, 0, 0, 7, 2, 0, 100, 0, 0, 0, 1},   // a response from a client
		[]byte("GET / HTTP/1.1\r\n\r\nhello"), // not frames at all
	} {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(append([]byte(Magic), junk...)); err != nil {
			t.Fatal(err)
		}
		// The server answers the magic, then closes (a reset when it
		// left bytes unread).
		rest, err := io.ReadAll(nc)
		_ = nc.Close()
		if err != nil && !errors.Is(err, syscall.ECONNRESET) || !strings.HasPrefix(Magic, string(rest)) {
			t.Fatalf("after % x the server sent %q, %v; want the magic then the end", junk, rest, err)
		}
	}
	if n := logs.FilterMessage("frame connection closed: malformed frame").Len(); n != 4 {
		t.Fatalf("%d malformed connections logged, want 4: %v", n, logs.All())
	}
	if got, err := call(ctx, c, mEcho, "after"); err != nil || got != "after" {
		t.Fatalf("the other connection after malformed ones: %q, %v", got, err)
	}
}

// An undecodable request or an unknown method gets an error frame; the
// connection goes on.
func TestRemoteErrors(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx := context.Background()
	var re *RemoteError
	if _, err := call(ctx, c, 999, "x"); !errors.As(err, &re) || !strings.Contains(re.Msg, "unknown method 999") {
		t.Fatalf("unknown method: %v", err)
	}
	// A BytesValue with invalid UTF-8 is not a valid StringValue.
	err := c.Call(ctx, mEcho, wrapperspb.Bytes([]byte{0xff, 0xfe}), new(wrapperspb.StringValue))
	if !errors.As(err, &re) || !strings.Contains(re.Msg, "cannot decode") {
		t.Fatalf("undecodable request: %v", err)
	}
	if got, err := call(ctx, c, mEcho, "ok"); err != nil || got != "ok" {
		t.Fatalf("after remote errors: %q, %v", got, err)
	}
}

// A server whose connections close mid-call fails the waiters with a
// *ConnError; the next call dials again.
func TestServerClosesMidCall(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx := context.Background()
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := call(ctx, c, mPark, fmt.Sprint("ignore-ctx-", i))
			errs <- err
		}()
	}
	for range 3 {
		<-ts.parked
	}
	// Stop waiting at once: the connections are closed under the parked
	// requests, which ignore their context until released.
	expired, cancel := context.WithCancel(ctx)
	cancel()
	shut := make(chan error, 1)
	go func() { shut <- ts.Shutdown(expired) }()
	for range 3 {
		var ce *ConnError
		if err := <-errs; !errors.As(err, &ce) {
			t.Fatalf("call on a closed connection: %v, want a *ConnError", err)
		}
	}
	ts.releaseAll()
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Fatalf("forced shutdown: %v", err)
	}
	// The shut-down server closes new connections at once.
	var ce *ConnError
	if _, err := call(ctx, c, mEcho, "x"); !errors.As(err, &ce) {
		t.Fatalf("call to a shut-down server: %v, want a *ConnError", err)
	}
}

// Shutdown lets the requests in flight finish and answers them.
func TestGracefulShutdown(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx := context.Background()
	got := callAsync(0, c, mPark, "ignore-ctx-drain")
	<-ts.parked
	shut := make(chan error, 1)
	go func() { shut <- ts.Shutdown(ctx) }()
	ts.releaseAll()
	if v := <-got; v != "released ignore-ctx-drain" {
		t.Fatalf("request in flight at shutdown: %q", v)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// A caller's context ending returns its error, cancels the request on the
// server and leaves the connection usable.
func TestContextCancellation(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := newClient(t, ts.addr, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, c, mPark, "cancel-me")
		errc <- err
	}()
	<-ts.parked
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if v := <-ts.ctxDone; v != "cancel-me" {
		t.Fatalf("server cancelled %q", v)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if _, err := call(dctx, c, mPark, "deadline"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call past its deadline: %v", err)
	}
	if got, err := call(context.Background(), c, mEcho, "still"); err != nil || got != "still" {
		t.Fatalf("after cancelled calls: %q, %v", got, err)
	}
	if _, err := call(ctx, c, mEcho, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("call with a done context: %v", err)
	}
}

// Close fails the calls in flight and ends the client's goroutines (the
// leak check of TestMain).
func TestClientClose(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := NewClient(ts.addr, Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), c, mPark, "ignore-ctx-close")
		errc <- err
	}()
	<-ts.parked
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("call in flight at Close: %v", err)
	}
	if _, err := call(context.Background(), c, mEcho, "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A gRPC server (an older broker) refuses the handshake: ErrNotSupported.
func TestHandshakeRefusedByGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	defer func() {
		gs.Stop()
		<-done
	}()
	c := newClient(t, lis.Addr().String(), Options{})
	if _, err := call(context.Background(), c, mEcho, "x"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("call to a gRPC server: %v, want ErrNotSupported", err)
	}
}

func TestDialFailure(t *testing.T) {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, addr, Options{})
	var ce *ConnError
	if _, err := call(context.Background(), c, mEcho, "x"); !errors.As(err, &ce) || ce.Op != "dial" {
		t.Fatalf("call to a closed port: %v, want a dial *ConnError", err)
	}
}

// A server that accepts and never answers the magic: the call ends with
// its context, the handshake's reads unblocked by the deadline set when
// the context ends.
func TestHandshakeEndsWithContext(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			held <- nc
		}
	}()
	defer func() {
		for len(held) > 0 {
			_ = (<-held).Close()
		}
	}()
	c := newClient(t, lis.Addr().String(), Options{})
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := call(ctx, c, mEcho, "x")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call to a silent server: %v", err)
		}
	}
}
