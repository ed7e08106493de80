package store

import (
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/consumequeue"
	"github.com/bolide-mq/bolide/indexfile"
	"github.com/bolide-mq/bolide/message"
)

// sampleEvery is how many bytes apart the dispatcher remembers record
// boundaries as candidate verification points for the checkpoint.
const sampleEvery = 256 << 10

// maxSamples bounds the boundary ring.
const maxSamples = 256

// dispatchLoop tails the CommitLog: whenever its readable end moves, it
// builds the ConsumeQueue and IndexFile entries of the new records and wakes
// whoever waits for them.
func (s *Store) dispatchLoop() {
	defer s.wg.Done()
	for {
		ch := s.clog.ReadableChanged()
		readable := s.clog.Readable()
		if s.dispatched.Load() < readable {
			if _, err := s.dispatchAvailable(readable); err != nil {
				s.log.Error("dispatch stopped at a bad record", zap.Int64("offset", s.dispatched.Load()), zap.Error(err))
				// The log verified this record on append; a parse failure
				// here is a bug. Retry later rather than spin.
				select {
				case <-s.ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-ch:
		}
	}
}

// touched remembers the queues a dispatch batch advanced, to notify them once.
type touched struct {
	topic string
	id    int32
}

// dispatchAvailable dispatches every record from the dispatched offset up to
// limit and returns how many it handled. Only the dispatcher goroutine (or
// Open/Close, when it is not running) calls it.
func (s *Store) dispatchAvailable(limit int64) (int64, error) {
	var n int64
	var last touched
	if s.seen == nil {
		s.seen = make(map[touched]*consumequeue.Queue)
	}
	seen := s.seen
	clear(seen)
	from := s.dispatched.Load()
	next, err := s.clog.Scan(from, limit, func(off int64, rec []byte) error {
		d, err := message.DecodeDispatch(rec)
		if err != nil {
			return fmt.Errorf("record at %d: %w", off, err)
		}
		n++
		s.dispatchRecord(&d)
		s.lastStoreTime.Store(d.StoreTimestamp)
		if message.Dispatchable(d.SysFlag) {
			k := touched{d.Topic, d.QueueID}
			if k != last {
				if _, ok := seen[k]; !ok {
					q, _ := s.cqs.Lookup(d.Topic, d.QueueID)
					seen[k] = q
				}
				last = k
			}
		}
		end := off + int64(d.Size)
		s.dispatched.Store(end)
		s.sample(end)
		return nil
	})
	if next > s.dispatched.Load() {
		// Scan skipped an end-of-segment blank.
		s.dispatched.Store(next)
	}
	if n > 0 || next > from {
		s.dispatchedSig.Notify()
		if fn := s.arrival.Load(); fn != nil {
			for k, q := range seen {
				if q != nil {
					(*fn)(k.topic, k.id, q.MaxOffset())
				}
			}
		}
	}
	return n, err
}

// dispatchRecord builds the ConsumeQueue unit and the index entries of one
// record. Errors are logged and counted: the record stays in the log and a
// later recovery rebuilds its entries.
func (s *Store) dispatchRecord(d *message.Dispatch) {
	tt := message.TransactionType(d.SysFlag)
	if message.Dispatchable(d.SysFlag) {
		tag := d.TagsHash
		if s.opts.TagCode != nil {
			tag = s.opts.TagCode(d)
		}
		q, err := s.cqs.Queue(d.Topic, d.QueueID)
		if err == nil {
			err = q.Put(d.QueueOffset, consumequeue.Unit{Offset: d.PhysicalOffset, Size: d.Size, TagHash: tag})
		}
		if err != nil {
			s.dispatchErrors.Add(1)
			s.log.Error("consume queue dispatch failed", zap.String("topic", d.Topic),
				zap.Int32("queue", d.QueueID), zap.Int64("queueOffset", d.QueueOffset),
				zap.Int64("offset", d.PhysicalOffset), zap.Error(err))
		}
	}
	if s.index == nil || tt == message.SysFlagTransRollback {
		return
	}
	put := func(key string) {
		if err := s.index.Put(indexfile.BuildKey(d.Topic, key), d.PhysicalOffset, d.StoreTimestamp); err != nil {
			s.dispatchErrors.Add(1)
			s.log.Error("index dispatch failed", zap.String("topic", d.Topic), zap.String("key", key),
				zap.Int64("offset", d.PhysicalOffset), zap.Error(err))
		}
	}
	if d.UniqueKey != "" {
		put(d.UniqueKey)
	}
	for _, k := range message.SplitKeys(d.Keys) {
		put(k)
	}
}

// sample remembers record boundaries roughly every sampleEvery bytes. Only
// the dispatching goroutine calls it.
func (s *Store) sample(boundary int64) {
	if boundary-s.lastSample < sampleEvery {
		return
	}
	s.lastSample = boundary
	s.samplesMu.Lock()
	if n := len(s.samples); n == maxSamples {
		copy(s.samples, s.samples[1:])
		s.samples = s.samples[:n-1]
	}
	s.samples = append(s.samples, boundary)
	s.samplesMu.Unlock()
}

// verifyPoint picks the checkpoint's LogFrom: the newest remembered boundary
// at least RecoverWindow below limit, never moving backwards.
func (s *Store) verifyPoint(limit int64) int64 {
	s.samplesMu.Lock()
	defer s.samplesMu.Unlock()
	best := s.logFrom
	for _, b := range s.samples {
		if b <= limit-s.opts.RecoverWindow && b > best {
			best = b
		}
	}
	if best > limit {
		best = limit
	}
	s.logFrom = best
	return best
}

// writeCheckpoint flushes the queues and index up to the dispatched offset
// and records it, with a verification point below the log's durable end.
func (s *Store) writeCheckpoint() error {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	dispatched := s.dispatched.Load()
	if err := s.cqs.Flush(); err != nil {
		return fmt.Errorf("store: flush consume queues: %w", err)
	}
	if s.index != nil {
		if err := s.index.Flush(); err != nil {
			return fmt.Errorf("store: flush index: %w", err)
		}
	}
	flushed := s.clog.FlushedOffset()
	cp := checkpoint{
		LogFrom:        s.verifyPoint(min(flushed, dispatched)),
		DispatchFrom:   dispatched,
		FlushedOffset:  flushed,
		StoreTimestamp: s.lastStoreTime.Load(),
		WrittenAt:      s.opts.Now().UnixMilli(),
	}
	if err := writeCheckpoint(filepath.Join(s.opts.Dir, checkpointName), cp); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

func (s *Store) checkpointLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if err := s.writeCheckpoint(); err != nil {
			s.log.Error("checkpoint failed", zap.Error(err))
		}
	}
}

// retentionLoop deletes expired CommitLog segments and then the queue and
// index files that only referred to them.
func (s *Store) retentionLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.RunRetention(s.opts.Now()); err != nil {
			s.log.Error("retention failed", zap.Error(err))
		}
	}
}

// RunRetention applies the retention policy once at time now and returns the
// number of CommitLog segments deleted.
func (s *Store) RunRetention(now time.Time) (int, error) {
	n, err := s.clog.DeleteExpired(now, s.opts.Retention)
	if n == 0 {
		return n, err
	}
	minOff := s.clog.MinOffset()
	if _, cerr := s.cqs.DeleteBefore(minOff); cerr != nil && err == nil {
		err = cerr
	}
	if s.index != nil {
		if _, ierr := s.index.DeleteBefore(minOff); ierr != nil && err == nil {
			err = ierr
		}
	}
	return n, err
}
