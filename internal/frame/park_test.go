package frame

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// parkedCall is a request the test's Park handler holds: the test answers
// it with reply, and learns from cancelled that the server cancelled it.
type parkedCall struct {
	value     string
	reply     func(proto.Message)
	cancelled chan struct{}
}

// startParkServer serves one method whose Blocking requests are parked
// with the test (Handler.Park) on a listener of its own; a request whose
// value starts with "now" is answered at once.
func startParkServer(t *testing.T) (*Server, string, <-chan *parkedCall) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{}, nil)
	parked := make(chan *parkedCall, 1024)
	s.Handle(mEcho, Handler{NewRequest: func() proto.Message { return new(wrapperspb.StringValue) },
		Serve: func(_ context.Context, req proto.Message) proto.Message { return req }})
	s.Handle(mPark, Handler{
		NewRequest: func() proto.Message { return new(wrapperspb.StringValue) },
		Blocking:   func(proto.Message) bool { return true },
		Serve:      func(context.Context, proto.Message) proto.Message { panic("a parked method is not served") },
		Park: func(_ context.Context, req proto.Message, reply func(proto.Message)) (proto.Message, func()) {
			v := req.(*wrapperspb.StringValue).Value
			if strings.HasPrefix(v, "now") {
				return wrapperspb.String("at once " + v), nil
			}
			pc := &parkedCall{value: v, reply: reply, cancelled: make(chan struct{})}
			parked <- pc
			var once sync.Once // cancel may come more than once
			return nil, func() { once.Do(func() { close(pc.cancelled) }) }
		},
	})
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(lis, time.Second) }()
	t.Cleanup(func() {
		_ = lis.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return s, lis.Addr().String(), parked
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

func waitCancelled(t *testing.T, pc *parkedCall, why string) {
	t.Helper()
	select {
	case <-pc.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatalf("the parked request %q was not cancelled within 10s of %s", pc.value, why)
	}
}

// TestParkedRequests: a parked request is answered by whichever goroutine
// calls its reply; one answered at once needs no reply; the client giving
// a call up, and the connection closing, cancel the parked requests.
func TestParkedRequests(t *testing.T) {
	_, addr, parked := startParkServer(t)
	c := newClient(t, addr, Options{})
	ctx := context.Background()

	if got, err := call(ctx, c, mPark, "now-1"); err != nil || got != "at once now-1" {
		t.Fatalf("request answered at once: %q, %v", got, err)
	}
	answer := make(chan string, 1)
	go func() {
		got, err := call(ctx, c, mPark, "later")
		if err != nil {
			got = err.Error()
		}
		answer <- got
	}()
	pc := nextParked(t, parked)
	go pc.reply(wrapperspb.String("answered " + pc.value)) // from a goroutine of the test's
	if got := <-answer; got != "answered later" {
		t.Fatalf("parked request: %q", got)
	}

	// Given up by the client: the server cancels it, and its answer after
	// that goes nowhere.
	cctx, cancel := context.WithCancel(ctx)
	given := make(chan error, 1)
	go func() {
		_, err := call(cctx, c, mPark, "given-up")
		given <- err
	}()
	pc = nextParked(t, parked)
	cancel()
	if err := <-given; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	waitCancelled(t, pc, "the client's cancel frame")
	pc.reply(wrapperspb.String("too late"))
	if got, err := call(ctx, c, mPark, "now-2"); err != nil || got != "at once now-2" {
		t.Fatalf("request after a cancelled one: %q, %v", got, err)
	}

	// The connection closes: every parked request is cancelled.
	other := newClient(t, addr, Options{})
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := call(ctx, other, mPark, "closing")
			errs <- err
		}()
	}
	pcs := []*parkedCall{nextParked(t, parked), nextParked(t, parked), nextParked(t, parked)}
	_ = other.Close()
	for _, pc := range pcs {
		waitCancelled(t, pc, "its connection closing")
		pc.reply(wrapperspb.String("after close"))
	}
	for range 3 {
		if err := <-errs; err == nil {
			t.Fatal("a call on a closed client succeeded")
		}
	}
}

// rawClient is a connection past the handshake that writes requests and
// reads answers as bytes, to pipeline many and to read none for a while.
func rawClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	if _, err := io.WriteString(nc, Magic); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestParkedAnswersDoNotWait: a client that sends parked requests and
// reads nothing cannot hold up the goroutines that answer them (in the
// broker, other connections' readers): each reply returns while the
// client's socket is full, and the client, reading at last, gets every
// answer whole.
func TestParkedAnswersDoNotWait(t *testing.T) {
	_, addr, parked := startParkServer(t)
	nc := rawClient(t, addr)
	var err error
	const n = 200
	var reqs []byte
	for i := range n {
		reqs, err = AppendMessage(reqs, Header{Kind: KindRequest, Method: mPark, ID: uint32(i + 1)},
			wrapperspb.String("r"+string(rune('a'+i%26))), DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write(reqs); err != nil {
		t.Fatal(err)
	}
	// 200 answers of 64 KiB: 12.5 MiB, more than the two sockets' buffers
	// hold while the client reads nothing.
	body := strings.Repeat("x", 64<<10)
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		for range n {
			pc := nextParked(t, parked)
			pc.reply(wrapperspb.String(body))
		}
	}()
	select {
	case <-replied:
	case <-time.After(20 * time.Second):
		t.Fatal("replying to a client that reads nothing blocked")
	}

	br := bufio.NewReader(nc)
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != Magic {
		t.Fatalf("handshake: %q, %v", magic, err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	seen := make(map[uint32]bool)
	for range n {
		h, payload, err := readFrame(br, nil, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		var v wrapperspb.StringValue
		if h.Kind != KindResponse || proto.Unmarshal(payload, &v) != nil || v.Value != body {
			t.Fatalf("answer %d: kind %v, %d bytes", h.ID, h.Kind, len(payload))
		}
		if seen[h.ID] || h.ID < 1 || h.ID > n {
			t.Fatalf("answer with id %d (seen before: %v)", h.ID, seen[h.ID])
		}
		seen[h.ID] = true
	}
}

// TestParkedAnswersKeepFramesWhole: a parked answer written straight to
// the socket must not land inside an answer the reader left half in its
// buffer. A client pipelines echo requests (served on the reader, their
// answers buffered and flushed as the buffer fills, so that it often holds
// the first part of a frame) among parked requests answered as soon as
// they park; every answer must arrive whole.
func TestParkedAnswersKeepFramesWhole(t *testing.T) {
	_, addr, parked := startParkServer(t)
	nc := rawClient(t, addr)
	var err error
	const echoes, every = 6000, 20 // a parked request after every 20 echoes
	pad := strings.Repeat("p", 3000)
	want := make(map[uint32]string)
	var reqs []byte
	id := uint32(0)
	for i := range echoes {
		id++
		want[id] = fmt.Sprint(pad, id)
		if reqs, err = AppendMessage(reqs, Header{Kind: KindRequest, Method: mEcho, ID: id}, wrapperspb.String(want[id]), DefaultMaxFrame); err != nil {
			t.Fatal(err)
		}
		if i%every == every-1 {
			id++
			want[id] = fmt.Sprint("parked ", id)
			if reqs, err = AppendMessage(reqs, Header{Kind: KindRequest, Method: mPark, ID: id}, wrapperspb.String(want[id]), DefaultMaxFrame); err != nil {
				t.Fatal(err)
			}
		}
	}
	go func() {
		for range echoes / every {
			pc := nextParked(t, parked)
			pc.reply(wrapperspb.String(pc.value))
		}
	}()
	go func() { _, _ = nc.Write(reqs) }()

	br := bufio.NewReader(nc)
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != Magic {
		t.Fatalf("handshake: %q, %v", magic, err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for n := 0; len(want) > 0; n++ {
		h, payload, err := readFrame(br, nil, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("after %d whole answers: %v", n, err)
		}
		var v wrapperspb.StringValue
		if h.Kind != KindResponse || proto.Unmarshal(payload, &v) != nil || v.Value != want[h.ID] {
			t.Fatalf("after %d whole answers, answer %d: kind %v, %d bytes, not the answer asked (%d bytes, ending %q)", n, h.ID, h.Kind, len(payload), len(want[h.ID]), want[h.ID][max(0, len(want[h.ID])-8):])
		}
		delete(want, h.ID)
	}
}
