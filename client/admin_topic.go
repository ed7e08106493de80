package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TopicSpec describes a topic to create or update.
type TopicSpec struct {
	Name string
	// Queues is the number of read and write queues on each broker
	// (default 8).
	Queues int
	// Perm defaults to PermReadWrite.
	Perm  Perm
	Order bool
	// MessageType is the type of message the topic accepts: one of
	// TopicNormal, TopicFIFO, TopicDelay, TopicTransaction, TopicMixed
	// (case-insensitive), stored as the topic attribute message.type. ""
	// sets no type: the topic accepts every type, as TopicMixed. The spec
	// is the topic's whole configuration: UpdateTopic with "" removes a
	// type the topic had.
	MessageType string
	// Cluster limits the topic to one cluster's masters; BrokerNames to
	// the listed broker groups. With neither, every master of every
	// cluster gets the topic.
	Cluster     string
	BrokerNames []string
}

// CreateTopic creates a topic on its brokers' masters and waits until the
// NameServers route it to all of them. An existing topic is an error
// matching ErrTopicExists.
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec) error {
	return a.putTopic(ctx, spec, false)
}

// UpdateTopic changes a topic (queues, permission, order, type, the
// broker groups it is on) and waits until the NameServers route the new
// configuration. A topic no registered broker has is an error matching
// ErrTopicNotExist, and nothing is created: create it with CreateTopic
// (RocketMQ's updateTopic creates; an update that silently creates a
// mistyped name is worse than one more command).
func (a *Admin) UpdateTopic(ctx context.Context, spec TopicSpec) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := message.ValidateTopic(spec.Name); err != nil {
		return codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if _, err := a.Route(ctx, spec.Name); err != nil {
		if errors.Is(err, ErrTopicNotExist) {
			return codeErr(pb.Code_TOPIC_NOT_EXIST, "topic %q does not exist on any registered broker: create it with CreateTopic", spec.Name)
		}
		return err
	}
	return a.putTopic(ctx, spec, true)
}

func (a *Admin) putTopic(ctx context.Context, spec TopicSpec, update bool) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := message.ValidateTopic(spec.Name); err != nil {
		return codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if spec.Queues == 0 {
		spec.Queues = 8
	}
	if spec.Queues < 0 || spec.Queues > 1024 {
		return codeErr(pb.Code_INVALID_PARAMETER, "queues must be in 1..1024, got %d", spec.Queues)
	}
	if spec.Perm == 0 {
		spec.Perm = PermReadWrite
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	targets, err := ci.targets(spec.Cluster, spec.BrokerNames)
	if err != nil {
		return err
	}
	tc := &pb.TopicConfig{Name: spec.Name, ReadQueueNums: int32(spec.Queues), WriteQueueNums: int32(spec.Queues),
		Perm: int32(spec.Perm), Order: spec.Order}
	if spec.MessageType != "" {
		mt, ok := ParseTopicMessageType(spec.MessageType)
		if !ok {
			return codeErr(pb.Code_INVALID_PARAMETER, "message type %q is not one of %s", spec.MessageType, strings.Join(TopicMessageTypes, ", "))
		}
		tc.Attributes = map[string]string{AttrMessageType: mt}
	}
	for _, bd := range targets {
		addr := bd.MasterAddr()
		if addr == "" {
			return codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", bd.BrokerName)
		}
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			resp, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Topic: tc, Update: update})
			return resp.GetStatus(), err
		})
		if err != nil {
			return fmt.Errorf("create topic %q on %s: %w", spec.Name, bd.BrokerName, err)
		}
	}
	names := make([]string, len(targets))
	for i, bd := range targets {
		names[i] = bd.BrokerName
	}
	return a.waitRoute(ctx, spec.Name, func(r *TopicRoute) bool {
		for _, n := range names {
			i := slices.IndexFunc(r.Queues, func(q QueueData) bool { return q.BrokerName == n })
			if i < 0 || r.Queues[i].ReadQueues != tc.ReadQueueNums || r.Queues[i].WriteQueues != tc.WriteQueueNums ||
				r.Queues[i].Perm != spec.Perm {
				return false
			}
		}
		return true
	}, false)
}

// waitRoute polls every NameServer that answers until done(route) holds
// (or, with gone, until the topic has no route).
func (a *Admin) waitRoute(ctx context.Context, topic string, done func(*TopicRoute) bool, gone bool) error {
	ctx, cancel := withTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ok, err := a.routeEverywhere(ctx, topic, done, gone)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("wait for the route of %q: %w", topic, ctx.Err())
		}
	}
}

func (a *Admin) routeEverywhere(ctx context.Context, topic string, done func(*TopicRoute) bool, gone bool) (bool, error) {
	answered := 0
	for _, addr := range a.b.ns.addrs {
		c, err := a.b.pool.nameServer(addr)
		if err != nil {
			return false, err
		}
		rctx, cancel := a.b.rpcContext(ctx)
		resp, err := c.GetRoute(rctx, &pb.GetRouteRequest{Topic: topic})
		cancel()
		if err != nil {
			continue // unreachable: not waited for
		}
		answered++
		err = fromStatus(resp.GetStatus())
		r := routeFromProto(topic, resp.GetRoute())
		switch {
		case gone:
			if err == nil && len(r.Queues) > 0 {
				return false, nil
			}
		case errors.Is(err, ErrTopicNotExist) || err == nil && !done(r):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("route of %q from %s: %w", topic, addr, err)
		}
	}
	if answered == 0 {
		return false, nil
	}
	return true, nil
}

// DeleteTopic deletes a topic from its brokers, then from every NameServer.
func (a *Admin) DeleteTopic(ctx context.Context, topic string) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := message.ValidateTopic(topic); err != nil {
		return codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	var targets []BrokerData
	if r, err := a.b.ns.getRoute(ctx, topic, nil); err == nil {
		targets = r.Brokers
	} else if errors.Is(err, ErrTopicNotExist) {
		// No route: the topic may still be on a broker that has not
		// registered it yet; ask every master.
		ci, err := a.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		targets = ci.allBrokers()
	} else {
		return err
	}
	for _, bd := range targets {
		addr := bd.MasterAddr()
		if addr == "" {
			continue
		}
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			resp, err := c.DeleteTopic(ctx, &pb.BrokerDeleteTopicRequest{Topic: topic})
			return resp.GetStatus(), err
		})
		if err != nil && !errors.Is(err, ErrTopicNotExist) {
			return fmt.Errorf("delete topic %q on %s: %w", topic, bd.BrokerName, err)
		}
	}
	var errs []error
	for _, addr := range a.b.ns.addrs {
		c, err := a.b.pool.nameServer(addr)
		if err != nil {
			return err
		}
		rctx, cancel := a.b.rpcContext(ctx)
		resp, err := c.DeleteTopic(rctx, &pb.DeleteTopicRequest{Topic: topic})
		cancel()
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil && !errors.Is(err, ErrTopicNotExist) {
			errs = append(errs, fmt.Errorf("delete topic %q on NameServer %s: %w", topic, addr, err))
		}
	}
	return errors.Join(errs...)
}

// ListTopics returns the topics a NameServer knows, sorted.
func (a *Admin) ListTopics(ctx context.Context) ([]string, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var topics []string
	err := a.b.ns.call(ctx, func(ctx context.Context, c pb.NameServerClient) error {
		resp, err := c.ListTopics(ctx, &pb.ListTopicsRequest{})
		if err != nil {
			return err
		}
		if err := fromStatus(resp.GetStatus()); err != nil {
			return err
		}
		topics = append([]string(nil), resp.GetTopics()...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	sort.Strings(topics)
	return topics, nil
}

// Route returns a topic's route as a NameServer has it now.
func (a *Admin) Route(ctx context.Context, topic string) (*TopicRoute, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	return a.b.ns.getRoute(ctx, topic, nil)
}

// QueueStatus is one queue's offsets.
type QueueStatus struct {
	Queue     MessageQueue
	MinOffset int64
	MaxOffset int64
	// LastStoreTime is the store time of the newest message (zero when
	// the queue is empty).
	LastStoreTime time.Time
}

// QueueStatus returns the offsets of every read queue of a topic.
func (a *Admin) QueueStatus(ctx context.Context, topic string) ([]QueueStatus, error) {
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	ri := newRouteInfo(r, time.Now())
	var out []QueueStatus
	for _, mq := range ri.subscribe {
		addr := ri.brokers[mq.BrokerName].ReadAddr()
		if addr == "" {
			return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no address", mq.BrokerName)
		}
		var resp *pb.GetQueueOffsetsResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.GetQueueOffsets(ctx, &pb.GetQueueOffsetsRequest{Topic: topic, QueueId: mq.QueueID})
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, fmt.Errorf("queue status of %s: %w", mq, err)
		}
		qs := QueueStatus{Queue: mq, MinOffset: resp.GetMinOffset(), MaxOffset: resp.GetMaxOffset()}
		if ts := resp.GetLastStoreTimestamp(); ts > 0 {
			qs.LastStoreTime = time.UnixMilli(ts)
		}
		out = append(out, qs)
	}
	return out, nil
}

// TopicConfig is a topic's configuration on one broker group.
type TopicConfig struct {
	Name       string
	BrokerName string
	// ReadQueues and WriteQueues are the topic's queue counts on the
	// group.
	ReadQueues, WriteQueues int32
	Perm                    Perm
	// Order marks an ordered topic (consumers lock its queues).
	Order        bool
	TopicSysFlag int32
	// Attributes are the topic's attributes (nil: none).
	Attributes map[string]string
}

// Topic message types (RocketMQ 5's TopicMessageType): what a topic
// accepts. A topic without a type is mixed: it accepts every type.
const (
	TopicNormal      = "NORMAL"
	TopicFIFO        = "FIFO"
	TopicDelay       = "DELAY"
	TopicTransaction = "TRANSACTION"
	TopicMixed       = "MIXED"
	// AttrMessageType is the topic attribute that holds the type.
	AttrMessageType = "message.type"
)

// TopicMessageTypes lists the message types a topic can be given.
var TopicMessageTypes = []string{TopicNormal, TopicFIFO, TopicDelay, TopicTransaction, TopicMixed}

// ParseTopicMessageType returns the canonical (upper-case) type named by
// s ("" is mixed), or false for an unknown one.
func ParseTopicMessageType(s string) (string, bool) {
	if s == "" {
		return TopicMixed, true
	}
	for _, t := range TopicMessageTypes {
		if strings.EqualFold(s, t) {
			return t, true
		}
	}
	return "", false
}

// MessageType is the topic's message type: TopicMixed when it has none.
func (c *TopicConfig) MessageType() string {
	mt, ok := ParseTopicMessageType(c.Attributes[AttrMessageType])
	if !ok {
		return TopicMixed
	}
	return mt
}

// TopicConfig returns a topic's configuration on each broker group of its
// route, by broker name: what CreateTopic or UpdateTopic set, with the
// order flag the route does not carry. Each group's master is asked (its
// lowest slave when it has none); a group that does not have the topic is
// left out. A topic no group has is an error matching ErrTopicNotExist.
func (a *Admin) TopicConfig(ctx context.Context, topic string) ([]TopicConfig, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateTopic(topic); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []TopicConfig
	for _, bd := range r.Brokers {
		addr := bd.ReadAddr()
		if addr == "" {
			return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no address", bd.BrokerName)
		}
		var resp *pb.GetTopicConfigsResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.GetTopicConfigs(ctx, &pb.GetTopicConfigsRequest{})
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, fmt.Errorf("configuration of %q on %s: %w", topic, bd.BrokerName, err)
		}
		for _, tc := range resp.GetTopics() {
			if tc.GetName() != topic {
				continue
			}
			c := TopicConfig{Name: topic, BrokerName: bd.BrokerName, ReadQueues: tc.GetReadQueueNums(),
				WriteQueues: tc.GetWriteQueueNums(), Perm: Perm(tc.GetPerm()), Order: tc.GetOrder(),
				TopicSysFlag: tc.GetTopicSysFlag()}
			if len(tc.GetAttributes()) > 0 {
				c.Attributes = maps.Clone(tc.GetAttributes())
			}
			out = append(out, c)
			break
		}
	}
	if len(out) == 0 {
		return nil, codeErr(pb.Code_TOPIC_NOT_EXIST, "no broker of the route of %q has the topic", topic)
	}
	return out, nil
}

// AllTopicConfigs returns the configuration of every topic on every broker
// group (asked on its master, or its lowest slave when it has none), by
// topic name. A broker group that does not answer is left out and its
// error returned, joined, with the configurations of the others.
func (a *Admin) AllTopicConfigs(ctx context.Context) (map[string][]TopicConfig, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]TopicConfig)
	var errs []error
	for _, bd := range ci.allBrokers() {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		var resp *pb.GetTopicConfigsResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.GetTopicConfigs(ctx, &pb.GetTopicConfigsRequest{})
			return resp.GetStatus(), err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("topic configurations on %s: %w", bd.BrokerName, err))
			continue
		}
		for _, tc := range resp.GetTopics() {
			c := TopicConfig{Name: tc.GetName(), BrokerName: bd.BrokerName, ReadQueues: tc.GetReadQueueNums(),
				WriteQueues: tc.GetWriteQueueNums(), Perm: Perm(tc.GetPerm()), Order: tc.GetOrder(), TopicSysFlag: tc.GetTopicSysFlag()}
			if len(tc.GetAttributes()) > 0 {
				c.Attributes = maps.Clone(tc.GetAttributes())
			}
			out[c.Name] = append(out[c.Name], c)
		}
	}
	return out, errors.Join(errs...)
}
