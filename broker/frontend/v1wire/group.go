package v1wire

import (
	"maps"
	"slices"

	"github.com/bolide-mq/bolide/broker/subgroup"
	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// GroupToProto converts a subscription group's configuration.
func GroupToProto(c subgroup.Config) *pb.SubscriptionGroupConfig {
	return &pb.SubscriptionGroupConfig{
		Group: c.GroupName, ConsumeEnable: proto.Bool(c.ConsumeEnable), ConsumeFromMinEnable: c.ConsumeFromMinEnable,
		ConsumeBroadcastEnable: c.ConsumeBroadcastEnable, ConsumeMessageOrderly: c.ConsumeMessageOrderly,
		RetryQueueNums: c.RetryQueueNums, RetryMaxTimes: c.RetryMaxTimes, BrokerId: c.BrokerID,
		WhichBrokerWhenConsumeSlowly: c.WhichBrokerWhenConsumeSlowly, NotifyConsumerIdsChangedEnable: c.NotifyConsumerIDsChangedEnable,
		GroupSysFlag: c.GroupSysFlag, ConsumeTimeoutMinute: c.ConsumeTimeoutMinute, Attributes: maps.Clone(c.Attributes),
		RetryPolicy: RetryPolicyToProto(c.GroupRetryPolicy),
	}
}

// ConsumeEnabled reports whether a group's configuration lets it consume:
// consume_enable unset is true, as in RocketMQ, so a request that leaves
// it out does not stop the group.
func ConsumeEnabled(p *pb.SubscriptionGroupConfig) bool {
	return p.ConsumeEnable == nil || *p.ConsumeEnable
}

// GroupFromProto converts a subscription group's configuration.
func GroupFromProto(p *pb.SubscriptionGroupConfig) subgroup.Config {
	c := subgroup.Config{
		GroupName: p.GetGroup(), ConsumeEnable: ConsumeEnabled(p), ConsumeFromMinEnable: p.GetConsumeFromMinEnable(),
		ConsumeBroadcastEnable: p.GetConsumeBroadcastEnable(), ConsumeMessageOrderly: p.GetConsumeMessageOrderly(),
		RetryQueueNums: p.GetRetryQueueNums(), RetryMaxTimes: p.GetRetryMaxTimes(), BrokerID: p.GetBrokerId(),
		WhichBrokerWhenConsumeSlowly: p.GetWhichBrokerWhenConsumeSlowly(), NotifyConsumerIDsChangedEnable: p.GetNotifyConsumerIdsChangedEnable(),
		GroupSysFlag: p.GetGroupSysFlag(), ConsumeTimeoutMinute: p.GetConsumeTimeoutMinute(),
		GroupRetryPolicy: RetryPolicyFromProto(p.GetRetryPolicy()),
	}
	if len(p.GetAttributes()) > 0 {
		c.Attributes = maps.Clone(p.GetAttributes())
	}
	return c
}

// RetryPolicyToProto converts a retry policy (nil stays nil).
func RetryPolicyToProto(p *subgroup.RetryPolicy) *pb.RetryPolicy {
	if p == nil {
		return nil
	}
	out := &pb.RetryPolicy{Type: p.Type}
	if e := p.Exponential; e != nil {
		out.Exponential = &pb.ExponentialRetryPolicy{InitialMs: e.Initial, MaxMs: e.Max, Multiplier: e.Multiplier}
	}
	if c := p.Customized; c != nil {
		out.Customized = &pb.CustomizedRetryPolicy{NextMs: slices.Clone(c.Next)}
	}
	return out
}

// RetryPolicyFromProto converts a retry policy (nil stays nil).
func RetryPolicyFromProto(p *pb.RetryPolicy) *subgroup.RetryPolicy {
	if p == nil {
		return nil
	}
	out := &subgroup.RetryPolicy{Type: p.Type}
	if e := p.Exponential; e != nil {
		out.Exponential = &subgroup.ExponentialPolicy{Initial: e.InitialMs, Max: e.MaxMs, Multiplier: e.Multiplier}
	}
	if c := p.Customized; c != nil {
		out.Customized = &subgroup.CustomizedPolicy{Next: slices.Clone(c.NextMs)}
	}
	return out
}
