package grpcv5

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/filter"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/message"
)

// The server values of a producer's Settings (Apache's proxy defaults,
// grpcClientProducer*): a failed send is retried twice, after 10 ms, 20 ms
// (exponential up to 1 s).
const (
	producerMaxAttempts    = 3
	producerBackoffInitial = 10 * time.Millisecond
	producerBackoffMax     = time.Second
	producerBackoffFactor  = 2
)

// The server values of a consumer's Settings: a push consumer receives up
// to 32 messages per call and long-polls up to 20 s (capped by the broker's
// LongPollMax).
const (
	receiveBatchSize   = 32
	longPollingTimeout = 20 * time.Second
)

// The exponential retry policy's defaults when a group names the type
// without values (subgroup.RetryPolicy.Backoff uses the same).
const (
	defaultExpInitialMS = 5000
	defaultExpMaxMS     = 2 * 3600 * 1000
	defaultExpFactor    = 2
)

// applySettings stores a client's Settings, tells the core about the
// client (its session) and returns the full server Settings to write back:
// the client's own with the broker's values filled in (settingsFor).
func (s *Service) applySettings(m callMeta, c *client, in *v2.Settings) (*v2.Settings, error) {
	var hb broker.Heartbeat
	var group string
	ns := m.namespace // the client's namespace: its resources', else the header's
	switch ps := in.GetPubSub().(type) {
	case *v2.Settings_Publishing:
		hb = broker.Heartbeat{ClientID: c.id}
		for _, r := range ps.Publishing.GetTopics() {
			t, err := m.topicName(r)
			if err != nil {
				return nil, err
			}
			ns = m.resourceNamespace(r)
			if !slices.Contains(hb.ProducerGroups, t) {
				hb.ProducerGroups = append(hb.ProducerGroups, t)
			}
		}
		// Keep the topics the client's transactional sends added.
		c.mu.Lock()
		for _, t := range c.hb.ProducerGroups {
			if !slices.Contains(hb.ProducerGroups, t) && len(hb.ProducerGroups) < maxProducerTopics {
				hb.ProducerGroups = append(hb.ProducerGroups, t)
			}
		}
		c.mu.Unlock()
	case *v2.Settings_Subscription:
		g, err := m.groupName(ps.Subscription.GetGroup())
		if err != nil {
			return nil, err
		}
		group = g
		ns = m.resourceNamespace(ps.Subscription.GetGroup())
		cfg := s.groupConfig(g)
		cd := broker.ConsumerData{Group: g, Model: broker.Clustering, Pull: in.GetClientType() == v2.ClientType_SIMPLE_CONSUMER,
			Orderly: cfg.Fifo(), ConsumeType: "PUSH"}
		if cd.Pull {
			cd.ConsumeType = "SIMPLE"
		}
		for _, e := range ps.Subscription.GetSubscriptions() {
			t, err := m.topicName(e.GetTopic())
			if err != nil {
				return nil, err
			}
			expr, err := coreExpression(e.GetExpression())
			if err != nil {
				return nil, err
			}
			cd.Subscriptions = append(cd.Subscriptions, broker.Subscription{Topic: t, Expression: expr})
		}
		hb = broker.Heartbeat{ClientID: c.id, Consumers: []broker.ConsumerData{cd}}
	default:
		return nil, errorf(v2.Code_BAD_REQUEST, "settings carry neither publishing nor subscription")
	}
	if err := c.apply(s.b, hb); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.settings = proto.Clone(in).(*v2.Settings)
	c.group = group
	c.namespace = ns
	c.mu.Unlock()
	return s.settingsFor(in, group), nil
}

// coreExpression is the tag expression the core records for a
// subscription: a TAG expression as given; an SQL92 one as "*" (the core's
// member listings hold tag expressions; receives carry their own filter).
// Either is ILLEGAL_FILTER_EXPRESSION when it does not parse.
func coreExpression(f *v2.FilterExpression) (string, error) {
	if f.GetType() == v2.FilterType_SQL {
		if _, err := filter.Compile(f.GetExpression()); err != nil {
			return "", errorf(v2.Code_ILLEGAL_FILTER_EXPRESSION, "%v", err)
		}
		return "*", nil
	}
	expr := f.GetExpression()
	if _, err := message.ParseTagExpression(expr); err != nil {
		return "", errorf(v2.Code_ILLEGAL_FILTER_EXPRESSION, "%v", err)
	}
	if expr == "" {
		expr = "*"
	}
	return expr, nil
}

// groupConfig is a consumer group's subscription-group configuration: the
// declared one, else the defaults.
func (s *Service) groupConfig(group string) subgroup.Config {
	if c, ok := s.b.LookupSubscriptionGroup(group); ok {
		return c
	}
	return subgroup.Default(group)
}

// settingsFor returns the client's Settings in full, with the broker's
// values, of the same pub_sub kind: what the client is told on Telemetry.
//
//   - Producer: backoff_policy (3 attempts, exponential 10 ms × 2 up to
//     1 s), publishing.validate_message_type = true (the topic's message
//     type is enforced), publishing.max_body_size = the broker's
//     maxMessageSize at the time (a client learns a runtime change at its
//     next settings sync; the broker checks each send against the limit
//     of the moment).
//   - Consumer: subscription.fifo = the group's FIFO setting,
//     receive_batch_size 32, long_polling_timeout 20 s, and backoff_policy
//     from the group: max_attempts = its maximum delivery attempts, the
//     strategy its retry policy (consumerBackoff).
//   - metric.on = false.
func (s *Service) settingsFor(in *v2.Settings, group string) *v2.Settings {
	out := proto.Clone(in).(*v2.Settings)
	out.Metric = &v2.Metric{On: false}
	switch ps := out.PubSub.(type) {
	case *v2.Settings_Publishing:
		out.BackoffPolicy = &v2.RetryPolicy{MaxAttempts: producerMaxAttempts, Strategy: &v2.RetryPolicy_ExponentialBackoff{
			ExponentialBackoff: &v2.ExponentialBackoff{Initial: durationpb.New(producerBackoffInitial),
				Max: durationpb.New(producerBackoffMax), Multiplier: producerBackoffFactor}}}
		ps.Publishing.ValidateMessageType = true
		ps.Publishing.MaxBodySize = int32(min(s.b.MaxMessageSize(), 1<<31-1))
	case *v2.Settings_Subscription:
		cfg := s.groupConfig(group)
		ps.Subscription.Fifo = proto.Bool(cfg.Fifo())
		ps.Subscription.ReceiveBatchSize = proto.Int32(receiveBatchSize)
		lpt := longPollingTimeout
		if max := time.Duration(s.limits.longPollMax) * time.Millisecond; max > 0 && max < lpt {
			lpt = max
		}
		ps.Subscription.LongPollingTimeout = durationpb.New(lpt)
		out.BackoffPolicy = consumerBackoff(cfg)
	}
	return out
}

// consumerBackoff is a group's retry policy as a client's backoff_policy.
// max_attempts is the group's maximum delivery attempts (RetryMaxTimes+1,
// 17 by default). The client waits strategy(attempt) after a failed
// delivery attempt (1-based); the broker redelivers a nacked or expired
// message after the group's Backoff(attempt−1). The strategy is built so
// both agree: exponential → the same initial, max and multiplier;
// customized → next[i] = Backoff(i) for every attempt (Apache's proxy
// sends the policy's raw list, whose first two entries its own broker
// skips: RocketMQ's retry level is 3 + reconsume times).
func consumerBackoff(cfg subgroup.Config) *v2.RetryPolicy {
	attempts := max(cfg.MaxDeliveryAttempts(), 1)
	rp := &v2.RetryPolicy{MaxAttempts: int32(attempts)}
	p := cfg.GroupRetryPolicy
	if p != nil && p.Type == subgroup.PolicyExponential {
		e := subgroup.ExponentialPolicy{Initial: defaultExpInitialMS, Max: defaultExpMaxMS, Multiplier: defaultExpFactor}
		if p.Exponential != nil {
			e = *p.Exponential
		}
		rp.Strategy = &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
			Initial: durationpb.New(time.Duration(e.Initial) * time.Millisecond),
			Max:     durationpb.New(time.Duration(e.Max) * time.Millisecond), Multiplier: float32(e.Multiplier)}}
		return rp
	}
	delays := p.Delays(attempts)
	next := make([]*durationpb.Duration, len(delays))
	for i, d := range delays {
		next[i] = durationpb.New(d)
	}
	rp.Strategy = &v2.RetryPolicy_CustomizedBackoff{CustomizedBackoff: &v2.CustomizedBackoff{Next: next}}
	return rp
}
