package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Admin manages topics and inspects brokers, groups and messages. It needs
// no Start; it is safe for concurrent use.
type Admin struct {
	b      *base
	closed atomic.Bool
}

// NewAdmin returns an admin client.
func NewAdmin(opts ...Option) (*Admin, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return &Admin{b: newBase(o, o.instanceName)}, nil
}

// Close closes the connections.
func (a *Admin) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	return a.b.close()
}

func (a *Admin) check() error {
	if a.closed.Load() {
		return ErrClosed
	}
	return nil
}

// TopicSpec describes a topic to create or update.
type TopicSpec struct {
	Name string
	// Queues is the number of read and write queues on each broker
	// (default 8).
	Queues int
	// Perm defaults to PermReadWrite.
	Perm  Perm
	Order bool
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

// UpdateTopic creates or changes a topic (queues, permission, order) and
// waits until the NameServers route the new configuration.
func (a *Admin) UpdateTopic(ctx context.Context, spec TopicSpec) error {
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
		err = wire.FromStatus(resp.GetStatus())
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
	if r, err := a.b.ns.getRoute(ctx, topic); err == nil {
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
			err = wire.FromStatus(resp.GetStatus())
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
		if err := wire.FromStatus(resp.GetStatus()); err != nil {
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
	return a.b.ns.getRoute(ctx, topic)
}

// ClusterInfo is what a NameServer knows about brokers.
type ClusterInfo struct {
	// Brokers by broker name; Clusters maps a cluster to its broker names.
	Brokers  map[string]BrokerData
	Clusters map[string][]string
	Live     []BrokerLive
}

// BrokerLive is one registered broker.
type BrokerLive struct {
	Cluster, BrokerName     string
	BrokerID                int64
	Addr, HAAddr, AdminAddr string
	Version                 string
	LastUpdate              time.Time
	TopicCount              int32
}

// targets returns the broker groups a topic is created on.
func (ci *ClusterInfo) targets(cluster string, names []string) ([]BrokerData, error) {
	var out []BrokerData
	switch {
	case len(names) > 0:
		for _, n := range names {
			bd, ok := ci.Brokers[n]
			if !ok {
				return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "broker %q is not registered", n)
			}
			out = append(out, bd)
		}
	case cluster != "":
		bns, ok := ci.Clusters[cluster]
		if !ok {
			return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "cluster %q is not registered", cluster)
		}
		for _, n := range bns {
			if bd, ok := ci.Brokers[n]; ok {
				out = append(out, bd)
			}
		}
	default:
		out = ci.allBrokers()
	}
	if len(out) == 0 {
		return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "no broker registered")
	}
	return out, nil
}

func (ci *ClusterInfo) allBrokers() []BrokerData {
	out := make([]BrokerData, 0, len(ci.Brokers))
	for _, bd := range ci.Brokers {
		out = append(out, bd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerName < out[j].BrokerName })
	return out
}

// brokerName returns the group an address belongs to ("" if unknown).
func (ci *ClusterInfo) brokerName(addr string) string {
	for name, bd := range ci.Brokers {
		for _, a := range bd.Addrs {
			if a == addr {
				return name
			}
		}
	}
	return ""
}

// ClusterInfo returns the brokers and clusters a NameServer knows.
func (a *Admin) ClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var ci *ClusterInfo
	err := a.b.ns.call(ctx, func(ctx context.Context, c pb.NameServerClient) error {
		resp, err := c.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		if err := wire.FromStatus(resp.GetStatus()); err != nil {
			return err
		}
		ci = &ClusterInfo{Brokers: make(map[string]BrokerData), Clusters: make(map[string][]string)}
		for name, bd := range resp.GetBrokers() {
			d := brokerDataFromProto(bd)
			if d.BrokerName == "" {
				d.BrokerName = name
			}
			ci.Brokers[name] = d
		}
		for name, cb := range resp.GetClusters() {
			names := append([]string(nil), cb.GetBrokerNames()...)
			sort.Strings(names)
			ci.Clusters[name] = names
		}
		for _, l := range resp.GetLive() {
			ci.Live = append(ci.Live, BrokerLive{
				Cluster: l.GetCluster(), BrokerName: l.GetBrokerName(), BrokerID: l.GetBrokerId(),
				Addr: l.GetBrokerAddr(), HAAddr: l.GetHaAddr(), AdminAddr: l.GetAdminAddr(), Version: l.GetVersion(),
				LastUpdate: time.UnixMilli(l.GetLastUpdateMs()), TopicCount: l.GetTopicCount(),
			})
		}
		sort.Slice(ci.Live, func(i, j int) bool {
			x, y := ci.Live[i], ci.Live[j]
			return x.BrokerName < y.BrokerName || x.BrokerName == y.BrokerName && x.BrokerID < y.BrokerID
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return ci, nil
}

// brokerCall makes one unary call to the broker at addr and turns its
// status into an error.
func (a *Admin) brokerCall(ctx context.Context, addr string, fn func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error)) error {
	c, err := a.b.broker(addr)
	if err != nil {
		return err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	st, err := fn(rctx, c)
	if err != nil {
		return fmt.Errorf("broker %s: %w", addr, err)
	}
	if err := wire.FromStatus(st); err != nil {
		return fmt.Errorf("broker %s: %w", addr, err)
	}
	return nil
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

// brokersOf returns the broker groups of a topic, or every group when
// topic is "".
func (a *Admin) brokersOf(ctx context.Context, topic string) ([]BrokerData, error) {
	if topic == "" {
		ci, err := a.ClusterInfo(ctx)
		if err != nil {
			return nil, err
		}
		return ci.allBrokers(), nil
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	return r.Brokers, nil
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

// defaultQueryMax bounds a key query when the caller gives no maximum.
const defaultQueryMax = 64

// QueryMessageByKey returns up to max messages of topic with key among
// their KEYS (or as their unique id) stored between begin and end (zero
// times: no bound), from every broker of the topic, oldest first.
func (a *Admin) QueryMessageByKey(ctx context.Context, topic, key string, begin, end time.Time, max int) ([]*MessageExt, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "empty key")
	}
	if max <= 0 {
		max = defaultQueryMax
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	req := &pb.QueryMessageRequest{Topic: topic, Key: key, Max: int32(max)}
	if !begin.IsZero() {
		req.BeginMs = begin.UnixMilli()
	}
	if !end.IsZero() {
		req.EndMs = end.UnixMilli()
	}
	var out []*MessageExt
	for _, bd := range r.Brokers {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		var resp *pb.QueryMessageResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.QueryMessage(ctx, req)
			return resp.GetStatus(), err
		})
		if errors.Is(err, ErrQueryNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("query %q in %q on %s: %w", key, topic, bd.BrokerName, err)
		}
		for _, rec := range resp.GetRecords() {
			m, err := extFromRecord(rec, bd.BrokerName)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// IDKind says how ViewMessage matched an id.
type IDKind int

const (
	// ByOffsetID: the id is an offset message id (store host + CommitLog
	// offset) and the broker at that host has the message.
	ByOffsetID IDKind = iota + 1
	// ByUniqueID: the id is a producer unique id (UNIQ_KEY), found through
	// the brokers' indexes.
	ByUniqueID
)

// String names the kind.
func (k IDKind) String() string {
	switch k {
	case ByOffsetID:
		return "offset id"
	case ByUniqueID:
		return "unique id"
	}
	return "unknown"
}

// MessageLookup is the result of ViewMessage.
type MessageLookup struct {
	MatchedBy IDKind
	// Messages: one for an offset id; for a unique id every stored copy
	// (a retried send may have stored a message twice).
	Messages []*MessageExt
}

// ViewOption modifies ViewMessage.
type ViewOption func(*viewOptions)

type viewOptions struct{ topic string }

// InTopic limits a unique id lookup to one topic (without it, every topic
// is searched).
func InTopic(topic string) ViewOption { return func(o *viewOptions) { o.topic = topic } }

// ViewMessage finds a message by id. An offset message id is decoded into
// its store host and the broker there is asked; an id that is not one, or
// that this broker does not have, is looked up as a unique id (UNIQ_KEY)
// on every broker. The result says which matched. Nothing found is an
// error matching ErrQueryNotFound.
func (a *Admin) ViewMessage(ctx context.Context, msgID string, opts ...ViewOption) (*MessageLookup, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var vo viewOptions
	for _, o := range opts {
		o(&vo)
	}
	var offsetErr error
	if host, _, err := message.ParseOffsetMsgID(msgID); err == nil {
		m, err := a.viewByOffsetID(ctx, host.String(), msgID)
		if err == nil {
			return &MessageLookup{MatchedBy: ByOffsetID, Messages: []*MessageExt{m}}, nil
		}
		offsetErr = err
	}
	if !message.IsUniqueID(msgID) {
		if offsetErr != nil {
			return nil, offsetErr
		}
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "%q is neither an offset message id nor a unique id", msgID)
	}
	topics := []string{vo.topic}
	if vo.topic == "" {
		all, err := a.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		topics = all
	}
	var found []*MessageExt
	for _, t := range topics {
		if message.ValidateTopic(t) != nil {
			continue
		}
		msgs, err := a.QueryMessageByKey(ctx, t, msgID, time.Time{}, time.Time{}, defaultQueryMax)
		if err != nil && !errors.Is(err, ErrTopicNotExist) {
			return nil, err
		}
		for _, m := range msgs {
			if m.UniqueID == msgID {
				found = append(found, m)
			}
		}
	}
	if len(found) == 0 {
		if offsetErr != nil {
			return nil, fmt.Errorf("message %s: %w; not found as a unique id either", msgID, offsetErr)
		}
		return nil, codeErr(pb.Code_QUERY_NOT_FOUND, "no message with unique id %s", msgID)
	}
	return &MessageLookup{MatchedBy: ByUniqueID, Messages: found}, nil
}

func (a *Admin) viewByOffsetID(ctx context.Context, addr, msgID string) (*MessageExt, error) {
	var resp *pb.ViewMessageResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = c.ViewMessage(ctx, &pb.ViewMessageRequest{MsgId: msgID})
		return resp.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("view message %s: %w", msgID, err)
	}
	name := ""
	if ci, err := a.ClusterInfo(ctx); err == nil {
		name = ci.brokerName(addr)
	}
	m, err := extFromRecord(resp.GetRecord(), name)
	if err != nil {
		return nil, err
	}
	if m.MsgID != msgID {
		return nil, codeErr(pb.Code_QUERY_NOT_FOUND, "broker %s returned message %s for %s", addr, m.MsgID, msgID)
	}
	return m, nil
}

// BrokerInfo describes one broker.
type BrokerInfo struct {
	Cluster, BrokerName string
	BrokerID            int64
	Addr, Version       string
	Role, FlushMode     string
	CommitLogMinOffset  int64
	CommitLogMaxOffset  int64
	DispatchBehindBytes int64
	DiskUsedRatio       float64
	StoreBytes          int64
	StartTime           time.Time
}

// BrokerInfo asks the broker at addr about itself.
func (a *Admin) BrokerInfo(ctx context.Context, addr string) (*BrokerInfo, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var r *pb.GetBrokerInfoResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, err
	}
	return &BrokerInfo{
		Cluster: r.GetCluster(), BrokerName: r.GetBrokerName(), BrokerID: r.GetBrokerId(), Addr: r.GetAddr(),
		Version: r.GetVersion(), Role: r.GetRole(), FlushMode: r.GetFlushMode(),
		CommitLogMinOffset: r.GetCommitLogMinOffset(), CommitLogMaxOffset: r.GetCommitLogMaxOffset(),
		DispatchBehindBytes: r.GetDispatchBehindBytes(), DiskUsedRatio: r.GetDiskUsedRatio(),
		StoreBytes: r.GetStoreBytes(), StartTime: time.UnixMilli(r.GetStartTimeMs()),
	}, nil
}
