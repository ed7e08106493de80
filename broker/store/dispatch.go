package store

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/consumequeue"
	"github.com/bolide-mq/bolide/indexfile"
	"github.com/bolide-mq/bolide/message"
)

// sampleEvery is how many bytes apart the dispatcher remembers record
// boundaries as candidate verification points for the checkpoint.
const sampleEvery = 256 << 10

// maxSamples bounds the boundary ring.
const maxSamples = 256

// dispatchRetryDelay is how long the dispatcher waits before retrying a
// record it could not index.
const dispatchRetryDelay = 200 * time.Millisecond

// dispatchLoop tails the CommitLog: whenever its readable end moves, it
// plans room for the new records (room.go), builds their ConsumeQueue and
// IndexFile entries and wakes whoever waits for them.
func (s *Store) dispatchLoop() {
	defer s.wg.Done()
	for {
		ch := s.clog.ReadableChanged()
		planCh := s.plannedSig.C()
		limitCh := s.limitSig.C()
		again, planErr, putting := s.dispatchStep()
		if again {
			continue
		}
		if planErr != nil {
			// Retry later, or as soon as the keeper finds room.
			select {
			case <-s.ctx.Done():
				return
			case <-s.roomSig.C():
			case <-time.After(dispatchRetryDelay):
			}
			continue
		}
		// Wait for more: while puts are in flight, for them to plan it
		// (their planning wakes the dispatcher, and so does the return of
		// the last one, after which it looks at the log again).
		if putting {
			ch = nil
		}
		select {
		case <-s.ctx.Done():
			return
		case <-planCh:
		case <-ch:
		case <-limitCh:
		}
	}
}

// dispatchStep plans and dispatches what it can, under pauseMu (which
// TruncateTo takes to pause dispatch). again says it made progress and
// should look again at once; planErr that it must retry later.
func (s *Store) dispatchStep() (again bool, planErr error, putting bool) {
	s.pauseMu.Lock()
	s.stepping.Store(true)
	again, planErr, putting = s.dispatchStepLocked()
	s.pauseMu.Unlock()
	s.stepping.Store(false) // after Unlock: a put that fails to lock meanwhile still tells the dispatcher
	return again, planErr, putting
}

// dispatchStepLocked is dispatchStep with pauseMu held.
func (s *Store) dispatchStepLocked() (again bool, planErr error, putting bool) {
	readable := s.clog.Readable()
	// Puts in flight plan their own records (without decoding them);
	// the dispatcher plans the rest: replicated records, and those of
	// puts that returned without planning them.
	putting = s.putting.Load() > 0
	if s.pauseWanted.Load() {
		return false, nil, putting // TruncateTo wakes the dispatcher when done
	}
	if !putting && s.planned.Load() < readable {
		if planErr = s.planTo(readable); planErr != nil {
			s.setFull(planErr)
		}
	}
	if limit := s.planned.Load(); s.dispatched.Load() < limit {
		before := s.dispatched.Load()
		_, err := s.dispatchAvailable(limit)
		s.finishRecovery()
		if err == nil {
			// No progress: the dispatch limit holds the next record back.
			return s.dispatched.Load() > before, planErr, putting
		}
		// An I/O error: keep the record and retry; consumers lag
		// until it succeeds, nothing is skipped.
		s.log.Error("dispatch stopped; retrying", zap.Int64("offset", s.dispatched.Load()), zap.Error(err))
		planErr = err
	}
	return false, planErr, putting
}

// dispatchInline dispatches the planned records on a putter's goroutine
// when nothing else is dispatching, so that a lone appender's records reach
// their queues (and the consumers waiting on them) without a hand-off to
// the dispatcher goroutine, which stays parked: the log fires no
// ReadableChanged for puts (commitlog.Options.AppendersDispatch).
//
// When pauseMu is taken, its holder looks again after letting go: another
// putter loops here; the dispatcher, stepping, is told by plannedSig (it
// subscribed before its step; it reads planned only after setting
// stepping, so a put it was not told of is one it sees); TruncateTo ends
// with that notification itself and Close ends dispatch for good.
// Anything this call cannot finish — records held back by the dispatch
// limit, an I/O error to retry — goes to the dispatcher.
func (s *Store) dispatchInline() {
	for s.dispatched.Load() < s.planned.Load() {
		if !s.pauseMu.TryLock() {
			if s.stepping.Load() {
				s.plannedSig.Notify()
			}
			return
		}
		if s.closed.Load() {
			s.pauseMu.Unlock()
			return
		}
		before := s.dispatched.Load()
		_, planErr, _ := s.dispatchStepLocked()
		progressed := s.dispatched.Load() > before
		s.pauseMu.Unlock()
		if planErr != nil || !progressed {
			s.plannedSig.Notify()
			return
		}
	}
}

// finishRecovery ends a recovery that the disk cut short once the
// dispatcher has reached the end of the log as Open found it: the log
// takes the queues' next offsets and puts are accepted again.
func (s *Store) finishRecovery() {
	if !s.recovering.Load() || s.dispatched.Load() < s.recoverEnd {
		return
	}
	n := s.adoptQueueOffsets()
	s.recovering.Store(false)
	s.log.Info("recovery finished: the queues are rebuilt up to the end of the log",
		zap.Int64("logEnd", s.recoverEnd), zap.Int("queues", n))
}

// touched remembers the queues a dispatch batch advanced, to notify them once.
type touched struct {
	topic string
	id    int32
}

// seenKeep is the most queues a dispatch batch may touch for its scratch
// map to be kept for the next batch.
const seenKeep = 256

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
	if s.dispatchFailed && s.index != nil {
		// The last attempt may have indexed some keys of the record it
		// failed on; drop them so the retry does not index them twice.
		s.dispatchMu.Lock()
		err := s.index.TruncateAfter(from)
		s.dispatchMu.Unlock()
		if err != nil {
			return 0, &retryableError{off: from, err: err}
		}
	}
	dlimit := s.dispatchLimit.Load()
	next, err := s.clog.Scan(from, limit, func(off int64, rec []byte) error {
		if off+int64(len(rec)) > dlimit || s.pauseWanted.Load() {
			return errDispatchLimit
		}
		var d message.Dispatch
		if !s.decoded.take(off, &d) {
			var err error
			if d, err = message.DecodeDispatch(rec); err != nil {
				return fmt.Errorf("record at %d: %w", off, err)
			}
		} else if testHandedDispatch != nil {
			testHandedDispatch(d, rec)
		}
		s.dispatchMu.Lock()
		q, err := s.dispatchRecord(&d)
		if err == nil {
			s.settle(off, &d)
		}
		s.dispatchMu.Unlock()
		if err != nil {
			return &retryableError{off: off, err: err}
		}
		n++
		s.lastStoreTime.Store(d.StoreTimestamp)
		if message.Dispatchable(d.SysFlag) {
			k := touched{d.Topic, d.QueueID}
			if k != last {
				if _, ok := seen[k]; !ok {
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
	if len(seen) > seenKeep {
		// A clear and a range walk the map's capacity, not its entries:
		// after a batch over thousands of queues, let the next start small.
		s.seen = nil
	}
	if errors.Is(err, errDispatchLimit) {
		err = nil
	}
	var rerr *retryableError
	s.dispatchFailed = errors.As(err, &rerr)
	return n, err
}

// retryableError stops dispatch at a record that could not be indexed yet.
type retryableError struct {
	off int64
	err error
}

func (e *retryableError) Error() string {
	return fmt.Sprintf("dispatch of record at %d: %v", e.off, e.err)
}

func (e *retryableError) Unwrap() error { return e.err }

// dispatchRecord builds the ConsumeQueue unit and the index entries of one
// record. An error it returns is transient (an I/O error, a full disk): the
// dispatcher stops at this record and retries it later, so no acknowledged
// record is ever left out of its queue. Inconsistencies that a retry cannot
// fix (a gap in queue offsets) are logged, counted and skipped, as RocketMQ
// does, so one bad record cannot stall every consumer. It returns the
// queue the record went to (nil when none did).
func (s *Store) dispatchRecord(d *message.Dispatch) (*consumequeue.Queue, error) {
	var q *consumequeue.Queue
	tt := message.TransactionType(d.SysFlag)
	if message.Dispatchable(d.SysFlag) {
		tag := d.TagsHash
		if s.opts.TagCode != nil {
			tag = s.opts.TagCode(*d)
		}
		var err error
		q, err = s.cqs.Queue(d.Topic, d.QueueID)
		if err == nil {
			err = q.Put(d.QueueOffset, consumequeue.Unit{Offset: d.PhysicalOffset, Size: d.Size, TagHash: tag})
		}
		if err != nil {
			if !permanentDispatchError(err) {
				return q, fmt.Errorf("consume queue %s/%d: %w", d.Topic, d.QueueID, err)
			}
			s.dispatchErrors.Add(1)
			s.log.Error("consume queue dispatch failed; record skipped", zap.String("topic", d.Topic),
				zap.Int32("queue", d.QueueID), zap.Int64("queueOffset", d.QueueOffset),
				zap.Int64("offset", d.PhysicalOffset), zap.Error(err))
		}
	}
	if s.index == nil || tt == message.SysFlagTransRollback {
		return q, nil
	}
	put := func(key string) error {
		err := s.index.PutHash(indexfile.TopicKeyHash(d.Topic, key), d.PhysicalOffset, d.StoreTimestamp)
		if err == nil {
			return nil
		}
		if !permanentDispatchError(err) {
			return fmt.Errorf("index %s#%s: %w", d.Topic, key, err)
		}
		s.dispatchErrors.Add(1)
		s.log.Error("index dispatch failed; key skipped", zap.String("topic", d.Topic), zap.String("key", key),
			zap.Int64("offset", d.PhysicalOffset), zap.Error(err))
		return nil
	}
	if d.UniqueKey != "" {
		if err := put(d.UniqueKey); err != nil {
			return q, err
		}
	}
	for _, k := range message.SplitKeys(d.Keys) {
		if err := put(k); err != nil {
			return q, err
		}
	}
	return q, nil
}

// testHandedDispatch, set by tests, sees each record whose Dispatch the
// dispatcher was handed instead of decoding it.
var testHandedDispatch func(handed message.Dispatch, rec []byte)

// permanentDispatchError reports errors a retry cannot fix.
func permanentDispatchError(err error) bool {
	return errors.Is(err, consumequeue.ErrOffsetGap) || errors.Is(err, consumequeue.ErrCorrupt) ||
		errors.Is(err, consumequeue.ErrInvalid) || errors.Is(err, indexfile.ErrOutOfOrder)
}

// sample remembers record boundaries at least sampleGap apart. Only the
// dispatching goroutine calls it.
//
// The samples are candidate verification points: one becomes the
// checkpoint's LogFrom once it is RecoverWindow below the durable end. At
// high ingest rates the stretch not yet durable is longer than maxSamples
// samples sampleEvery apart; so when the ring is full the spacing doubles
// and every other sample goes, keeping samples evenly spread from the
// oldest (the next to become eligible) to the newest. Dropping the oldest
// instead left no sample ever eligible, and the checkpoint never moved.
func (s *Store) sample(boundary int64) {
	gap := max(s.sampleGap.Load(), sampleEvery)
	if boundary-s.lastSample < gap {
		return
	}
	s.lastSample = boundary
	s.samplesMu.Lock()
	defer s.samplesMu.Unlock()
	gap = max(s.sampleGap.Load(), sampleEvery)
	for len(s.samples) >= maxSamples {
		gap *= 2
		k := 1
		for i := 1; i < len(s.samples); i++ {
			if s.samples[i]-s.samples[k-1] >= gap {
				s.samples[k] = s.samples[i]
				k++
			}
		}
		s.samples = s.samples[:k]
	}
	s.sampleGap.Store(gap)
	s.samples = append(s.samples, boundary)
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
	// Samples at or below it can never be chosen again.
	kept := s.samples[:0]
	for _, b := range s.samples {
		if b > best {
			kept = append(kept, b)
		}
	}
	s.samples = kept
	if g := s.sampleGap.Load(); len(kept) < maxSamples/4 && g > sampleEvery {
		s.sampleGap.Store(g / 2) // the ring has room again: sample more densely
	}
	return best
}

// writeCheckpoint flushes the queues and index up to the dispatched offset
// and records it, with a verification point below the log's durable end.
func (s *Store) writeCheckpoint() error {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	return s.writeCheckpointLocked()
}

// writeCheckpointLocked is writeCheckpoint with cpMu held.
func (s *Store) writeCheckpointLocked() error { return s.checkpointLocked(true) }

// checkpointLocked flushes and records a checkpoint; cpMu is held. A
// periodic one (full false) lets the ConsumeQueues keep the few units of
// queues written now and then staged while they point less than
// QueueFlushLag bytes behind the dispatched end
// (consumequeue.Store.FlushBelow): they are durable in the queues' staging
// journal, whose position the checkpoint records, and StagedFrom records
// the first of them for a recovery that finds the journal damaged. Every
// QueueFlushEvery-th periodic checkpoint flushes everything.
func (s *Store) checkpointLocked(full bool) error {
	dispatched := s.dispatched.Load()
	staged := dispatched
	s.checkpoints++
	if every := s.opts.QueueFlushEvery; full || s.opts.QueueFlushLag <= 0 || every <= 1 || s.checkpoints%int64(every) == 0 {
		if err := s.cqs.Flush(); err != nil {
			return fmt.Errorf("store: flush consume queues: %w", err)
		}
	} else {
		kept, err := s.cqs.FlushBelow(dispatched - s.opts.QueueFlushLag)
		if err != nil {
			return fmt.Errorf("store: flush consume queues: %w", err)
		}
		staged = min(staged, kept)
	}
	if s.index != nil {
		if err := s.index.Flush(); err != nil {
			return fmt.Errorf("store: flush index: %w", err)
		}
	}
	flushed := s.clog.FlushedOffset()
	cp := checkpoint{
		// A recovery that must rebuild from StagedFrom reads records below
		// LogFrom only when they were durable when it was taken.
		LogFrom:        s.verifyPoint(min(flushed, dispatched)),
		DispatchFrom:   dispatched,
		FlushedOffset:  flushed,
		StoreTimestamp: s.lastStoreTime.Load(),
		WrittenAt:      s.opts.Now().UnixMilli(),
		StagedFrom:     staged,
		Journal:        s.cqs.Journal(),
	}
	if err := s.cpFile.write(cp); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// every runs fn every d until the store closes (a goroutine of s.wg).
func (s *Store) every(d time.Duration, fn func()) {
	defer s.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// checkpointOnce flushes the queues and indexes and writes the checkpoint.
func (s *Store) checkpointOnce() {
	s.cpMu.Lock()
	err := s.checkpointLocked(false)
	s.cpMu.Unlock()
	if err != nil {
		s.log.Error("checkpoint failed", zap.Error(err))
	}
}

// releaseResident drops old mapped CommitLog pages from the resident set
// (see Options.ResidentTail).
func (s *Store) releaseResident() {
	before := s.dispatched.Load() - s.opts.ResidentTail
	if before <= 0 {
		return
	}
	if _, err := s.clog.ReleaseResident(before); err != nil && !errors.Is(err, commitlog.ErrClosed) {
		s.log.Warn("release resident CommitLog pages", zap.Error(err))
	}
}

// retentionOnce deletes expired CommitLog segments and then the queue and
// index files that only referred to them.
func (s *Store) retentionOnce() {
	if _, err := s.RunRetention(s.opts.Now()); err != nil {
		s.log.Error("retention failed", zap.Error(err))
	}
}

// RunRetention applies the retention policy once at time now and returns the
// number of CommitLog segments deleted.
func (s *Store) RunRetention(now time.Time) (int, error) {
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	n, err := s.clog.DeleteExpiredBelow(now, s.opts.Retention, s.DispatchedOffset())
	if n == 0 {
		return n, err
	}
	if derr := s.dropBelowLog(); derr != nil && err == nil {
		err = derr
	}
	return n, err
}

// dropBelowLog makes the queues and the index follow the CommitLog's
// minimum offset: queue and index files that only point below it are
// deleted, and every queue's min offset moves up to its first unit at or
// above it (consumequeue.Queue.DeleteBefore), so that nobody is told of
// messages that are gone. Retention calls it after deleting segments, and
// Open after recovery: min offsets are not persisted, and a crash may have
// come between the deletion of segments and this.
func (s *Store) dropBelowLog() error {
	minOff := s.clog.MinOffset()
	if minOff <= 0 {
		return nil
	}
	var errs []error
	if _, err := s.cqs.DeleteBefore(minOff); err != nil {
		errs = append(errs, fmt.Errorf("store: drop queue units below %d: %w", minOff, err))
	}
	if s.index != nil {
		if _, err := s.index.DeleteBefore(minOff); err != nil {
			errs = append(errs, fmt.Errorf("store: drop index files below %d: %w", minOff, err))
		}
	}
	return errors.Join(errs...)
}
