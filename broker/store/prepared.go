package store

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// Prepared is a record encoded by the caller for PutPrepared: unsealed
// (message.EncodeUnsealed or message.RestoreRecord), with the store's
// StoreHost, and what its append and dispatch need.
type Prepared struct {
	Record    []byte
	Topic     string
	QueueID   int32
	SysFlag   int32
	Keys      string // the KEYS property
	UniqueKey string // the UNIQ_KEY property
	// Complete says that SysFlag is the record's own and that the fields
	// below are set too: with Keys and UniqueKey, all that the dispatch
	// takes from the record's properties (message.Dispatch), so the
	// dispatcher does not decode the record.
	Complete   bool
	TagsHash   int64
	DelayLevel int32
	TimerOutMS int64
}

// StoreHost is the host written into every record this store stores.
func (s *Store) StoreHost() netip.AddrPort { return s.opts.StoreHost }

// Now reads the store's clock (Options.Now), which gives a message sent
// without a born time its own.
func (s *Store) Now() time.Time { return s.opts.Now() }

// PutPrepared is PutBatch for records the caller encoded itself (the
// delayed delivery copies stored records into their real topics without
// decoding them; the broker writes a packed send's records from the
// producer's entries): they are stored contiguously under one append,
// stamped and sealed by the CommitLog, and acknowledged and dispatched as
// PutBatch does. The records' Topic and QueueID must be those they encode;
// Record is changed in place (stamped). Only the topic, the queue id and
// the record's header are checked: the body size limit and the properties
// are the caller's to check (checked when the messages the delayed records
// come from were first stored; a packed send's, by message.NextPacked and
// the broker's limits).
func (s *Store) PutPrepared(ctx context.Context, recs []Prepared, dst []PutResult) ([]PutResult, error) {
	if err := s.beginPut(); err != nil {
		return dst, err
	}
	deferred := false
	defer func() { s.putDone(deferred) }()
	entries := make([]commitlog.Entry, len(recs))
	ptrs := make([]*commitlog.Entry, len(recs))
	for i := range recs {
		p := &recs[i]
		if err := message.ValidateTopic(p.Topic); err != nil {
			return dst, fmt.Errorf("%w: %w", ErrMessageIllegal, err)
		}
		if p.QueueID < 0 {
			return dst, fmt.Errorf("%w: queue id %d", ErrMessageIllegal, p.QueueID)
		}
		if h, err := message.PeekHeader(p.Record); err != nil || !h.IsRecord() || int(h.TotalSize) != len(p.Record) {
			return dst, fmt.Errorf("%w: prepared record of %s is not one record", ErrMessageIllegal, p.Topic)
		}
		entries[i] = commitlog.Entry{Record: p.Record, Topic: p.Topic, QueueID: p.QueueID,
			NoQueueOffset: !message.Dispatchable(p.SysFlag)}
		ptrs[i] = &entries[i]
	}
	return s.appendBatch(ctx, ptrs, func(i int) (message.Dispatch, bool) {
		p := &recs[i]
		d := message.Dispatch{Topic: p.Topic, QueueID: p.QueueID, SysFlag: p.SysFlag, Keys: p.Keys, UniqueKey: p.UniqueKey,
			TagsHash: p.TagsHash, DelayLevel: p.DelayLevel, TimerOutMS: p.TimerOutMS}
		return d, p.Complete // unless complete, the dispatcher decodes the record for the rest
	}, dst, &deferred)
}

// ReadRecords reads the records at CommitLog offsets offs and calls fn for
// each, with its index in offs; rec is valid only during fn. Records behind
// the resident tail are read with pread, those close together in one call
// (commitlog.Log.PreadRecords).
func (s *Store) ReadRecords(offs []int64, fn func(i int, rec []byte, err error)) {
	from := s.clog.ResidentFrom()
	var cold []int64
	var coldIdx []int
	var buf []byte
	for i, off := range offs {
		if off < from {
			cold = append(cold, off)
			coldIdx = append(coldIdx, i)
			continue
		}
		rec, err := s.clog.ReadRecord(off, buf[:0])
		if err != nil {
			fn(i, nil, err)
			continue
		}
		buf = rec
		fn(i, rec, nil)
	}
	if len(cold) == 0 {
		return
	}
	s.clog.PreadRecords(cold, func(k int, rec []byte, err error) { fn(coldIdx[k], rec, err) })
}
