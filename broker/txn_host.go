package broker

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/message"
)

// TransactionOptions configure transactional messages (see txn.Options).
type TransactionOptions = txn.Options

// newTxnService creates the broker's transaction service and subscribes it
// to the role gate: it runs while the broker is the master.
func newTxnService(b *Broker) *txn.Service {
	log := b.log.Named("transaction")
	s := txn.New(&txnHost{b: b, log: log}, b.opts.BrokerName, b.opts.Transaction, log)
	b.gate.Subscribe("transactions", s)
	return s
}

// stopTransactions refuses transaction requests from now on; the role gate
// has stopped the service, which recorded its progress in the consumer
// offset table (persisted by Close).
func (b *Broker) stopTransactions() error {
	b.txn.Close()
	return nil
}

// Transactions is the broker's transaction service (ends, check-backs,
// listings and stats), for the front ends.
func (b *Broker) Transactions() *txn.Service { return b.txn }

// pushWait is how long a check waits for room in a producer's notification
// queue when every connected producer's queue is full.
const pushWait = 100 * time.Millisecond

// txnHost is the broker as the transaction service sees it.
type txnHost struct {
	b   *Broker
	log *zap.Logger
	rr  atomic.Uint64 // round robin over a group's producers
}

func (h *txnHost) ReadMessage(phys int64) (*message.Ext, error) { return h.b.store.ReadMessage(phys) }
func (h *txnHost) ReadRecord(phys int64) ([]byte, error)        { return h.b.store.ReadRecord(phys) }

func (h *txnHost) GetMessages(topic string, offset int64, max int) (store.GetResult, error) {
	res, err := h.b.store.GetMessages(topic, 0, offset, max, 4<<20, nil)
	return res, storeError(err)
}

func (h *txnHost) QueueOffsets(topic string) (minOff, maxOff int64) {
	return h.b.store.QueueOffsets(topic, 0)
}

func (h *txnHost) QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Ext, error) {
	return h.b.store.QueryByKey(topic, key, begin, end, max)
}

func (h *txnHost) WaitDispatched(ctx context.Context) error {
	return h.b.store.WaitDispatched(ctx, h.b.store.CommitLog().MaxOffset())
}

func (h *txnHost) ConsumeOffset(topic string) int64 {
	return h.b.offsets.Query(txn.Group, topic, 0)
}

func (h *txnHost) CommitOffset(topic string, offset int64) {
	h.b.offsets.Commit(txn.Group, topic, 0, offset)
}

func (h *txnHost) HalfArrival() <-chan struct{} {
	return h.b.arrivalSignal(message.TransHalfTopic, 0).C()
}

func (h *txnHost) Writable() error { return h.b.checkWritable() }
func (h *txnHost) InSync() error   { return h.b.checkInSync() }

func (h *txnHost) Append(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error) {
	res, err := h.b.store.PutBatch(ctx, msgs, make([]store.PutResult, 0, len(msgs)))
	return res, storeError(err)
}

func (h *txnHost) WaitReplicated(ctx context.Context, res []store.PutResult) error {
	return h.b.waitReplicated(ctx, res)
}

func (h *txnHost) SyncRole() bool { return h.b.gate.Sync() }

// PushCheck hands a check to a connected producer of group (round robin)
// as a notice of its session, waiting briefly when every one's queue is
// full.
func (h *txnHost) PushCheck(ctx context.Context, group string, c txn.Check) bool {
	sessions := h.b.clients.producersOf(group)
	if len(sessions) == 0 {
		h.log.Debug("no live producer for a check", zap.String("group", group), zap.String("id", c.TransactionID))
		return false
	}
	n := Notice{CheckTransaction: &c}
	start := int((h.rr.Add(1) - 1) % uint64(len(sessions)))
	for i := range sessions {
		select {
		case sessions[(start+i)%len(sessions)].notices <- n:
			return true
		default:
		}
	}
	t := time.NewTimer(pushWait)
	defer t.Stop()
	select {
	case sessions[start].notices <- n:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
