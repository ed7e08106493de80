package nameserver

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/frame"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// frameClient is a frame-protocol client of the NameServer at addr,
// identified by c when it is not empty.
func frameClient(t *testing.T, addr string, c auth.Credentials) *frame.Client {
	t.Helper()
	var o frame.Options
	if !c.Empty() {
		o.Auth = func() *pb.FrameAuthRequest {
			a, d := auth.NewHeader(c, time.Now())
			return &pb.FrameAuthRequest{Authorization: a, DateTime: d}
		}
	}
	fc := frame.NewClient(addr, o)
	t.Cleanup(func() { _ = fc.Close() })
	return fc
}

func frameRoute(t *testing.T, fc *frame.Client, topic string) (*pb.GetRouteResponse, error) {
	t.Helper()
	resp := new(pb.GetRouteResponse)
	err := fc.Call(ctx(t), frame.MethodGetRoute, &pb.GetRouteRequest{Topic: topic}, resp)
	return resp, err
}

// TestRoutesOverFrames: the port answers GetRoute over the frame protocol
// with the route gRPC answers, an unknown topic with TOPIC_NOT_EXIST, and
// a broker's method with an error frame, the connection staying usable.
// With NoFrames a frame connection is closed on its magic.
func TestRoutesOverFrames(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	c := dial(t, s.Addr())
	register(t, c, registerReq("b1", 0, "127.0.0.1:10911", "orders", "audit"))
	fc := frameClient(t, s.Addr(), auth.Credentials{})

	got, err := frameRoute(t, fc, "orders")
	if err != nil || got.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("frame GetRoute: %v %v", got.GetStatus(), err)
	}
	want, err := route(t, c, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetRoute(), want) || len(want.GetQueueDatas()) != 1 {
		t.Fatalf("frame route %v, gRPC route %v", got.GetRoute(), want)
	}

	missing, err := frameRoute(t, fc, "no-such-topic")
	if err != nil || missing.GetStatus().GetCode() != pb.Code_TOPIC_NOT_EXIST || missing.GetRoute() != nil {
		t.Fatalf("unknown topic: %v %v, want TOPIC_NOT_EXIST", missing.GetStatus(), err)
	}

	var remote *frame.RemoteError
	err = fc.Call(ctx(t), frame.MethodSend, &pb.SendRequest{}, new(pb.SendResponse))
	if !errors.As(err, &remote) {
		t.Fatalf("Send to a NameServer: %v, want an error frame", err)
	}
	if again, err := frameRoute(t, fc, "audit"); err != nil || again.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("lookup after the error frame: %v %v", again.GetStatus(), err)
	}

	off := startServer(t, func(o *Options) { o.GossipAddr = GossipOff; o.NoFrames = true })
	var ce *frame.ConnError
	_, err = frameRoute(t, frameClient(t, off.Addr(), auth.Credentials{}), "orders")
	if !errors.As(err, &ce) || ce.Op != "handshake" {
		t.Fatalf("frames off: %v, want the connection closed on the handshake", err)
	}
}

// TestRoutesOverFramesACL: with ACL on, a lookup over frames needs an
// authenticated connection, as over gRPC: without an Auth request, or with
// a forged one, UNAUTHENTICATED and no route; with a user's key, the route.
func TestRoutesOverFramesACL(t *testing.T) {
	s, cc := aclServer(t, true, "127.0.0.1:0")
	r, err := pb.NewNameServerClient(cc).RegisterBroker(as(t, v1Admin), registration("b1"))
	statusIs(t, "register as admin", r.GetStatus(), err, pb.Code_OK)

	anon, err := frameRoute(t, frameClient(t, s.Addr(), auth.Credentials{}), "t-b1")
	statusIs(t, "frame route without credentials", anon.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	if anon.GetRoute() != nil {
		t.Fatal("a refused lookup answered a route")
	}
	var refused *frame.AuthError
	forged := auth.Credentials{AccessKey: v1User.AccessKey, SecretKey: "forged"}
	if _, err := frameRoute(t, frameClient(t, s.Addr(), forged), "t-b1"); !errors.As(err, &refused) {
		t.Fatalf("forged credentials: %v, want the Auth request refused", err)
	}
	user, err := frameRoute(t, frameClient(t, s.Addr(), v1User), "t-b1")
	statusIs(t, "frame route as a user", user.GetStatus(), err, pb.Code_OK)
	if len(user.GetRoute().GetQueueDatas()) != 1 {
		t.Fatalf("route as a user: %v", user.GetRoute())
	}
}
