package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"go.uber.org/zap"
)

// TruncateAfter removes every unit whose Offset >= phyOffset: the units from
// the first such unit to MaxOffset are dropped from the stage or zeroed in
// their file (and synced), files that lie
// wholly past it are deleted, except the first file, which is always kept so
// that MinOffset stays meaningful. Afterwards MaxOffset is the offset of that
// first removed unit (== MinOffset if nothing is left). Units are in
// CommitLog order, so the cut point is found by binary search.
func (q *Queue) TruncateAfter(phyOffset int64) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return q.errf("truncate after %d: %w", phyOffset, ErrClosed)
	}
	lo, hi := q.minOff.Load(), q.maxOff.Load()
	if hi == lo || q.maxPhy.Load() <= phyOffset && q.lastEnd <= phyOffset {
		// Every unit ends at or below phyOffset: nothing to drop.
		q.mu.Unlock()
		return nil
	}
	cut, err := q.searchUnits(lo, hi, func(u Unit) bool { return u.Offset >= phyOffset })
	if err != nil {
		q.mu.Unlock()
		return q.errf("truncate after %d: %w", phyOffset, err)
	}
	if cut == hi {
		q.mu.Unlock()
		return nil
	}
	var lastEnd int64
	if cut > lo {
		u, err := q.unitAt(cut - 1)
		if err != nil {
			q.mu.Unlock()
			return q.errf("truncate after %d: %w", phyOffset, err)
		}
		lastEnd = u.End()
	}
	q.maxOff.Store(cut)
	q.epoch++
	var errs []error
	keep := len(q.segs)
	for i := len(q.segs) - 1; i >= 0; i-- {
		seg := q.segs[i]
		if seg.end() <= cut {
			break
		}
		if seg.start >= cut && i > 0 {
			keep = i
			continue
		}
		// Only units below written are in the file.
		if from, to := max(cut, seg.start), min(hi, seg.end(), q.written); to > from {
			if err := seg.zero(from, to); err != nil {
				errs = append(errs, err)
			} else {
				errs = append(errs, seg.sync())
			}
		}
	}
	removed := append([]*segment(nil), q.segs[keep:]...)
	clear(q.segs[keep:])
	q.segs = q.segs[:keep]
	q.segsChanged()
	if cut >= q.written {
		q.stage = q.stage[:(cut-q.written)*UnitSize]
	} else {
		q.stage = q.stage[:0]
		q.written = cut
	}
	q.lastEnd = lastEnd
	q.maxPhy.Store(q.lastEnd)
	q.flushed.Store(min(q.flushed.Load(), cut))
	q.journaled = min(q.journaled, cut)
	if q.jcut != nil {
		q.jcut.Store(true) // the journal may hold what was cut
	}
	q.mu.Unlock()

	q.logger().Debug("consumequeue truncated", zap.Int64("phyOffset", phyOffset),
		zap.Int64("fromQueueOffset", cut), zap.Int64("oldMaxOffset", hi), zap.Int("filesRemoved", len(removed)))
	// Newest first, so a crash leaves a contiguous run of files.
	for i := len(removed) - 1; i >= 0; i-- {
		seg := removed[i]
		if err := os.Remove(seg.path); err != nil {
			// Keep recovery from resurrecting the units: zero the file.
			errs = append(errs, fmt.Errorf("remove truncated file: %w", err), seg.zero(seg.start, seg.end()), seg.sync())
		}
		errs = append(errs, seg.closeFile())
	}
	if len(removed) > 0 {
		errs = append(errs, fsutil.SyncDir(q.dir))
	}
	if err := errors.Join(errs...); err != nil {
		return q.errf("truncate after %d: %w", phyOffset, err)
	}
	return nil
}

// DeleteBefore drops what lies below minPhyOffset, the CommitLog's new
// minimum: it removes the queue's oldest files whose last unit ends at or
// below it (their messages are gone from the CommitLog), never the last
// file, and raises MinOffset to the first unit whose Offset is >= it
// (RocketMQ's correctMinOffset), MaxOffset if there is none. Units are in
// CommitLog order, so that unit is found by binary search; it lies in the
// first remaining file. MinOffset never moves down, and it is not
// persisted: after a restart the caller calls DeleteBefore again. It
// returns how many files were removed.
func (q *Queue) DeleteBefore(minPhyOffset int64) (int, error) {
	q.flushMu.Lock() // a flush may be writing the files
	defer q.flushMu.Unlock()
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return 0, q.errf("delete before %d: %w", minPhyOffset, ErrClosed)
	}
	hi := q.maxOff.Load()
	k := 0
	for k < len(q.segs)-1 {
		seg := q.segs[k]
		lastOff := seg.end() - 1
		if lastOff >= hi {
			break
		}
		if u, err := q.unitAt(lastOff); err != nil || !u.valid() || u.End() > minPhyOffset {
			break
		}
		k++
	}
	if k == 0 {
		err := q.correctMinLocked(minPhyOffset)
		q.mu.Unlock()
		if err != nil {
			return 0, q.errf("delete before %d: %w", minPhyOffset, err)
		}
		return 0, nil
	}
	removed := append([]*segment(nil), q.segs[:k]...)
	q.segs = append([]*segment(nil), q.segs[k:]...)
	q.segsChanged()
	if start := q.segs[0].start; q.written < start {
		// Staged units of the removed files are gone with them.
		n := copy(q.stage, q.stage[(start-q.written)*UnitSize:])
		q.stage = q.stage[:n]
		q.written = start
	}
	if q.minOff.Load() < q.segs[0].start {
		q.minOff.Store(q.segs[0].start)
	}
	var errs []error
	if err := q.correctMinLocked(minPhyOffset); err != nil {
		errs = append(errs, err)
	}
	q.mu.Unlock()

	n := 0
	// Oldest first, so a crash or a failure leaves a contiguous run of files.
	for _, seg := range removed {
		if len(errs) == 0 {
			if err := os.Remove(seg.path); err != nil {
				errs = append(errs, fmt.Errorf("remove expired file: %w", err))
			} else {
				n++
			}
		}
		if err := seg.closeFile(); err != nil {
			errs = append(errs, err)
		}
	}
	if n > 0 {
		errs = append(errs, fsutil.SyncDir(q.dir))
	}
	q.logger().Info("consumequeue files deleted", zap.Int64("minPhyOffset", minPhyOffset),
		zap.Int("files", n), zap.Int64("minOffset", q.minOff.Load()))
	if err := errors.Join(errs...); err != nil {
		return n, q.errf("delete before %d: %w", minPhyOffset, err)
	}
	return n, nil
}

// correctMinLocked raises MinOffset to the first unit whose Offset is >=
// minPhyOffset, or to MaxOffset when every unit lies below it. mu is held
// exclusively, so MaxOffset cannot move.
func (q *Queue) correctMinLocked(minPhyOffset int64) error {
	lo, hi := q.minOff.Load(), q.maxOff.Load()
	if lo >= hi {
		return nil
	}
	if u, err := q.unitAt(lo); err != nil || u.Offset >= minPhyOffset {
		return err
	}
	m, err := q.searchUnits(lo, hi, func(u Unit) bool { return u.Offset >= minPhyOffset })
	if err != nil {
		return err
	}
	q.minOff.Store(m)
	return nil
}

// stageKeep is the stage capacity any queue may keep between flushes; a
// busier one keeps what its last interval needed.
const stageKeep = 4 << 10

// Flush writes the staged units to their files and makes every unit put
// so far durable, with the directory entries of the files created since
// the last flush.
func (q *Queue) Flush() error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Load() {
		return q.errf("flush: %w", ErrClosed)
	}
	return q.flushLocked()
}

// dirty reports whether a flush has anything to make durable. It takes no
// lock: a unit put meanwhile may or may not be seen.
func (q *Queue) dirty() bool {
	return q.maxOff.Load() > q.flushed.Load() || q.unsynced.Load() != 0
}

// flushLocked writes the stage and fdatasyncs the files holding units
// [flushed, MaxOffset) and the new directory entries. flushMu is held.
func (q *Queue) flushLocked() error {
	to, syncFrom, segs, err := q.writeStagedLocked()
	if err != nil {
		return q.errf("flush: %w", err)
	}
	var errs []error
	for _, seg := range segs {
		if to <= syncFrom || seg.end() <= syncFrom || seg.start >= to {
			continue
		}
		errs = append(errs, seg.sync())
	}
	errs = append(errs, q.syncDirs())
	if err := errors.Join(errs...); err != nil {
		return q.errf("flush: %w", err)
	}
	q.flushed.Store(to)
	return q.closeIdleLocked()
}

// writeStagedLocked writes the stage with pwrite, outside mu (readers and
// the writer go on: they read staged units from the stage until written
// moves), and returns the end of what is written, where the units not yet
// durable start, and the files. flushMu is held, so no file is removed
// meanwhile; the writer only adds files and stage bytes past the ones
// written here.
func (q *Queue) writeStagedLocked() (to, syncFrom int64, segs []*segment, err error) {
	q.mu.RLock()
	if len(q.segs) == 0 {
		q.mu.RUnlock()
		return 0, 0, nil, nil
	}
	from := q.written
	to = q.maxOff.Load()
	staged := q.stage[:(to-from)*UnitSize]
	segs = append(segs, q.segs...)
	syncFrom = max(q.flushed.Load(), segs[0].start) // pre-blank units are flushed too
	q.mu.RUnlock()

	for off := from; off < to; {
		i := sort.Search(len(segs), func(i int) bool { return segs[i].end() > off })
		seg := segs[i]
		stop := min(to, seg.end())
		if err := seg.write(off, staged[(off-from)*UnitSize:(stop-from)*UnitSize]); err != nil {
			return 0, 0, nil, err
		}
		off = stop
	}
	if to > from {
		q.mu.Lock()
		n := copy(q.stage, q.stage[(to-from)*UnitSize:])
		q.stage = q.stage[:n]
		if want := max(q.stagePeak, 2*n, stageKeep); cap(q.stage) > 2*want {
			// A burst is over (or the queue went quiet): give its
			// buffer back, keeping what the last interval needed.
			q.stage = append(make([]byte, 0, want), q.stage...)
		}
		q.stagePeak = n
		q.written = to
		q.mu.Unlock()
	}
	return to, syncFrom, segs, nil
}

// closeIdleLocked closes, after a flush, the descriptors nobody needs
// open: those of complete files (only read from now on, and reopened when
// read), and all of the queue's when it was not used since the previous
// flush or when the store holds more than Options.MaxOpenFiles. flushMu is
// held; it takes mu so that no read is using them.
func (q *Queue) closeIdleLocked() error {
	used := q.used.Swap(false)
	all := !used || q.fds.over()
	q.mu.RLock()
	n := len(q.segs)
	busy := false
	for i, seg := range q.segs {
		if seg.isOpen() && (all || i < n-1) {
			busy = true
			break
		}
	}
	q.mu.RUnlock()
	if !busy {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var errs []error
	for i, seg := range q.segs {
		if all || i < len(q.segs)-1 {
			errs = append(errs, seg.closeFile())
		}
	}
	return errors.Join(errs...)
}

// close flushes (if asked), closes every file and marks the queue closed.
func (q *Queue) close(flush bool) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Load() {
		return nil
	}
	var errs []error
	if flush {
		errs = append(errs, q.flushLocked())
	}
	q.mu.Lock()
	q.closed.Store(true)
	segs := q.segs
	q.segs = nil
	q.segsChanged()
	q.mu.Unlock()
	for _, seg := range segs {
		errs = append(errs, seg.closeFile())
	}
	return errors.Join(errs...)
}
