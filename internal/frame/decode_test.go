package frame

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestHandlerDecode: a handler's own decoder replaces proto.Unmarshal — its
// request is what Serve receives, on the reader and on a goroutine of its
// own — and a payload it refuses is answered with an error frame on a
// connection that stays usable.
func TestHandlerDecode(t *testing.T) {
	const mUpper, mUpperAsync Method = 110, 111
	ts := startServer(t, Options{}, nil)
	decode := func(payload []byte) (proto.Message, error) {
		req := new(wrapperspb.StringValue)
		if err := proto.Unmarshal(payload, req); err != nil {
			return nil, err
		}
		if req.Value == "refuse" {
			return nil, errors.New("refused by the decoder")
		}
		req.Value = strings.ToUpper(req.Value) // proof that this decoder ran
		return req, nil
	}
	serve := func(_ context.Context, req proto.Message) proto.Message { return req }
	ts.Handle(mUpper, Handler{Decode: decode, Serve: serve})
	ts.Handle(mUpperAsync, Handler{Decode: decode, Serve: serve, Blocking: func(proto.Message) bool { return true }})
	c := NewClient(ts.addr, Options{})
	defer c.Close()
	for _, m := range []Method{mUpper, mUpperAsync} {
		resp := new(wrapperspb.StringValue)
		if err := c.Call(context.Background(), m, wrapperspb.String("abc"), resp); err != nil || resp.Value != "ABC" {
			t.Fatalf("method %d: %q, %v; want \"ABC\"", m, resp.Value, err)
		}
		var remote *RemoteError
		if err := c.Call(context.Background(), m, wrapperspb.String("refuse"), resp); !errors.As(err, &remote) ||
			!strings.Contains(remote.Msg, "refused by the decoder") {
			t.Fatalf("method %d: a refused payload gave %v", m, err)
		}
	}
	resp := new(wrapperspb.StringValue)
	if err := c.Call(context.Background(), mUpper, wrapperspb.String("again"), resp); err != nil || resp.Value != "AGAIN" {
		t.Fatalf("after the refusals: %q, %v", resp.Value, err)
	}
}
