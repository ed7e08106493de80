package broker

import (
	"context"
	"net/netip"
	"sync/atomic"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// Delayed delivery lives in package broker/delay (its doc has the design
// and the on-disk formats). The broker rewrites delayed sends (Send, the
// retry path), runs the delay service (Start, Close) under its role gate,
// hands the service's progress to slaves (metadata sync) and serves
// cancel and status (delay_grpc.go).

// DelayOptions configure delayed delivery.
type DelayOptions = delay.BrokerOptions

// rewriteDelayed turns messages that ask for delayed delivery into their
// stored form (delay.BrokerOptions.Schedule).
func (b *Broker) rewriteDelayed(msgs []*message.Ext) error {
	return b.opts.Delay.Rewrite(msgs, b.opts.BrokerName)
}

// scheduleDelayed rewrites one message that asks for delayed delivery.
func (b *Broker) scheduleDelayed(m *message.Ext) error {
	return b.opts.Delay.Schedule(m, b.opts.BrokerName)
}

// delayRef holds the delay service (nil before Start and after Close).
type delayRef struct{ p atomic.Pointer[delay.Service] }

func (r *delayRef) Load() *delay.Service   { return r.p.Load() }
func (r *delayRef) Store(d *delay.Service) { r.p.Store(d) }

// startDelay starts delayed delivery: standing by, and delivering while
// the role gate says the broker is the master.
func (b *Broker) startDelay() error {
	d, err := delay.NewService(delay.Config{Options: b.opts.Delay, StoreDir: b.opts.StoreDir, BrokerName: b.opts.BrokerName,
		RetentionMaxAge: b.opts.Store.Retention.MaxAge}, delayHost{b}, b.log.Named("delay"))
	if err != nil {
		return err
	}
	d.Start()
	b.delay.Store(d)
	b.gate.Subscribe("delay", d)
	return nil
}

// stopDelay stops delivery and persists the level offsets (the role gate
// is closed first).
func (b *Broker) stopDelay() error {
	d := b.delay.Load()
	if d == nil {
		return nil
	}
	b.delay.Store(nil)
	return d.Close()
}

// CancelDelayed cancels a pending timer message (delay.Service.Cancel).
func (b *Broker) CancelDelayed(ctx context.Context, topic, uniqueID string) (deliverMS int64, copies int, err error) {
	d := b.delay.Load()
	if d == nil {
		return 0, 0, delay.NotDelivering(b.opts.BrokerName, b.brokerID())
	}
	return d.Cancel(ctx, topic, uniqueID)
}

// DelayStatus reports the delay levels and the timing wheel
// (delay.Service.Status).
func (b *Broker) DelayStatus() ([]delay.LevelStatus, *delay.Status, error) {
	d := b.delay.Load()
	if d == nil {
		return nil, nil, delay.NotDelivering(b.opts.BrokerName, b.brokerID())
	}
	return d.Status()
}

// DelayEngine exposes the timer engine (tests, tools), delivering or
// standing by; nil when timers are off or the broker is stopped.
func (b *Broker) DelayEngine() *delay.Engine {
	if d := b.delay.Load(); d != nil {
		return d.Engine()
	}
	return nil
}

// delayHost is the delay service's delay.BrokerHost.
type delayHost struct{ b *Broker }

func (h delayHost) GetMessages(topic string, queueID int32, from int64, max, maxBytes int, filter func(int64) bool) (store.GetResult, error) {
	res, err := h.b.store.GetMessages(topic, queueID, from, max, maxBytes, filter)
	return res, storeError(err)
}

func (h delayHost) GetMatching(topic string, queueID int32, from int64, max, maxBytes int, filter func(int64) bool,
	match func([]byte) bool) (store.GetResult, error) {
	res, err := h.b.store.GetMatching(topic, queueID, from, max, maxBytes, filter, match)
	return res, storeError(err)
}

func (h delayHost) ReadMessages(locations []int64, fn func(i int, m *message.Ext, err error)) {
	h.b.store.ReadMessages(locations, fn)
}

func (h delayHost) ReadRecords(locations []int64, fn func(i int, rec []byte, err error)) {
	h.b.store.ReadRecords(locations, fn)
}

func (h delayHost) StoreHost() netip.AddrPort { return h.b.store.StoreHost() }

func (h delayHost) PutPrepared(ctx context.Context, recs []store.Prepared) ([]store.PutResult, error) {
	res, err := h.b.store.PutPrepared(ctx, recs, nil)
	return res, storeError(err)
}

func (h delayHost) QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Ext, error) {
	msgs, err := h.b.store.QueryByKey(topic, key, begin, end, max)
	return msgs, storeError(err)
}

func (h delayHost) QueueOffsets(topic string, queueID int32) (int64, int64) {
	return h.b.store.QueueOffsets(topic, queueID)
}

func (h delayHost) StoreTimeAt(topic string, queueID int32, offset int64) (int64, error) {
	return h.b.store.StoreTimeAt(topic, queueID, offset)
}

func (h delayHost) Arrival(topic string, queueID int32) <-chan struct{} {
	return h.b.arrivalSignal(topic, queueID).C()
}

func (h delayHost) CommitLogMaxOffset() int64         { return h.b.store.CommitLog().MaxOffset() }
func (h delayHost) DispatchedOffset() int64           { return h.b.store.DispatchedOffset() }
func (h delayHost) Segments() []commitlog.SegmentInfo { return h.b.store.CommitLog().Segments() }

func (h delayHost) WaitDispatched(ctx context.Context, off int64) error {
	return storeError(h.b.store.WaitDispatched(ctx, off))
}

func (h delayHost) Put(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error) {
	res, err := h.b.store.PutBatch(ctx, msgs, nil)
	return res, storeError(err)
}

func (h delayHost) WaitReplicated(ctx context.Context, res []store.PutResult) error {
	return h.b.waitReplicated(ctx, res)
}

func (h delayHost) WriteQueueNums(topic string) (int32, bool) {
	tc, ok := h.b.topics.get(topic)
	return tc.WriteQueueNums, ok
}

// IsMaster is whether delivery may go on: in controller mode, a master
// whose write lease ran out pauses before its role gate stops it.
func (h delayHost) IsMaster() bool  { return h.b.checkWritable() == nil }
func (h delayHost) SyncRole() bool  { return h.b.gate.Sync() }
func (h delayHost) BrokerID() int64 { return h.b.brokerID() }
func (h delayHost) Epoch() int64    { return h.b.Epoch() }
func (h delayHost) Role() string    { return h.b.Role().String() }
