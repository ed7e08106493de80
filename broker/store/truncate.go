package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// Truncation (doc.go, "Truncation"): a slave whose log went past the point
// where it forked from the new master's cuts its store back to that point.

// intentName is the file TruncateTo writes before it touches anything and
// removes once the store is consistent at the new end.
const intentName = "ha-truncate.json"

// ErrNotBoundary is wrapped by TruncateTo's error for an offset that is not
// a record boundary of the CommitLog.
var ErrNotBoundary = commitlog.ErrNotBoundary

// truncateIntent is the content of the intent file.
type truncateIntent struct {
	Version int   `json:"version"`
	Offset  int64 `json:"offset"`
}

// truncateStep names the points where a test may stop TruncateTo, as a
// crash there would.
type truncateStep int

const (
	stepIntent       truncateStep = iota + 1 // the intent file is written
	stepCommitLog                            // the CommitLog is cut
	stepConsumeQueue                         // the ConsumeQueues are cut
	stepIndex                                // the IndexFiles are cut
	stepCheckpoint                           // the checkpoint says the new end
)

// errTruncateStopped is what a test hook returns to stop TruncateTo.
var errTruncateStopped = errors.New("store: truncation stopped by a test hook")

// TruncateTo cuts the store back to the CommitLog offset off, a record
// boundary at or below the log's end: every record from off on disappears
// from the CommitLog, the ConsumeQueues and the IndexFiles, and the next
// queue offsets become those of the ConsumeQueues. A slave calls it when its
// log forked from its new master's at off.
//
// It is crash-safe: it first writes <dir>/ha-truncate.json (fsynced, with
// the directory) naming off, then cuts the CommitLog, the ConsumeQueues and
// the IndexFiles, writes a checkpoint that trusts nothing at or above off,
// and removes the intent file. Open finishes a truncation it finds pending
// before its usual recovery, so a crash at any point ends, after the
// reopen, with the store exactly at off.
//
// Dispatch is paused meanwhile. The caller must make sure nothing appends
// (replication into this store stopped, puts refused); readers may run and
// get errors or empty results for what was cut. An off that is not a
// record boundary is refused with an error wrapping ErrNotBoundary, and one
// outside [MinOffset, MaxOffset] with one wrapping commitlog.ErrOffset;
// nothing is changed then. TruncateTo at MaxOffset changes nothing but
// makes the log durable.
func (s *Store) TruncateTo(ctx context.Context, off int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.clog.CheckBoundary(off); err != nil {
		return fmt.Errorf("store: truncate to %d: %w", off, err)
	}
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	// However it ends, wake the dispatcher: it may have stopped for the
	// pause with records left.
	defer s.plannedSig.Notify()
	s.pauseWanted.Store(true)
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	defer s.pauseWanted.Store(false)
	s.planMu.Lock()
	defer s.planMu.Unlock()
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	oldEnd := s.clog.MaxOffset()
	if off == oldEnd {
		// Nothing to cut; the caller still gets a durable log.
		if err := s.clog.Flush(); err != nil {
			return fmt.Errorf("store: truncate to %d: %w", off, err)
		}
		return nil
	}
	if err := s.writeIntent(off); err != nil {
		return err
	}
	if err := s.hook(stepIntent); err != nil {
		return err
	}
	if err := s.truncateParts(off); err != nil {
		return err
	}
	if err := s.writeCheckpointLocked(); err != nil {
		return fmt.Errorf("store: truncate to %d: %w", off, err)
	}
	if err := s.hook(stepCheckpoint); err != nil {
		return err
	}
	if err := s.removeIntent(); err != nil {
		return err
	}
	s.dispatchedSig.Notify()
	s.log.Warn("store truncated", zap.Int64("to", off), zap.Int64("oldEnd", oldEnd),
		zap.Int64("dispatched", s.dispatched.Load()))
	return nil
}

// hook calls the test hook after a step of TruncateTo.
func (s *Store) hook(step truncateStep) error {
	if s.truncateHook == nil {
		return nil
	}
	return s.truncateHook(step)
}

// truncateParts cuts the CommitLog, ConsumeQueues and IndexFiles at off
// and resets the dispatch state to follow. The dispatcher and planners are
// stopped (pauseMu, planMu held).
func (s *Store) truncateParts(off int64) error {
	if err := s.clog.Truncate(off); err != nil {
		return fmt.Errorf("store: truncate to %d: %w", off, err)
	}
	if err := s.hook(stepCommitLog); err != nil {
		return err
	}
	if err := s.cqs.TruncateAfter(off); err != nil {
		return fmt.Errorf("store: truncate consume queues to %d: %w", off, err)
	}
	if err := s.cqs.Flush(); err != nil {
		return fmt.Errorf("store: truncate consume queues to %d: %w", off, err)
	}
	if err := s.hook(stepConsumeQueue); err != nil {
		return err
	}
	if s.index != nil {
		if err := s.index.TruncateAfter(off); err != nil {
			return fmt.Errorf("store: truncate index to %d: %w", off, err)
		}
		if err := s.index.Flush(); err != nil {
			return fmt.Errorf("store: truncate index to %d: %w", off, err)
		}
	}
	if err := s.hook(stepIndex); err != nil {
		return err
	}
	// Dispatch state: what was dispatched above off is gone; the plan for
	// records above off is void. Records below off not yet dispatched are
	// planned and dispatched again as usual.
	d := min(s.dispatched.Load(), off)
	s.dispatched.Store(d)
	s.dispatchFailed = s.index != nil // drop partial index entries before the next attempt
	s.resetPlanLocked(d)
	if s.recovering.Load() && s.recoverEnd > off {
		s.recoverEnd = off // a recovery cut short by a full disk ends at the new end
	}
	if d == off {
		s.lastStoreTime.Store(s.clog.LastStoreTimestamp())
	}
	s.samplesMu.Lock()
	kept := s.samples[:0]
	for _, b := range s.samples {
		if b <= d {
			kept = append(kept, b)
		}
	}
	s.samples = kept
	s.logFrom = min(s.logFrom, d)
	if len(s.samples) == 0 {
		s.samples = append(s.samples, s.logFrom)
	}
	s.lastSample = s.samples[len(s.samples)-1]
	s.samplesMu.Unlock()
	s.adoptQueueOffsetsTail()
	return nil
}

// resetPlanLocked forgets every plan above the dispatched offset d: planMu
// is held and the dispatcher is paused.
func (s *Store) resetPlanLocked(d int64) {
	s.planned.Store(d)
	s.plannedEntries = s.settledEntries.Load()
	clear(s.planQueues)
	s.newMu.Lock()
	clear(s.newFiles)
	s.heldBig = 0
	s.newOrder = s.newOrder[:0]
	s.nextNewFile.Store(math.MaxInt64)
	s.newMu.Unlock()
	s.decoded.head.Store(s.decoded.tail.Load())
}

// writeIntent makes the intent to truncate at off durable.
func (s *Store) writeIntent(off int64) error {
	b, err := json.Marshal(truncateIntent{Version: 1, Offset: off})
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(s.opts.Dir, intentName), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("store: truncate to %d: intent: %w", off, err)
	}
	return nil
}

// removeIntent deletes the intent file durably.
func (s *Store) removeIntent() error {
	if err := os.Remove(filepath.Join(s.opts.Dir, intentName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: remove truncation intent: %w", err)
	}
	if err := fsutil.SyncDir(s.opts.Dir); err != nil {
		return fmt.Errorf("store: remove truncation intent: %w", err)
	}
	return nil
}

// readIntent returns the pending truncation, if any.
func readIntent(dir string) (off int64, ok bool, err error) {
	path := filepath.Join(dir, intentName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: read %s: %w", path, err)
	}
	var in truncateIntent
	if err := json.Unmarshal(b, &in); err != nil {
		return 0, false, fmt.Errorf("store: %s is corrupt: %w", path, err)
	}
	if in.Version != 1 || in.Offset < 0 {
		return 0, false, fmt.Errorf("store: %s: unknown version %d or offset %d", path, in.Version, in.Offset)
	}
	return in.Offset, true, nil
}

// SetDispatchLimit makes the dispatcher build ConsumeQueue and IndexFile
// entries only for records that end at or below off, so consumers (pulls,
// POP, the delay and transaction services, which read through the queues)
// see nothing past it. math.MaxInt64, the default, is no limit. Raising
// it wakes the dispatcher; lowering it below what is already dispatched
// takes nothing back. A master in controller sync mode sets it to its
// confirm offset.
func (s *Store) SetDispatchLimit(off int64) {
	if old := s.dispatchLimit.Swap(off); off > old {
		s.limitSig.Notify()
	}
}

// DispatchLimit returns the limit SetDispatchLimit set.
func (s *Store) DispatchLimit() int64 { return s.dispatchLimit.Load() }

// errDispatchLimit stops a dispatch scan at the first record that ends
// past the dispatch limit.
var errDispatchLimit = errors.New("store: dispatch limit reached")

// adoptQueueOffsetsTail gives the CommitLog the next queue offsets of the
// records in the log: those of the ConsumeQueues, raised by the records
// written but not dispatched yet (held back by the dispatch limit, or just
// not reached). It returns how many queues it set.
func (s *Store) adoptQueueOffsetsTail() int {
	// The ConsumeQueues hold every record below d (the dispatcher stores
	// the dispatched offset after the queue unit); scanning from d covers
	// the rest, whatever the dispatcher does meanwhile.
	d := s.dispatched.Load()
	next := make(map[touched]int64)
	for _, q := range s.cqs.Queues() {
		next[touched{q.Topic(), q.ID()}] = q.MaxOffset()
	}
	if end := s.clog.Readable(); d < end {
		_, err := s.clog.Scan(d, end, func(off int64, rec []byte) error {
			dd, err := message.DecodeDispatch(rec)
			if err != nil || !message.Dispatchable(dd.SysFlag) {
				return nil
			}
			k := touched{dd.Topic, dd.QueueID}
			next[k] = max(next[k], dd.QueueOffset+1)
			return nil
		})
		if err != nil {
			s.log.Warn("queue offsets: scanning the undispatched tail stopped", zap.Int64("from", d), zap.Error(err))
		}
	}
	for k, n := range next {
		s.clog.SetQueueOffset(k.topic, k.id, n)
	}
	return len(next)
}
