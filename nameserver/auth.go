package nameserver

import (
	"context"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Access control of the NameServer's bolide.v1 services (NameServer and
// Acl; the embedded controller checks its own with the same guard). Every
// call carries the signed-date header as metadata (authorization,
// x-mq-date-time), signed afresh for each call; each handler first checks
// its method's class from rpcClasses and answers a refusal in its
// response's Status (UNAUTHENTICATED or NO_PERMISSION), doing nothing else.

// rpcClass is how a bolide.v1 method of the NameServer is checked.
type rpcClass uint8

const (
	// rpcInternal: a broker's call (Guard.Internal: an admin user with
	// ACL on, anyone with it off).
	rpcInternal rpcClass = iota + 1
	// rpcAdmin: administration (Guard.Admin).
	rpcAdmin
	// rpcRead: any authenticated caller (Guard.Authenticated).
	rpcRead
)

// rpcClasses classifies every bolide.v1 method the NameServer serves
// (TestRPCClasses keeps it complete).
var rpcClasses = map[string]rpcClass{
	pb.NameServer_RegisterBroker_FullMethodName:   rpcInternal,
	pb.NameServer_UnregisterBroker_FullMethodName: rpcInternal,
	pb.NameServer_DeleteTopic_FullMethodName:      rpcAdmin,
	pb.NameServer_GetRoute_FullMethodName:         rpcRead,
	pb.NameServer_GetClusterInfo_FullMethodName:   rpcRead,
	pb.NameServer_ListTopics_FullMethodName:       rpcRead,
	pb.Acl_ListUsers_FullMethodName:               rpcAdmin,
	pb.Acl_PutUser_FullMethodName:                 rpcAdmin,
	pb.Acl_DeleteUser_FullMethodName:              rpcAdmin,
}

// authorizeRPC checks a call to method (a full method name) on ctx's
// connection with the NameServer's guard.
func (s *Server) authorizeRPC(ctx context.Context, method string) error {
	g := s.guard
	class, known := rpcClasses[method]
	if !g.Enabled() && class != rpcAdmin {
		return nil // ACL off: only administration is checked (loopback)
	}
	peerAddr := rpcPeer(ctx)
	p, err := g.Header(peerAddr, rpcHeader(ctx, auth.HeaderAuthorization), rpcHeader(ctx, auth.HeaderDate))
	if err != nil {
		return err
	}
	what := "NameServer " + rpcMethodName(method)
	switch {
	case !known:
		return g.Admin(p, peerAddr, what) // unclassified: administration
	case class == rpcInternal:
		return g.Internal(p, peerAddr, what)
	case class == rpcAdmin:
		return g.Admin(p, peerAddr, what)
	default:
		return g.Authenticated(p, peerAddr)
	}
}

func rpcPeer(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func rpcHeader(ctx context.Context, key string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func rpcMethodName(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}
