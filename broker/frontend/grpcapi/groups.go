package grpcapi

import (
	"context"

	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Subscription group administration (group.proto).

func (s *brokerService) GetSubscriptionGroup(_ context.Context, req *pb.GetSubscriptionGroupRequest) (*pb.GetSubscriptionGroupResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.GetSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	c, ok := s.b.LookupSubscriptionGroup(req.Group)
	if !ok {
		return &pb.GetSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST,
			"subscription group %s is not declared on broker %s", req.Group, s.b.Options().BrokerName))}, nil
	}
	return &pb.GetSubscriptionGroupResponse{Status: wire.OK, Group: v1wire.GroupToProto(c)}, nil
}

func (s *brokerService) PutSubscriptionGroup(_ context.Context, req *pb.PutSubscriptionGroupRequest) (*pb.PutSubscriptionGroupResponse, error) {
	if req.Group == nil || req.Group.Group == "" {
		return &pb.PutSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no subscription group given"))}, nil
	}
	c := v1wire.GroupFromProto(req.Group)
	if err := c.GroupRetryPolicy.Validate(); err != nil {
		return &pb.PutSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "group %s: %v", c.GroupName, err))}, nil
	}
	if c.RetryMaxTimes < 0 {
		return &pb.PutSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER,
			"group %s: retry_max_times %d is negative", c.GroupName, c.RetryMaxTimes))}, nil
	}
	// create refuses a declared group; two creates racing on one broker
	// may both succeed (the second replaces the first), as RocketMQ's
	// updateSubGroup would.
	if _, ok := s.b.LookupSubscriptionGroup(c.GroupName); ok && req.Create {
		return &pb.PutSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER,
			"subscription group %s already exists on broker %s", c.GroupName, s.b.Options().BrokerName))}, nil
	}
	return &pb.PutSubscriptionGroupResponse{Status: wire.Status(s.b.UpdateSubscriptionGroup(c))}, nil
}

func (s *brokerService) DeleteSubscriptionGroup(_ context.Context, req *pb.DeleteSubscriptionGroupRequest) (*pb.DeleteSubscriptionGroupResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.DeleteSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	if _, ok := s.b.LookupSubscriptionGroup(req.Group); !ok {
		return &pb.DeleteSubscriptionGroupResponse{Status: wire.Status(wire.Errorf(pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST,
			"subscription group %s is not declared on broker %s", req.Group, s.b.Options().BrokerName))}, nil
	}
	return &pb.DeleteSubscriptionGroupResponse{Status: wire.Status(s.b.DeleteSubscriptionGroup(req.Group, req.CleanOffsets))}, nil
}

func (s *brokerService) ListSubscriptionGroups(context.Context, *pb.ListSubscriptionGroupsRequest) (*pb.ListSubscriptionGroupsResponse, error) {
	groups, v := s.b.SubscriptionGroups()
	resp := &pb.ListSubscriptionGroupsResponse{Status: wire.OK, DataVersion: &pb.DataVersion{Timestamp: v.Timestamp, Counter: v.Counter}}
	for _, c := range groups {
		resp.Groups = append(resp.Groups, v1wire.GroupToProto(c))
	}
	return resp, nil
}
