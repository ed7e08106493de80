package client

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ConsumeStats is a group's progress.
type ConsumeStats struct {
	Group    string
	Queues   []QueueConsumeStats
	TotalLag int64
}

// QueueConsumeStats is a group's progress on one queue.
type QueueConsumeStats struct {
	Queue MessageQueue
	// BrokerOffset is the queue's max offset; ConsumerOffset the group's
	// committed offset (-1 when none); Lag their difference.
	BrokerOffset   int64
	ConsumerOffset int64
	Lag            int64
	// LastTimestamp is the store time of the queue's newest message.
	LastTimestamp time.Time
}

// ConsumeStats returns a group's progress on topic ("" = every topic the
// group has offsets for or subscribes to, on every broker).
func (a *Admin) ConsumeStats(ctx context.Context, group, topic string) (*ConsumeStats, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	targets, err := a.brokersOf(ctx, topic)
	if err != nil {
		return nil, err
	}
	st := &ConsumeStats{Group: group}
	for _, bd := range targets {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		var resp *pb.GetConsumeStatsResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.GetConsumeStats(ctx, &pb.GetConsumeStatsRequest{Group: group, Topic: topic})
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, fmt.Errorf("consume stats of %s on %s: %w", group, bd.BrokerName, err)
		}
		for _, q := range resp.GetQueues() {
			qs := QueueConsumeStats{
				Queue:        MessageQueue{Topic: q.GetTopic(), BrokerName: bd.BrokerName, QueueID: q.GetQueueId()},
				BrokerOffset: q.GetBrokerOffset(), ConsumerOffset: q.GetConsumerOffset(),
			}
			qs.Lag = max(0, qs.BrokerOffset-max(0, qs.ConsumerOffset))
			if ts := q.GetLastTimestamp(); ts > 0 {
				qs.LastTimestamp = time.UnixMilli(ts)
			}
			st.Queues = append(st.Queues, qs)
			st.TotalLag += qs.Lag
		}
	}
	slices.SortFunc(st.Queues, func(x, y QueueConsumeStats) int { return compareQueue(x.Queue, y.Queue) })
	return st, nil
}

// ConsumerGroup is a consumer group as the brokers see it.
type ConsumerGroup struct {
	Name    string
	Model   MessageModel
	Orderly bool
	// Subscriptions maps topics to tag expressions.
	Subscriptions map[string]string
	// ClientIDs are the connected members; Brokers the groups that know
	// the consumer group.
	ClientIDs []string
	Brokers   []string
}

// ConsumerGroups returns the consumer groups known to any master, merged.
func (a *Admin) ConsumerGroups(ctx context.Context) ([]ConsumerGroup, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	groups := make(map[string]*ConsumerGroup)
	for _, bd := range ci.allBrokers() {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		var resp *pb.ListConsumerGroupsResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.ListConsumerGroups(ctx, &pb.ListConsumerGroupsRequest{})
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, fmt.Errorf("consumer groups on %s: %w", bd.BrokerName, err)
		}
		for _, g := range resp.GetGroups() {
			cg := groups[g.GetGroup()]
			if cg == nil {
				cg = &ConsumerGroup{Name: g.GetGroup(), Subscriptions: make(map[string]string)}
				groups[g.GetGroup()] = cg
			}
			if g.GetMessageModel() == pb.MessageModel_BROADCASTING {
				cg.Model = Broadcasting
			}
			cg.Orderly = cg.Orderly || g.GetOrderly()
			for _, s := range g.GetSubscriptions() {
				cg.Subscriptions[s.GetTopic()] = s.GetExpression()
			}
			cg.ClientIDs = append(cg.ClientIDs, g.GetClientIds()...)
			cg.Brokers = append(cg.Brokers, bd.BrokerName)
		}
	}
	out := make([]ConsumerGroup, 0, len(groups))
	for _, cg := range groups {
		sort.Strings(cg.ClientIDs)
		cg.ClientIDs = slices.Compact(cg.ClientIDs)
		out = append(out, *cg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ResetTarget is where ResetOffset moves a group.
type ResetTarget struct {
	earliest, latest bool
	at               time.Time
}

var (
	// ResetToEarliest moves to each queue's min offset.
	ResetToEarliest = ResetTarget{earliest: true}
	// ResetToLatest moves to each queue's max offset (skips everything).
	ResetToLatest = ResetTarget{latest: true}
)

// ResetToTime moves to the first message stored at or after t.
func ResetToTime(t time.Time) ResetTarget { return ResetTarget{at: t} }

// OffsetChange is one queue's committed offset before and after a reset.
type OffsetChange struct {
	Queue  MessageQueue
	Before int64
	After  int64
}

// ResetOffset moves a group's committed offsets on topic. With dryRun
// nothing changes and the result shows what would. Members still running
// keep consuming from their own position and commit it again: reset the
// offsets of a stopped group.
func (a *Admin) ResetOffset(ctx context.Context, group, topic string, to ResetTarget, dryRun bool) ([]OffsetChange, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	if !to.earliest && !to.latest && to.at.IsZero() {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "no reset target")
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	req := &pb.ResetOffsetRequest{Group: group, Topic: topic, ToEarliest: to.earliest, ToLatest: to.latest, DryRun: dryRun}
	if !to.at.IsZero() {
		req.TimestampMs = to.at.UnixMilli()
	}
	var out []OffsetChange
	for _, bd := range r.Brokers {
		addr := bd.MasterAddr()
		if addr == "" {
			return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", bd.BrokerName)
		}
		var resp *pb.ResetOffsetResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.ResetOffset(ctx, req)
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, fmt.Errorf("reset offsets of %s on %s: %w", group, bd.BrokerName, err)
		}
		for _, ch := range resp.GetChanges() {
			out = append(out, OffsetChange{Queue: MessageQueue{Topic: topic, BrokerName: bd.BrokerName, QueueID: ch.GetQueueId()},
				Before: ch.GetBefore(), After: ch.GetAfter()})
		}
	}
	slices.SortFunc(out, func(x, y OffsetChange) int { return compareQueue(x.Queue, y.Queue) })
	return out, nil
}
