package grpcapi

import (
	"context"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// CheckSubscription validates a subscription's filter with the core
// (broker.CheckFilter): what the SDK asks before it subscribes with SQL92.
func (s *brokerService) CheckSubscription(_ context.Context, req *pb.CheckSubscriptionRequest) (*pb.CheckSubscriptionResponse, error) {
	sub := req.GetSubscription()
	if sub == nil {
		return &pb.CheckSubscriptionResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no subscription"))}, nil
	}
	return &pb.CheckSubscriptionResponse{Status: wire.Status(s.b.CheckFilter(sub.GetExpressionType(), sub.GetExpression()))}, nil
}
