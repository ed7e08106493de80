package store

import (
	"context"
	"fmt"
	"math"

	"go.uber.org/zap"
)

// A slave's store takes the master's CommitLog bytes through
// CommitLog().AppendRaw; the dispatcher builds ConsumeQueues and IndexFiles
// from them as from any record, since records carry their queue offsets.
// Two things need the store's help.

// StartAt makes the store's empty CommitLog start at off, a segment start:
// a new slave of a master whose oldest segments were deleted copies from
// the master's minimum offset. Dispatch continues from there.
func (s *Store) StartAt(off int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.clog.MaxOffset() != s.clog.MinOffset() {
		return fmt.Errorf("store: cannot start at %d: the log holds [%d, %d)", off, s.clog.MinOffset(), s.clog.MaxOffset())
	}
	// The log is empty, so the dispatcher is idle: nothing is readable. Move
	// the dispatch point first so it never looks below the new start.
	s.planMu.Lock()
	defer s.planMu.Unlock()
	prev := s.dispatched.Load()
	s.dispatched.Store(off)
	if err := s.clog.StartAt(off); err != nil {
		s.dispatched.Store(prev)
		return err
	}
	s.planned.Store(off)
	s.log.Info("store starts at a new offset", zap.Int64("start", off))
	return s.writeCheckpoint()
}

// AdoptQueueOffsets makes the CommitLog's next queue offsets agree with the
// records in the log: those of the ConsumeQueues, raised by the records not
// dispatched yet. Appends of replicated bytes do not advance them (the
// records carry their own), so a slave becoming master calls this before it
// takes its first message. Without a dispatch limit it first waits until
// everything written so far is dispatched; with one (SetDispatchLimit) it
// does not wait, since records past the limit stay undispatched, and takes
// their queue offsets from the log itself.
func (s *Store) AdoptQueueOffsets(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.clog.Flush(); err != nil { // sync mode dispatches only what is flushed
		return err
	}
	if s.dispatchLimit.Load() == math.MaxInt64 {
		if err := s.WaitDispatched(ctx, s.clog.MaxOffset()); err != nil {
			return err
		}
	}
	n := s.adoptQueueOffsetsTail()
	s.log.Info("queue offsets taken from the consume queues", zap.Int("queues", n),
		zap.Int64("logEnd", s.clog.MaxOffset()))
	return nil
}
