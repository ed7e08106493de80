package broker

import (
	"context"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Metadata replication. A slave fetches its master's topics and consumer
// offsets every MetadataSyncInterval (and right after each HA handshake)
// with BrokerHA.GetMetadata, and persists them, so that a slave promoted to
// master serves the same topics and resumes consumers where they were.
//
// Consumer offsets committed to a slave (consumers reading from it while
// the master is down) are kept in its table and remembered as local
// commits. Each sync sends the local commits; the master keeps, per queue,
// the larger of its own offset and the slave's, and answers with its whole
// table, which then replaces the slave's — except for queues with a local
// commit larger than the master's value, which keep the local one until the
// master has taken it. So when the master is back its table wins, except
// where a consumer got further on the slave. Offsets moved backwards on the
// master (a reset) reach the slave as they are; only fresh local commits
// can override them.
//
// The answer also carries the master's delayed delivery progress: its delay
// level offsets (delayOffset.json, as RocketMQ's slave copies it) and its
// timer engine's Progress, with the master's CommitLog end when they were
// read. The slave's delay service applies them once its own log is
// dispatched that far, and persists them, so a promoted slave resumes
// delivery where the master was (broker/delay).

// metaSync is the slave's metadata sync state.
type metaSync struct {
	mu       sync.Mutex
	conn     *grpc.ClientConn
	connAddr string
	last     time.Time
	err      error
	now      chan struct{}

	// localMu guards local and orders local commits with table swaps.
	localMu sync.Mutex
	local   map[string]map[int32]int64 // offsetKey → queue → offset committed here
}

func (m *metaSync) init() {
	m.now = make(chan struct{}, 1)
	m.local = make(map[string]map[int32]int64)
}

// trigger asks for a sync now.
func (m *metaSync) trigger() {
	select {
	case m.now <- struct{}{}:
	default:
	}
}

func (m *metaSync) status() (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.err
}

func (m *metaSync) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn != nil {
		_ = m.conn.Close()
		m.conn = nil
	}
}

func dialGRPC(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxFrame)))
}

// commitOffset records a consumer offset. On a slave it is also a local
// commit that the next metadata sync sends to the master.
func (b *Broker) commitOffset(group, topic string, queueID int32, offset int64) {
	b.recordOffset(group, topic, queueID, offset, false)
}

// advanceOffset is commitOffset for the progress a pull carries: it only
// moves an offset forward. A pull still on its way when its consumer
// releases the queue (commits, then unlocks) must not move the offset back
// below that final commit: the queue's next owner would consume the
// released messages again. Explicit commits and resets may move it back.
func (b *Broker) advanceOffset(group, topic string, queueID int32, offset int64) {
	b.recordOffset(group, topic, queueID, offset, true)
}

func (b *Broker) recordOffset(group, topic string, queueID int32, offset int64, forwardOnly bool) {
	if b.repl.state.role() == RoleMaster {
		b.offsets.set(group, topic, queueID, offset, forwardOnly)
		return
	}
	m := &b.repl.meta
	m.localMu.Lock()
	defer m.localMu.Unlock()
	if !b.offsets.set(group, topic, queueID, offset, forwardOnly) {
		return
	}
	k := offsetKey(topic, group)
	q := m.local[k]
	if q == nil {
		q = make(map[int32]int64)
		m.local[k] = q
	}
	q[queueID] = offset
}

func (r *replicator) metadataLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.opts.MetadataSyncInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.meta.now:
		}
		if r.state.role() != RoleSlave {
			continue
		}
		if r.masterHAAddr() == "" {
			// A slave registered before its master gets no master address;
			// ask the NameServers again rather than wait a whole
			// RegisterInterval (30 s).
			r.b.reg.trigger()
		}
		addr := r.masterAddr()
		if addr == "" {
			continue
		}
		err := r.syncMetadata(addr)
		r.meta.mu.Lock()
		r.meta.err = err
		if err == nil {
			r.meta.last = time.Now()
		}
		r.meta.mu.Unlock()
		switch {
		case err != nil && err.Error() != lastErr:
			r.log.Warn("metadata sync from the master failed", zap.String("master", addr), zap.Error(err))
			lastErr = err.Error()
		case err == nil && lastErr != "":
			r.log.Info("metadata sync from the master works again", zap.String("master", addr))
			lastErr = ""
		}
	}
}

// syncMetadata fetches topics and offsets from the master and applies them.
func (r *replicator) syncMetadata(addr string) error {
	conn, err := r.meta.dial(addr)
	if err != nil {
		return err
	}
	r.meta.localMu.Lock()
	req := &pb.GetMetadataRequest{BrokerName: r.b.opts.BrokerName, BrokerId: r.state.id(),
		LocalOffsets: offsetsToProto(r.meta.local)}
	r.meta.localMu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	resp, err := pb.NewBrokerHAClient(conn).GetMetadata(ctx, req)
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return err
	}
	// A promotion may have happened during the call: apply only as a slave.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.role() != RoleSlave {
		return nil
	}
	b := r.b
	topics := make([]TopicConfig, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		topics = append(topics, topicFromProto(t))
	}
	var dv dataVersion
	if v := resp.DataVersion; v != nil {
		dv = dataVersion{Timestamp: v.Timestamp, Counter: v.Counter}
	}
	removed, changed, err := b.topics.replaceAll(topics, dv)
	if err != nil {
		return err
	}
	if changed {
		r.log.Info("topics replicated from the master", zap.Int("topics", len(topics)), zap.Strings("removed", removed))
	}
	for _, name := range removed {
		b.offsets.removeTopic(name)
		if err := b.store.DeleteTopic(name); err != nil {
			r.log.Warn("delete the queues of a topic the master deleted", zap.String("topic", name), zap.Error(err))
		}
	}
	master := offsetsFromProto(resp.Offsets)
	m := &r.meta
	m.localMu.Lock()
	b.offsets.adopt(master, m.local)
	for k, qs := range m.local {
		for q, v := range qs {
			if mv, ok := master[k][q]; ok && mv >= v {
				delete(qs, q) // the master has it
			}
		}
		if len(qs) == 0 {
			delete(m.local, k)
		}
	}
	m.localMu.Unlock()
	if d := b.delay.Load(); d != nil {
		if p, ok := delayProgressFromProto(resp); ok {
			d.Offer(p)
		}
	}
	if err := b.offsets.persist(); err != nil {
		return err
	}
	if err := r.state.sawEpoch(resp.Epoch); err != nil {
		r.log.Warn("persist the master's epoch", zap.Error(err))
	}
	return nil
}

func offsetsToProto(t map[string]map[int32]int64) []*pb.GroupOffsets {
	out := make([]*pb.GroupOffsets, 0, len(t))
	for k, qs := range t {
		topic, group, ok := strings.Cut(k, "@")
		if !ok || len(qs) == 0 {
			continue
		}
		out = append(out, &pb.GroupOffsets{Group: group, Topic: topic, Offsets: maps.Clone(qs)})
	}
	return out
}

func offsetsFromProto(in []*pb.GroupOffsets) map[string]map[int32]int64 {
	out := make(map[string]map[int32]int64, len(in))
	for _, g := range in {
		if g == nil || g.Topic == "" || g.Group == "" {
			continue
		}
		k := offsetKey(g.Topic, g.Group)
		if out[k] == nil {
			out[k] = make(map[int32]int64, len(g.Offsets))
		}
		for q, v := range g.Offsets {
			out[k][q] = v
		}
	}
	return out
}

// snapshot copies the offset table.
func (o *offsetTable) snapshot() map[string]map[int32]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[string]map[int32]int64, len(o.table))
	for k, qs := range o.table {
		out[k] = maps.Clone(qs)
	}
	return out
}

// adopt replaces the table with the master's, keeping a local commit where
// it is larger than the master's offset (or the master has none).
func (o *offsetTable) adopt(master, local map[string]map[int32]int64) {
	t := make(map[string]map[int32]int64, len(master))
	for k, qs := range master {
		t[k] = maps.Clone(qs)
	}
	for k, qs := range local {
		for q, v := range qs {
			if cur, ok := t[k][q]; !ok || v > cur {
				if t[k] == nil {
					t[k] = make(map[int32]int64)
				}
				t[k][q] = v
			}
		}
	}
	o.mu.Lock()
	if !reflect.DeepEqual(o.table, t) {
		o.table = t
		o.dirty = true
	}
	o.mu.Unlock()
}

// mergeLarger takes a slave's offsets where they are larger than the
// master's own (or the master has none) and reports how many it took.
func (o *offsetTable) mergeLarger(in map[string]map[int32]int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, qs := range in {
		for q, v := range qs {
			if cur, ok := o.table[k][q]; ok && cur >= v {
				continue
			}
			if o.table[k] == nil {
				o.table[k] = make(map[int32]int64)
			}
			o.table[k][q] = v
			o.dirty = true
			n++
		}
	}
	return n
}

// replaceAll makes the table exactly topics with version v (a slave taking
// its master's table) and reports the topics that went away.
func (t *topicTable) replaceAll(topics []TopicConfig, v dataVersion) (removed []string, changed bool, err error) {
	next := make(map[string]*TopicConfig, len(topics))
	for i := range topics {
		c := topics[i]
		if err := validateTopicConfig(&c); err != nil {
			return nil, false, err
		}
		next[c.Name] = &c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.version == v && reflect.DeepEqual(t.topics, next) {
		return nil, false, nil
	}
	for name := range t.topics {
		if _, ok := next[name]; !ok {
			removed = append(removed, name)
		}
	}
	prev, prevV := t.topics, t.version
	t.topics, t.version = next, v
	if err := t.persistLocked(); err != nil {
		t.topics, t.version = prev, prevV
		return nil, false, err
	}
	return removed, true, nil
}

// metadataFor answers a slave's GetMetadata on the master.
func (b *Broker) metadataFor(req *pb.GetMetadataRequest) (*pb.GetMetadataResponse, error) {
	if err := b.checkWritable(); err != nil {
		return nil, err
	}
	if req.BrokerName != b.opts.BrokerName {
		return nil, wire.Errorf(pb.Code_INVALID_PARAMETER, "slave of %q asked the master of %q", req.BrokerName, b.opts.BrokerName)
	}
	if local := offsetsFromProto(req.LocalOffsets); len(local) > 0 {
		if n := b.offsets.mergeLarger(local); n > 0 {
			b.log.Info("took consumer offsets committed to a slave", zap.Int64("slaveId", req.BrokerId), zap.Int("queues", n))
			if err := b.offsets.persist(); err != nil {
				b.log.Warn("persist offsets", zap.Error(err))
			}
		}
	}
	resp := &pb.GetMetadataResponse{Status: wire.OK, Epoch: b.repl.state.epoch()}
	for _, t := range b.topics.all() {
		resp.Topics = append(resp.Topics, t.toProto())
	}
	dv := b.topics.dataVersion()
	resp.DataVersion = &pb.DataVersion{Timestamp: dv.Timestamp, Counter: dv.Counter}
	resp.Offsets = offsetsToProto(b.offsets.snapshot())
	if d := b.delay.Load(); d != nil {
		if p, ok := d.Snapshot(); ok {
			delayProgressToProto(p, resp)
		}
	}
	return resp, nil
}

func delayProgressToProto(p delay.MasterProgress, resp *pb.GetMetadataResponse) {
	resp.DelayOffsets = make(map[int32]int64, len(p.Levels))
	for level, off := range p.Levels {
		resp.DelayOffsets[int32(level)] = off
	}
	if p.Timer != nil {
		resp.TimerProgress = &pb.TimerProgress{Location: p.Timer.Location, DueBeforeMs: p.Timer.DueBeforeMS}
	}
	resp.DelayLogOffset = p.Need
}

// delayProgressFromProto reads the master's delayed delivery progress; ok
// is false when the master sent none.
func delayProgressFromProto(resp *pb.GetMetadataResponse) (delay.MasterProgress, bool) {
	if len(resp.DelayOffsets) == 0 && resp.TimerProgress == nil {
		return delay.MasterProgress{}, false
	}
	p := delay.MasterProgress{Levels: make(map[int]int64, len(resp.DelayOffsets)), Need: resp.DelayLogOffset}
	for level, off := range resp.DelayOffsets {
		p.Levels[int(level)] = off
	}
	if tp := resp.TimerProgress; tp != nil {
		p.Timer = &delay.Progress{Location: tp.Location, DueBeforeMS: tp.DueBeforeMs}
	}
	return p, true
}
