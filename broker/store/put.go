package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/afterreply"
	"github.com/bolide-mq/bolide/message"
)

var (
	// ErrMessageTooLarge rejects a body above MaxMessageSize.
	ErrMessageTooLarge = errors.New("store: message body too large")
	// ErrMessageIllegal rejects a message that cannot be stored as it is.
	ErrMessageIllegal = errors.New("store: illegal message")
)

// PutResult says where a message was stored.
type PutResult struct {
	commitlog.Result
	// MsgID is the offset message id.
	MsgID string
}

var encodePool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Put stores one message. QueueID, Topic, Body, Flag, Properties, SysFlag,
// BornTimestamp, BornHost, ReconsumeTimes and PreparedTransactionOffset are
// taken from m; the store sets the store host, timestamp and offsets. In sync
// flush mode Put returns once the message is durable.
func (s *Store) Put(ctx context.Context, m *message.Ext) (PutResult, error) {
	var one [1]PutResult
	res, err := s.PutBatch(ctx, []*message.Ext{m}, one[:0])
	if len(res) == 0 {
		return PutResult{}, err
	}
	return res[0], err
}

// PutBatch stores messages contiguously under one append and (in sync mode)
// one flush wait. Results are appended to dst.
func (s *Store) PutBatch(ctx context.Context, msgs []*message.Ext, dst []PutResult) ([]PutResult, error) {
	if err := s.beginPut(); err != nil {
		return dst, err
	}
	deferred := false
	defer func() { s.putDone(deferred) }()
	entries := make([]*commitlog.Entry, len(msgs))
	slots := make([]commitlog.Entry, len(msgs)) // the entries, in one allocation
	bufs := make([]*[]byte, len(msgs))
	defer func() {
		for _, b := range bufs {
			if b != nil && cap(*b) <= 64<<10 {
				*b = (*b)[:0]
				encodePool.Put(b)
			}
		}
	}()
	for i, m := range msgs {
		if err := s.check(m); err != nil {
			return dst, err
		}
		m.StoreHost = s.opts.StoreHost
		if m.BornTimestamp == 0 {
			m.BornTimestamp = s.opts.Now().UnixMilli()
		}
		if !m.BornHost.IsValid() {
			m.BornHost = s.opts.StoreHost
		}
		bufs[i] = encodePool.Get().(*[]byte)
		rec, err := message.EncodeUnsealed((*bufs[i])[:0], m) // the log stamps and seals it
		if err != nil {
			return dst, fmt.Errorf("%w: %w", ErrMessageIllegal, err)
		}
		*bufs[i] = rec
		slots[i] = commitlog.Entry{
			Record:        rec,
			Topic:         m.Topic,
			QueueID:       m.QueueID,
			NoQueueOffset: !message.Dispatchable(m.SysFlag),
		}
		entries[i] = &slots[i]
	}
	return s.appendBatch(ctx, entries, func(i int) (message.Dispatch, bool) {
		m := msgs[i]
		// All that decoding the record would give the dispatcher, from
		// the message it was encoded from.
		d := message.Dispatch{Topic: m.Topic, QueueID: m.QueueID, SysFlag: m.RecordSysFlag()}
		d.SetProperties(m.Properties)
		return d, true
	}, dst, &deferred)
}

// appendBatch appends encoded records, makes room for their dispatch (own
// tells what planOwn needs of the i-th, see ownFunc) and dispatches them,
// as PutBatch and PutPrepared do.
func (s *Store) appendBatch(ctx context.Context, entries []*commitlog.Entry, own ownFunc,
	dst []PutResult, deferred *bool) ([]PutResult, error) {
	results, err := s.clog.AppendBatch(ctx, entries, make([]commitlog.Result, 0, len(entries)))
	if err == nil && len(results) > 0 {
		// Acknowledge only what the dispatcher has room for.
		err = s.roomFor(own, results)
	}
	if err == nil && len(results) > 0 {
		// Dispatch the records here, or once the answer is on its way
		// when the server serving the put runs work after its answers
		// (afterreply): the ack does not wait for the dispatch.
		if *deferred = afterreply.Defer(ctx, s.dispatchLater); !*deferred {
			s.dispatchInline()
		}
	}
	// The ids of the records are cut from one string: one allocation per
	// put, not one per record.
	var one [56]byte
	n := message.OffsetMsgIDLen(s.opts.StoreHost)
	var ids strings.Builder
	ids.Grow(n * len(results))
	for _, r := range results {
		ids.Write(message.AppendOffsetMsgID(one[:0], s.opts.StoreHost, r.PhysicalOffset))
	}
	all := ids.String()
	for i, r := range results {
		dst = append(dst, PutResult{Result: r, MsgID: all[i*n : (i+1)*n]})
	}
	return dst, err
}

// beginPut admits a put: it refuses one on a closed or refusing store, and
// counts it in putting (the dispatcher leaves the planning of its records
// to the put, which ends with putDone).
func (s *Store) beginPut() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.refusal(); err != nil {
		return err
	}
	s.putting.Add(1)
	return nil
}

// putDone ends a PutBatch. When no other is in flight and the log holds
// records not yet planned or dispatched (this put failed, or its flush is
// still to come), the dispatcher looks at the log again: they are its to
// plan now. A put that dispatched its own records wakes no one, nor does
// one that left their dispatch for after its answer (deferred).
func (s *Store) putDone(deferred bool) {
	if s.putting.Add(-1) == 0 {
		planned := s.planned.Load()
		if planned < s.clog.MaxOffset() || (!deferred && s.dispatched.Load() < planned) {
			s.plannedSig.Notify()
		}
	}
}

// check validates a message before it is encoded.
func (s *Store) check(m *message.Ext) error {
	if err := message.ValidateTopic(m.Topic); err != nil {
		return fmt.Errorf("%w: %w", ErrMessageIllegal, err)
	}
	if len(m.Body) > s.opts.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrMessageTooLarge, len(m.Body), s.opts.MaxMessageSize)
	}
	if m.QueueID < 0 {
		return fmt.Errorf("%w: queue id %d", ErrMessageIllegal, m.QueueID)
	}
	if err := message.ValidateProperties(m.Properties); err != nil {
		return fmt.Errorf("%w: %w", ErrMessageIllegal, err)
	}
	return nil
}
