package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// BrokerRuntime is a broker's running figures (RocketMQ's brokerStatus).
type BrokerRuntime struct {
	// Addr is the address asked.
	Addr                string
	Cluster, BrokerName string
	BrokerID            int64
	Version, Role       string
	StartTime           time.Time
	// Permission is the broker's permission as a whole (brokerPermission:
	// PermReadWrite, or PermRead when its write permission was taken
	// away); Writable reports its write bit.
	Permission Perm
	Writable   bool

	// Messages and bytes stored (put) and delivered to consumers (get)
	// since the broker started, over every protocol, and the rates per
	// second over the last minute (or since start when shorter).
	PutMessagesTotal, GetMessagesTotal int64
	PutBytesTotal, GetBytesTotal       int64
	PutTPS, GetTPS                     float64

	// Store and disk: the CommitLog's offsets, how far dispatch is
	// behind, the space its segments take, the file system of the store
	// directory.
	CommitLogMinOffset, CommitLogMaxOffset int64
	DispatchBehindBytes                    int64
	StoreBytes                             int64
	DiskUsedRatio                          float64
	DiskTotalBytes, DiskFreeBytes          int64

	// Counts: topics and their queues, consumer groups, connected
	// clients.
	Topics, Queues, Groups                   int64
	ConsumerConnections, ProducerConnections int64

	// The process: Go heap in use, resident set size, goroutines.
	HeapBytes, RSSBytes int64
	Goroutines          int64

	// Extra holds further figures by name, for display.
	Extra map[string]string
}

// BrokerRuntime asks the broker at addr (its client address) for its
// running figures.
func (a *Admin) BrokerRuntime(ctx context.Context, addr string) (*BrokerRuntime, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var r *pb.GetBrokerRuntimeResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.GetBrokerRuntime(ctx, &pb.GetBrokerRuntimeRequest{})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("runtime of %s: %w", addr, err)
	}
	perm := Perm(r.GetBrokerPermission())
	rt := &BrokerRuntime{
		Addr: addr, Cluster: r.GetCluster(), BrokerName: r.GetBrokerName(), BrokerID: r.GetBrokerId(),
		Version: r.GetVersion(), Role: r.GetRole(), StartTime: msTime(r.GetStartTimeMs()),
		Permission: perm, Writable: perm.Writable(),
		PutMessagesTotal: r.GetPutMessagesTotal(), GetMessagesTotal: r.GetGetMessagesTotal(),
		PutBytesTotal: r.GetPutBytesTotal(), GetBytesTotal: r.GetGetBytesTotal(),
		PutTPS: r.GetPutTps(), GetTPS: r.GetGetTps(),
		CommitLogMinOffset: r.GetCommitLogMinOffset(), CommitLogMaxOffset: r.GetCommitLogMaxOffset(),
		DispatchBehindBytes: r.GetDispatchBehindBytes(), StoreBytes: r.GetStoreBytes(),
		DiskUsedRatio: r.GetDiskUsedRatio(), DiskTotalBytes: r.GetDiskTotalBytes(), DiskFreeBytes: r.GetDiskFreeBytes(),
		Topics: int64(r.GetTopics()), Queues: int64(r.GetQueues()), Groups: int64(r.GetGroups()),
		ConsumerConnections: int64(r.GetConsumerConnections()), ProducerConnections: int64(r.GetProducerConnections()),
		HeapBytes: r.GetHeapBytes(), RSSBytes: r.GetRssBytes(), Goroutines: int64(r.GetGoroutines()),
		Extra: maps.Clone(r.GetExtra()),
	}
	if rt.Extra == nil {
		rt.Extra = map[string]string{}
	}
	return rt, nil
}

// BrokerConfigEntry is one setting of a broker: its value in effect, its
// default, what it means, and whether UpdateBrokerConfig may change it
// while the broker runs (Runtime). Keys are RocketMQ's names where one
// exists (brokerName, flushDiskType, brokerPermission, ...).
type BrokerConfigEntry struct {
	Key, Value, Default, Description string
	Runtime                          bool
}

func configEntriesFromProto(es []*pb.BrokerConfigEntry) []BrokerConfigEntry {
	out := make([]BrokerConfigEntry, 0, len(es))
	for _, e := range es {
		out = append(out, BrokerConfigEntry{Key: e.GetKey(), Value: e.GetValue(), Default: e.GetDefaultValue(),
			Description: e.GetDescription(), Runtime: e.GetRuntime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// BrokerConfig lists the settings of the broker at addr, sorted by key.
func (a *Admin) BrokerConfig(ctx context.Context, addr string) ([]BrokerConfigEntry, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var r *pb.GetBrokerConfigResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.GetBrokerConfig(ctx, &pb.GetBrokerConfigRequest{})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("configuration of %s: %w", addr, err)
	}
	return configEntriesFromProto(r.GetEntries()), nil
}

// UpdateBrokerConfig changes settings of the broker at addr while it runs,
// all or none, and returns the changed keys with their values now in
// effect. The broker keeps the changes in its store directory and applies
// them again when it restarts. A key that may not change at runtime (see
// BrokerConfigEntry.Runtime), an unknown key or a bad value is refused
// with an error matching ErrInvalidParameter that names it; the caller
// needs the admin permission when the cluster has ACL on.
func (a *Admin) UpdateBrokerConfig(ctx context.Context, addr string, kv map[string]string) ([]BrokerConfigEntry, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if len(kv) == 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "no setting to change")
	}
	var r *pb.UpdateBrokerConfigResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.UpdateBrokerConfig(ctx, &pb.UpdateBrokerConfigRequest{Entries: maps.Clone(kv)})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("update configuration of %s: %w", addr, err)
	}
	return configEntriesFromProto(r.GetEntries()), nil
}

// Broker permission values of the brokerPermission key.
const (
	brokerPermKey       = "brokerPermission"
	brokerPermReadOnly  = PermRead
	brokerPermReadWrite = PermReadWrite
)

// SetBrokerWritable changes brokerPermission on every member of the broker
// group named (master and slaves) and returns the addresses changed.
// Taking the write permission away (writable false: brokerPermission 4,
// read only) drains a broker for maintenance: it registers at once with
// the NameServers with its topics' write permission masked, so producers
// stop choosing it, and refuses the sends that still arrive; reads and
// consumption go on. Members already at the permission asked are left
// alone (not in the result). A member that fails stops the call with its
// error, and the addresses changed before it are returned with it.
func (a *Admin) SetBrokerWritable(ctx context.Context, brokerName string, writable bool) ([]string, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	bd, ok := ci.Brokers[brokerName]
	if !ok || len(bd.Addrs) == 0 {
		return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "broker %q is not registered", brokerName)
	}
	want := brokerPermReadOnly
	if writable {
		want = brokerPermReadWrite
	}
	ids := make([]int64, 0, len(bd.Addrs))
	for id := range bd.Addrs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var changed []string
	for _, id := range ids {
		addr := bd.Addrs[id]
		cur, err := a.brokerPermission(ctx, addr)
		if err != nil {
			return changed, err
		}
		if cur == want {
			continue
		}
		if _, err := a.UpdateBrokerConfig(ctx, addr, map[string]string{brokerPermKey: strconv.Itoa(int(want))}); err != nil {
			return changed, err
		}
		changed = append(changed, addr)
	}
	return changed, nil
}

// brokerPermission returns the brokerPermission of the broker at addr.
func (a *Admin) brokerPermission(ctx context.Context, addr string) (Perm, error) {
	entries, err := a.BrokerConfig(ctx, addr)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e.Key == brokerPermKey {
			p, err := strconv.Atoi(e.Value)
			if err != nil {
				return 0, fmt.Errorf("broker %s: %s %q: %w", addr, brokerPermKey, e.Value, ErrSystem)
			}
			return Perm(p), nil
		}
	}
	return 0, codeErr(pb.Code_REQUEST_NOT_SUPPORTED, "broker %s does not report %s", addr, brokerPermKey)
}

// TopicStat is one topic on one broker group: its queues, permission and
// declared message type (NORMAL, FIFO, DELAY, TRANSACTION or MIXED), the
// sums of its queues' min and max offsets (MaxOffsetSum-MinOffsetSum is
// how many messages it holds there), and when a message was last stored in
// any of its queues (zero: never).
type TopicStat struct {
	Topic, BrokerName, MessageType string
	ReadQueues, WriteQueues        int
	Perm                           Perm
	MinOffsetSum, MaxOffsetSum     int64
	LastStoreTime                  time.Time
}

// TopicStats asks every master (one call each) about all its topics.
//
// Every topic is reported, system ones (retry, dead letter, scheduling,
// transaction) included, sorted by topic and broker name. A broker group
// without a master is asked on its lowest slave. The groups are asked
// concurrently; one that does not answer is left out and its error
// returned, joined, with the stats of the others.
func (a *Admin) TopicStats(ctx context.Context) ([]TopicStat, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	groups := ci.allBrokers()
	results := make([][]TopicStat, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, bd := range groups {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		wg.Go(func() {
			results[i], errs[i] = a.topicStatsOf(ctx, bd.BrokerName, addr)
		})
	}
	wg.Wait()
	var out []TopicStat
	for _, r := range results {
		out = append(out, r...)
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		return x.Topic < y.Topic || x.Topic == y.Topic && x.BrokerName < y.BrokerName
	})
	return out, errors.Join(errs...)
}

func (a *Admin) topicStatsOf(ctx context.Context, brokerName, addr string) ([]TopicStat, error) {
	var r *pb.GetTopicStatsResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.GetTopicStats(ctx, &pb.GetTopicStatsRequest{})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("topic stats of %s: %w", brokerName, err)
	}
	out := make([]TopicStat, 0, len(r.GetTopics()))
	for _, t := range r.GetTopics() {
		out = append(out, TopicStat{
			Topic: t.GetTopic(), BrokerName: brokerName, MessageType: t.GetMessageType(),
			ReadQueues: int(t.GetReadQueues()), WriteQueues: int(t.GetWriteQueues()), Perm: Perm(t.GetPerm()),
			MinOffsetSum: t.GetMinOffsetSum(), MaxOffsetSum: t.GetMaxOffsetSum(),
			LastStoreTime: msTime(t.GetLastStoreTimeMs()),
		})
	}
	return out, nil
}
