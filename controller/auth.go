package controller

import (
	"context"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Access control of bolide.v1.Controller (Options.Guard): the brokers'
// heartbeats and sync state set changes are calls between daemons
// (Guard.Internal: an admin user with ACL on), an election is
// administration (Guard.Admin), a description needs an authenticated
// caller. Each call carries the signed-date header as metadata; a refused
// unary call gets the coded error in its response's Status, a refused
// heartbeat stream ends with it as a gRPC status (wire.GRPCError).

// methodClasses classifies every Controller method (TestMethodClasses
// keeps it complete).
var methodClasses = map[string]wire.CallClass{
	pb.Controller_Heartbeat_FullMethodName:          wire.CallInternal,
	pb.Controller_AlterSyncStateSet_FullMethodName:  wire.CallInternal,
	pb.Controller_ElectMaster_FullMethodName:        wire.CallAdmin,
	pb.Controller_DescribeController_FullMethodName: wire.CallRead,
}

// authorize checks a call to method on ctx's connection.
func (c *Controller) authorize(ctx context.Context, method string) error {
	return wire.AuthorizeCall(ctx, c.opts.Guard, methodClasses[method], "controller "+wire.MethodName(method))
}
