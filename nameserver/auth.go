package nameserver

import (
	"context"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Access control of the NameServer's bolide.v1 services (NameServer and
// Acl; the embedded controller checks its own with the same guard). Every
// call carries the signed-date header as metadata (authorization,
// x-mq-date-time), signed afresh for each call; each handler first checks
// its method's class from rpcClasses and answers a refusal in its
// response's Status (UNAUTHENTICATED or NO_PERMISSION), doing nothing else.

// rpcClasses classifies every bolide.v1 method the NameServer serves
// (TestRPCClasses keeps it complete); an unclassified one is
// administration with ACL on.
var rpcClasses = map[string]wire.CallClass{
	pb.NameServer_RegisterBroker_FullMethodName:   wire.CallInternal,
	pb.NameServer_UnregisterBroker_FullMethodName: wire.CallInternal,
	pb.NameServer_DeleteTopic_FullMethodName:      wire.CallAdmin,
	pb.NameServer_GetRoute_FullMethodName:         wire.CallRead,
	pb.NameServer_GetClusterInfo_FullMethodName:   wire.CallRead,
	pb.NameServer_ListTopics_FullMethodName:       wire.CallRead,
	pb.Acl_ListUsers_FullMethodName:               wire.CallAdmin,
	pb.Acl_PutUser_FullMethodName:                 wire.CallAdmin,
	pb.Acl_DeleteUser_FullMethodName:              wire.CallAdmin,
}

// authorizeRPC checks a call to method (a full method name) on ctx's
// connection with the NameServer's guard.
func (s *Server) authorizeRPC(ctx context.Context, method string) error {
	class, known := rpcClasses[method]
	if !known {
		if !s.guard.Enabled() {
			return nil // ACL off: only administration is checked (loopback)
		}
		class = wire.CallAdmin // unclassified: administration
	}
	return wire.AuthorizeCall(ctx, s.guard, class, "NameServer "+wire.MethodName(method))
}
