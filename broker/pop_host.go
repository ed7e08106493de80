package broker

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/broker/pop"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// PopRequest is one POP receive.
type PopRequest = pop.Request

// PoppedMessage is one message handed out by Pop.
type PoppedMessage = pop.Message

// PopQueueStats is the POP state of one queue of a group.
type PopQueueStats = pop.QueueStats

// newPopService creates the broker's POP service. New subscribes it to the
// role gate: it serves while the broker is the master and follows the POP
// log otherwise.
func newPopService(b *Broker) *pop.Service {
	s := pop.New(popHost{b}, pop.Options{
		BrokerName:   b.opts.BrokerName,
		SnapshotPath: filepath.Join(b.opts.StoreDir, "config", "popState.json"),
		MaxMessages:  b.opts.PullMaxMessages,
		MaxBytes:     b.opts.PullMaxBytes,
		LongPollMax:  b.opts.LongPollMax,
	}, b.log.Named("pop"))
	return s
}

// startPop loads the POP state and starts its housekeeping.
func (b *Broker) startPop() error {
	b.pop.Start()
	return nil
}

// Pop hands out messages of a topic to a consumer group: each stays
// invisible to the group until it is acknowledged (PopAck) or its
// invisibility runs out, and is then handed out again (attempt + 1); past
// the group's maximum delivery attempts it goes to %DLQ%<group>. With
// nothing ready it waits up to PollTimeout and answers empty.
func (b *Broker) Pop(ctx context.Context, req PopRequest) ([]PoppedMessage, error) {
	start := time.Now()
	out, err := b.pop.Pop(ctx, req)
	m := b.metrics.init()
	m.rpcLatency.WithLabelValues(frontendOf(ctx), "pop", responseCode(err), strconv.FormatBool(req.PollTimeout > 0)).Observe(sinceMS(start))
	if len(out) > 0 {
		n := 0
		for _, p := range out {
			n += len(p.Record)
		}
		m.msgsOut.WithLabelValues(req.Topic, req.Group).Add(float64(len(out)))
		m.bytesOut.WithLabelValues(req.Topic, req.Group).Add(float64(n))
		b.traffic.got(len(out), n)
	}
	return out, err
}

// PopAck acknowledges a popped message by its receipt handle.
func (b *Broker) PopAck(ctx context.Context, group, topic, handle string) error {
	return b.pop.Ack(ctx, group, topic, handle)
}

// PopAckBatch acknowledges popped messages of a group on a topic with one
// POP log append; it returns one error (nil: acknowledged) per handle.
func (b *Broker) PopAckBatch(ctx context.Context, group, topic string, handles []string) []error {
	return b.pop.AckBatch(ctx, group, topic, handles)
}

// ChangeInvisible makes a popped message visible again d from now (d in
// [0, 12h]) and returns its new handle and visible time (Record nil); the
// old handle is invalid from then on.
func (b *Broker) ChangeInvisible(ctx context.Context, group, topic, handle string, d time.Duration) (PoppedMessage, error) {
	return b.pop.ChangeInvisible(ctx, group, topic, handle, d)
}

// PopNack makes a popped message visible again after the group's backoff
// for its delivery attempt, and returns that backoff.
func (b *Broker) PopNack(ctx context.Context, group, topic, handle string) (time.Duration, error) {
	return b.pop.Nack(ctx, group, topic, handle)
}

// PopToDLQ moves a popped message to %DLQ%<group> (keeping its ids and
// properties, as dead letters of retries do) and acknowledges it.
func (b *Broker) PopToDLQ(ctx context.Context, group, topic, handle string) error {
	return b.pop.ToDLQ(ctx, group, topic, handle)
}

// ReleaseClient stops renewing the invisibility of a gone client's
// auto-renewed messages: they are visible again after a second.
func (b *Broker) ReleaseClient(clientID string) { b.pop.Release(clientID) }

// PopStats returns the POP state of a group's queues of a topic.
func (b *Broker) PopStats(group, topic string) []PopQueueStats { return b.pop.Stats(group, topic) }

// resetPop moves a group's POP consumption of a topic to the offsets an
// offset reset chose (ResetOffset calls it unless the reset is a dry run):
// nothing stays in flight, and the next message handed out of each queue is
// the one at its new offset.
func (b *Broker) resetPop(group, topic string, changes []OffsetChange) error {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	for _, c := range changes {
		if err := b.pop.Reset(ctx, group, topic, c.QueueID, c.After); err != nil {
			return err
		}
	}
	return nil
}

// popHost is the broker as the POP service sees it.
type popHost struct{ b *Broker }

var _ pop.Host = popHost{}

func (h popHost) Writable() error { return h.b.checkWritable() }
func (h popHost) SyncRole() bool  { return h.b.gate.Sync() }

func (h popHost) Topic(name string) (pop.TopicInfo, bool) {
	tc, ok := h.b.topics.get(name)
	if !ok {
		return pop.TopicInfo{}, false
	}
	return pop.TopicInfo{ReadQueues: tc.ReadQueueNums, Readable: tc.Readable()}, true
}

func (h popHost) Group(group string) pop.GroupConfig {
	c, ok := h.b.subs.Get(group)
	if !ok {
		c = subgroup.Default(group)
	}
	g := pop.GroupConfig{Fifo: c.Fifo(), MaxAttempts: c.MaxDeliveryAttempts(),
		Backoff: func(attempt int32) time.Duration { return c.Backoff(int(attempt) - 1) }}
	if !c.ConsumeEnable {
		g.Refusal = subgroup.StoppedError(group)
	}
	return g
}

func (h popHost) GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, f pop.Filter) (store.GetResult, error) {
	res, err := h.b.store.GetMatching(topic, queueID, offset, maxCount, maxBytes, f.TagCode, f.Match)
	return res, storeError(err)
}

// Filter compiles a receive's filter as pulls do; a tag expression is also
// matched exactly on each record, so a tag sharing a subscribed tag's hash
// code is not handed out (it counts as done for the group, as any message
// the filter skips).
func (h popHost) Filter(exprType, expr string) (pop.Filter, error) {
	mf, err := h.b.compileFilter(exprType, expr)
	if err != nil {
		return pop.Filter{}, err
	}
	f := pop.Filter{TagCode: mf.tagCode, Match: mf.match}
	if mf.tagCode != nil && mf.match == nil {
		te, err := h.b.tagExprs.get(expr, message.ParseTagExpression)
		if err == nil && !te.All() {
			f.Match = func(rec []byte) bool {
				props, err := message.RecordProperties(rec)
				if err != nil {
					return false
				}
				tag, _ := message.LookupProperty(props, message.PropertyTags)
				return te.Match(string(tag))
			}
		}
	}
	return f, nil
}

func (h popHost) QueueOffsets(topic string, queueID int32) (int64, int64) {
	return h.b.store.QueueOffsets(topic, queueID)
}

func (h popHost) ConsumeOffset(group, topic string, queueID int32) int64 {
	return h.b.offsets.Query(group, topic, queueID)
}

func (h popHost) CommitOffset(group, topic string, queueID int32, offset int64) {
	h.b.commitOffset(group, topic, queueID, offset)
}

// AppendLog stores POP log records through the put path of sends: the
// in-sync check, one append, the flush and replication waits.
func (h popHost) AppendLog(ctx context.Context, bodies [][]byte) (int64, error) {
	now := time.Now().UnixMilli()
	msgs := make([]*message.Ext, len(bodies))
	for i, body := range bodies {
		msgs[i] = &message.Ext{Message: message.Message{Topic: message.PopLogTopic, Body: body}, BornTimestamp: now}
	}
	res, err := h.b.put(ctx, msgs)
	if err != nil {
		return 0, err
	}
	return res[len(res)-1].QueueOffset, nil
}

func (h popHost) WaitDispatched(ctx context.Context) error {
	return h.b.store.WaitDispatched(ctx, h.b.store.CommitLog().MaxOffset())
}

func (h popHost) ConnectedClients() map[string]bool {
	r := h.b.clients
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.clients))
	for s := range r.clients {
		out[s.id] = true
	}
	return out
}

// DeadLetter stores the message in %DLQ%<group> through the retry
// service's dead-letter path (DLQ_ORIGIN_* properties, ids kept).
func (h popHost) DeadLetter(ctx context.Context, group string, record []byte, attempt int32, maxAttempts int, reason string) error {
	m, err := message.Decode(record)
	if err != nil {
		return errcode.Errorf(errcode.SystemError, "decode a message to dead-letter: %v", err)
	}
	_, err = h.b.retry.SendBack(ctx, retry.SendBackRequest{
		Group: group, CommitLogOffset: m.PhysicalOffset, UniqueID: m.UniqueID(), DelayLevel: -1,
		MaxReconsumeTimes: int32(max(maxAttempts-1, 0)), ReconsumeTimes: max(attempt-1, 0),
		Reason: reason,
	})
	return err
}
