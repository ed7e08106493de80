package controller

import (
	"context"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Access control of bolide.v1.Controller (Options.Guard): the brokers'
// heartbeats and sync state set changes are calls between daemons
// (Guard.Internal: an admin user with ACL on), an election is
// administration (Guard.Admin), a description needs an authenticated
// caller. Each call carries the signed-date header as metadata; a refused
// unary call gets the coded error in its response's Status, a refused
// heartbeat stream ends with it as a gRPC status (wire.GRPCError).

// callClass is how a Controller method is checked.
type callClass uint8

const (
	callInternal callClass = iota + 1
	callAdmin
	callRead
)

// methodClasses classifies every Controller method (TestMethodClasses
// keeps it complete).
var methodClasses = map[string]callClass{
	pb.Controller_Heartbeat_FullMethodName:          callInternal,
	pb.Controller_AlterSyncStateSet_FullMethodName:  callInternal,
	pb.Controller_ElectMaster_FullMethodName:        callAdmin,
	pb.Controller_DescribeController_FullMethodName: callRead,
}

// authorize checks a call to method on ctx's connection.
func (c *Controller) authorize(ctx context.Context, method string) error {
	g := c.opts.Guard
	class := methodClasses[method]
	if !g.Enabled() && class != callAdmin {
		return nil
	}
	var peerAddr string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		peerAddr = p.Addr.String()
	}
	var authz, date string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(auth.HeaderAuthorization); len(v) > 0 {
			authz = v[0]
		}
		if v := md.Get(auth.HeaderDate); len(v) > 0 {
			date = v[0]
		}
	}
	p, err := g.Header(peerAddr, authz, date)
	if err != nil {
		return err
	}
	switch class {
	case callInternal:
		return g.Internal(p, peerAddr, "controller "+methodName(method))
	case callAdmin:
		return g.Admin(p, peerAddr, "controller "+methodName(method))
	default:
		return g.Authenticated(p, peerAddr)
	}
}

// methodName is the last element of a full method name.
func methodName(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}
