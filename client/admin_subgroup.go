package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ErrGroupExists is returned by CreateSubscriptionGroup for a group that
// is already declared on one of the target brokers.
var ErrGroupExists = errors.New("subscription group already exists")

// DefaultMaxDeliveryAttempts is the maximum delivery attempts of a group
// declared without any (RocketMQ's 16 retries after the first delivery).
const DefaultMaxDeliveryAttempts = 17

// Retry policy types of a subscription group.
const (
	RetryCustomized  = "CUSTOMIZED"
	RetryExponential = "EXPONENTIAL"
)

// ExponentialBackoff waits Initial × Multiplier^n before the (n+1)-th
// retry, at most Max.
type ExponentialBackoff struct {
	Initial, Max time.Duration
	Multiplier   int64
}

// SubscriptionGroupSpec declares a subscription group: how the brokers
// treat the messages a consumer group receives over POP (SimpleConsumer),
// and whether the group may consume at all.
type SubscriptionGroupSpec struct {
	Name string
	// FIFO: a queue hands out its next messages only once the previous
	// ones are acknowledged (RocketMQ's consumeMessageOrderly).
	FIFO bool
	// MaxDeliveryAttempts: a message delivered this many times without an
	// acknowledgement goes to %DLQ%<group> (0: DefaultMaxDeliveryAttempts).
	MaxDeliveryAttempts int
	// RetryBackoff is the wait before the first, second, ... redelivery
	// of a nacked message; the last value repeats. Nil with Exponential
	// nil: the default backoff (10s 30s 1m 2m ... 2h).
	RetryBackoff []time.Duration
	// Exponential, when set, replaces RetryBackoff.
	Exponential *ExponentialBackoff
	// ConsumeEnable false stops the group: the brokers refuse its pulls and
	// POP receives (ErrNoPermission, on every protocol) and keep its offsets;
	// true starts it again where it stopped. Nil keeps what is declared (a
	// new declaration: enabled). Sends to its topics are not affected.
	ConsumeEnable *bool
	// Cluster limits the declaration to one cluster's masters;
	// BrokerNames to the listed broker groups. With neither, every master
	// of every cluster gets it.
	Cluster     string
	BrokerNames []string
}

// SubscriptionGroup is a group's declaration on one broker group.
type SubscriptionGroup struct {
	Name       string
	BrokerName string
	FIFO       bool
	// MaxDeliveryAttempts is the retry maximum plus one.
	MaxDeliveryAttempts int
	// RetryPolicy is RetryCustomized or RetryExponential.
	RetryPolicy string
	// RetryBackoff (customized policy) is the wait before each retry, the
	// last value repeating; Exponential the exponential policy.
	RetryBackoff []time.Duration
	Exponential  *ExponentialBackoff
	// ConsumeEnable is false for a group an operator stopped.
	ConsumeEnable bool
	// Attributes are the group's attributes (nil: none).
	Attributes map[string]string
}

// defaultGroupConfig is an undeclared group's configuration (the broker's
// subgroup.Default).
func defaultGroupConfig(group string) *pb.SubscriptionGroupConfig {
	return &pb.SubscriptionGroupConfig{
		Group: group, ConsumeEnable: proto.Bool(true), ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: DefaultMaxDeliveryAttempts - 1, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15,
	}
}

// apply sets the spec's settings on cfg, keeping the others.
func (s *SubscriptionGroupSpec) apply(cfg *pb.SubscriptionGroupConfig) {
	cfg.ConsumeMessageOrderly = s.FIFO
	attempts := s.MaxDeliveryAttempts
	if attempts == 0 {
		attempts = DefaultMaxDeliveryAttempts
	}
	cfg.RetryMaxTimes = int32(attempts - 1)
	if s.ConsumeEnable != nil {
		cfg.ConsumeEnable = proto.Bool(*s.ConsumeEnable)
	}
	switch {
	case s.Exponential != nil:
		e := s.Exponential
		cfg.RetryPolicy = &pb.RetryPolicy{Type: RetryExponential, Exponential: &pb.ExponentialRetryPolicy{
			InitialMs: e.Initial.Milliseconds(), MaxMs: e.Max.Milliseconds(), Multiplier: e.Multiplier}}
	case len(s.RetryBackoff) > 0:
		// RocketMQ reads a customized policy's next[retries+2]: the two
		// leading entries are never the wait before a retry.
		next := []int64{s.RetryBackoff[0].Milliseconds(), s.RetryBackoff[0].Milliseconds()}
		for _, d := range s.RetryBackoff {
			next = append(next, d.Milliseconds())
		}
		cfg.RetryPolicy = &pb.RetryPolicy{Type: RetryCustomized, Customized: &pb.CustomizedRetryPolicy{NextMs: next}}
	default:
		cfg.RetryPolicy = nil
	}
}

func (s *SubscriptionGroupSpec) validate() error {
	if err := message.ValidateGroup(s.Name); err != nil {
		return codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	if s.MaxDeliveryAttempts < 0 || s.MaxDeliveryAttempts > 1000 {
		return codeErr(pb.Code_INVALID_PARAMETER, "max delivery attempts must be in 1..1000, got %d", s.MaxDeliveryAttempts)
	}
	for _, d := range s.RetryBackoff {
		if d < 0 {
			return codeErr(pb.Code_INVALID_PARAMETER, "retry backoff %s is negative", d)
		}
	}
	if e := s.Exponential; e != nil && (e.Initial < 0 || e.Max < e.Initial || e.Multiplier < 1) {
		return codeErr(pb.Code_INVALID_PARAMETER, "exponential backoff needs 0 <= initial <= max and multiplier >= 1")
	}
	return nil
}

// defaultRetryBackoff is RocketMQ's default customized policy as waits
// before each retry.
var defaultRetryBackoff = []time.Duration{
	10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute,
	5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

func groupFromProto(brokerName string, c *pb.SubscriptionGroupConfig) SubscriptionGroup {
	g := SubscriptionGroup{
		Name: c.GetGroup(), BrokerName: brokerName, FIFO: c.GetConsumeMessageOrderly(),
		MaxDeliveryAttempts: int(c.GetRetryMaxTimes()) + 1, RetryPolicy: RetryCustomized, ConsumeEnable: c.ConsumeEnable == nil || *c.ConsumeEnable,
	}
	if len(c.GetAttributes()) > 0 {
		g.Attributes = maps.Clone(c.GetAttributes())
	}
	p := c.GetRetryPolicy()
	switch {
	case p.GetType() == RetryExponential:
		g.RetryPolicy = RetryExponential
		g.Exponential = &ExponentialBackoff{Initial: 5 * time.Second, Max: 2 * time.Hour, Multiplier: 2}
		if e := p.GetExponential(); e != nil {
			g.Exponential = &ExponentialBackoff{Initial: time.Duration(e.GetInitialMs()) * time.Millisecond,
				Max: time.Duration(e.GetMaxMs()) * time.Millisecond, Multiplier: e.GetMultiplier()}
		}
	case len(p.GetCustomized().GetNextMs()) > 0:
		next := p.GetCustomized().GetNextMs()
		for i := 2; i < len(next); i++ {
			g.RetryBackoff = append(g.RetryBackoff, time.Duration(next[i])*time.Millisecond)
		}
		if len(g.RetryBackoff) == 0 {
			g.RetryBackoff = []time.Duration{time.Duration(next[len(next)-1]) * time.Millisecond}
		}
	default:
		g.RetryBackoff = append([]time.Duration(nil), defaultRetryBackoff...)
	}
	return g
}

// CreateSubscriptionGroup declares a group on its brokers' masters. A
// group already declared on one of them is an error matching
// ErrGroupExists (and nothing is changed).
func (a *Admin) CreateSubscriptionGroup(ctx context.Context, spec SubscriptionGroupSpec) error {
	return a.putGroup(ctx, spec, true)
}

// UpdateSubscriptionGroup declares a group, or changes its FIFO flag,
// maximum delivery attempts, retry backoff and (when spec.ConsumeEnable is
// set) whether it may consume; its other settings (as RocketMQ's tools may
// have set them) are kept.
func (a *Admin) UpdateSubscriptionGroup(ctx context.Context, spec SubscriptionGroupSpec) error {
	return a.putGroup(ctx, spec, false)
}

func (a *Admin) putGroup(ctx context.Context, spec SubscriptionGroupSpec, create bool) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := spec.validate(); err != nil {
		return err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	targets, err := ci.targets(spec.Cluster, spec.BrokerNames)
	if err != nil {
		return err
	}
	cfgs := make([]*pb.SubscriptionGroupConfig, len(targets))
	for i, bd := range targets {
		addr := bd.MasterAddr()
		if addr == "" {
			return codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", bd.BrokerName)
		}
		cur, err := a.getGroup(ctx, addr, spec.Name)
		switch {
		case errors.Is(err, ErrGroupNotExist):
			cur = defaultGroupConfig(spec.Name)
		case err != nil:
			return fmt.Errorf("subscription group %s on %s: %w", spec.Name, bd.BrokerName, err)
		case create:
			return fmt.Errorf("subscription group %s on %s: %w", spec.Name, bd.BrokerName, ErrGroupExists)
		}
		spec.apply(cur)
		cfgs[i] = cur
	}
	for i, bd := range targets {
		err := a.brokerCall(ctx, bd.MasterAddr(), func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			resp, err := c.PutSubscriptionGroup(ctx, &pb.PutSubscriptionGroupRequest{Group: cfgs[i], Create: create})
			return resp.GetStatus(), err
		})
		if err != nil {
			return fmt.Errorf("put subscription group %s on %s: %w", spec.Name, bd.BrokerName, err)
		}
	}
	return nil
}

func (a *Admin) getGroup(ctx context.Context, addr, group string) (*pb.SubscriptionGroupConfig, error) {
	var resp *pb.GetSubscriptionGroupResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = c.GetSubscriptionGroup(ctx, &pb.GetSubscriptionGroupRequest{Group: group})
		return resp.GetStatus(), err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetGroup(), nil
}

// SubscriptionGroup returns a group's declaration on every broker group
// that has one (asked on the master, or its lowest slave when it has
// none), by broker name. A group declared nowhere is an error matching
// ErrGroupNotExist.
func (a *Admin) SubscriptionGroup(ctx context.Context, group string) ([]SubscriptionGroup, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []SubscriptionGroup
	for _, bd := range ci.allBrokers() {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		cfg, err := a.getGroup(ctx, addr, group)
		if errors.Is(err, ErrGroupNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("subscription group %s on %s: %w", group, bd.BrokerName, err)
		}
		out = append(out, groupFromProto(bd.BrokerName, cfg))
	}
	if len(out) == 0 {
		return nil, codeErr(pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group %s is not declared on any broker", group)
	}
	return out, nil
}

// SubscriptionGroups lists the declared groups of every broker group, by
// name, then broker name.
func (a *Admin) SubscriptionGroups(ctx context.Context) ([]SubscriptionGroup, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []SubscriptionGroup
	for _, bd := range ci.allBrokers() {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		var resp *pb.ListSubscriptionGroupsResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.ListSubscriptionGroups(ctx, &pb.ListSubscriptionGroupsRequest{})
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, fmt.Errorf("subscription groups on %s: %w", bd.BrokerName, err)
		}
		for _, g := range resp.GetGroups() {
			out = append(out, groupFromProto(bd.BrokerName, g))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].BrokerName < out[j].BrokerName
	})
	return out, nil
}

// DeleteSubscriptionGroup removes a group's declaration from every master
// that has it; with cleanOffsets its consumer offsets go too. A group
// declared nowhere is an error matching ErrGroupNotExist.
func (a *Admin) DeleteSubscriptionGroup(ctx context.Context, group string, cleanOffsets bool) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := message.ValidateGroup(group); err != nil {
		return codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	deleted := 0
	for _, bd := range ci.allBrokers() {
		addr := bd.MasterAddr()
		if addr == "" {
			continue
		}
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			resp, err := c.DeleteSubscriptionGroup(ctx, &pb.DeleteSubscriptionGroupRequest{Group: group, CleanOffsets: cleanOffsets})
			return resp.GetStatus(), err
		})
		if errors.Is(err, ErrGroupNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete subscription group %s on %s: %w", group, bd.BrokerName, err)
		}
		deleted++
	}
	if deleted == 0 {
		return codeErr(pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group %s is not declared on any master", group)
	}
	return nil
}
