package frame

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bolide-mq/bolide/internal/afterreply"
)

// A request served on the reader may leave work for after its answer: the
// answer reaches the client first (the work waits for the client to have
// it), the work runs before the connection's next request is served, and
// a request served on its own goroutine has no queue (it does the work
// itself).
func TestAfterReply(t *testing.T) {
	const mLater, mOwn Method = 110, 111
	ts := startServer(t, Options{}, zap.NewNop())
	answered := make(chan struct{})
	ran := make(chan string, 4)
	str := func() proto.Message { return new(wrapperspb.StringValue) }
	ts.Handle(mLater, Handler{NewRequest: str, Serve: func(ctx context.Context, req proto.Message) proto.Message {
		v := req.(*wrapperspb.StringValue).Value
		if !afterreply.Defer(ctx, func() {
			if v == "first" {
				<-answered // a server that ran this before flushing would hang here
			}
			ran <- v
		}) {
			return wrapperspb.String("no queue")
		}
		return wrapperspb.String("ok " + v)
	}})
	ts.Handle(mOwn, Handler{NewRequest: str, Blocking: func(proto.Message) bool { return true },
		Serve: func(ctx context.Context, _ proto.Message) proto.Message {
			return wrapperspb.String(map[bool]string{true: "queued", false: "no queue"}[afterreply.Defer(ctx, func() {})])
		}})
	c := newClient(t, ts.addr, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if got, err := call(ctx, c, mLater, "first"); err != nil || got != "ok first" {
		t.Fatalf("first: %q, %v", got, err)
	}
	close(answered)
	if got, err := call(ctx, c, mLater, "second"); err != nil || got != "ok second" {
		t.Fatalf("second: %q, %v", got, err)
	}
	// The first's work ran before the second was served.
	if a, b := <-ran, <-ran; a != "first" || b != "second" {
		t.Fatalf("ran %q then %q", a, b)
	}
	if got, err := call(ctx, c, mOwn, ""); err != nil || got != "no queue" {
		t.Fatalf("a request on its own goroutine: %q, %v", got, err)
	}
}
