package wire

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
)

// CallClass is how a daemon's guard checks a bolide.v1 method (the
// NameServer's services, the controller's).
type CallClass uint8

const (
	// CallInternal: a call between daemons (Guard.Internal: an admin user
	// with ACL on, anyone with it off).
	CallInternal CallClass = iota + 1
	// CallAdmin: administration (Guard.Admin), checked with ACL off too.
	CallAdmin
	// CallRead: any authenticated caller (Guard.Authenticated).
	CallRead
)

// AuthorizeCall checks the gRPC call ctx belongs to with g for class
// (what names the call in the guard's messages). With ACL off only
// CallAdmin is checked; otherwise the call's signed-date metadata
// (authorization, x-mq-date-time) authenticates the caller from its
// connection's address (Guard.Header) and class decides; a class of none
// of the constants needs an authenticated caller.
func AuthorizeCall(ctx context.Context, g *auth.Guard, class CallClass, what string) error {
	if !g.Enabled() && class != CallAdmin {
		return nil
	}
	p, peerAddr, err := Authenticate(ctx, g)
	if err != nil {
		return err
	}
	switch class {
	case CallInternal:
		return g.Internal(p, peerAddr, what)
	case CallAdmin:
		return g.Admin(p, peerAddr, what)
	default:
		return g.Authenticated(p, peerAddr)
	}
}

// MethodName is the last element of a full gRPC method name
// ("/bolide.v1.Controller/Heartbeat": "Heartbeat").
func MethodName(full string) string {
	return full[strings.LastIndexByte(full, '/')+1:]
}

// CallPeer is the address of the connection the gRPC call ctx belongs to
// ("" when unknown): what the guard checks whitelists and replays against.
func CallPeer(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// Authenticate checks the signed-date metadata of the gRPC call ctx
// belongs to (authorization, x-mq-date-time) with g: the caller (nil with
// ACL off) and its connection's address.
func Authenticate(ctx context.Context, g *auth.Guard) (*auth.Principal, string, error) {
	from := CallPeer(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	p, err := g.Header(from, firstMD(md, auth.HeaderAuthorization), firstMD(md, auth.HeaderDate))
	return p, from, err
}

// firstMD is the first value of a header, spaces trimmed; "" when absent.
func firstMD(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// StreamWithContext is ss served with ctx (a context carrying the
// authenticated caller) as its Context.
func StreamWithContext(ss grpc.ServerStream, ctx context.Context) grpc.ServerStream {
	if ctx == ss.Context() {
		return ss
	}
	return &ctxStream{ServerStream: ss, ctx: ctx}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
