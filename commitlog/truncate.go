package commitlog

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// ErrNotBoundary is returned by Truncate and CheckBoundary for an offset
// that is not where a record, an end-of-segment blank or a segment starts,
// nor the end of the log.
var ErrNotBoundary = errors.New("commitlog: not a record boundary")

// CheckBoundary reports whether the log may be cut at off: off is the end
// of the log, the start of a segment in the log, or where a record (its
// PHYSICALOFFSET field says so) or an end-of-segment blank (filling exactly
// the rest of its segment) starts. It returns an error wrapping
// ErrNotBoundary (or ErrOffset when off is outside [MinOffset, MaxOffset])
// otherwise. Bytes not yet written to the file (staged) are not looked at:
// Truncate writes them out first.
func (l *Log) CheckBoundary(off int64) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.commitUpTo(l.MaxOffset()); err != nil {
		return err
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return l.checkBoundaryLocked(off, l.written.Load())
}

// checkBoundaryLocked is CheckBoundary with segMu held and the log ending
// at end.
func (l *Log) checkBoundaryLocked(off, end int64) error {
	minOff := l.minOffsetLocked()
	if off < minOff || off > end {
		return fmt.Errorf("%w: cannot cut the log at %d: it holds [%d, %d)", ErrOffset, off, minOff, end)
	}
	if off == end {
		return nil
	}
	seg := l.segmentFor(off)
	if seg == nil {
		return fmt.Errorf("%w: %d is in no segment", ErrNotBoundary, off)
	}
	if off == seg.start {
		return nil
	}
	rel := off - seg.start
	left := seg.end() - off
	if left < message.BlankSize {
		return fmt.Errorf("%w: %d is %d bytes before the end of its segment", ErrNotBoundary, off, left)
	}
	h, _ := message.PeekHeader(seg.m.Data[rel:])
	switch {
	case h.IsBlank():
		if int64(h.TotalSize) != left {
			return fmt.Errorf("%w: blank magic at %d but size %d, %d bytes left in the segment", ErrNotBoundary, off, h.TotalSize, left)
		}
		return nil
	case h.IsRecord():
		size := int64(h.TotalSize)
		if size < int64(message.MinRecordSize) || size > left || size > end-off {
			return fmt.Errorf("%w: record header at %d has size %d", ErrNotBoundary, off, size)
		}
		if phys := physicalOffsetOf(seg.m.Data[rel : rel+size]); phys != off {
			return fmt.Errorf("%w: the bytes at %d say they are at %d", ErrNotBoundary, off, phys)
		}
		return nil
	}
	return fmt.Errorf("%w: no record starts at %d (magic %#x)", ErrNotBoundary, off, h.Magic)
}

// Truncate cuts the log back to off, a record boundary (CheckBoundary):
// every byte from off on is discarded. Segments that start above off are
// deleted (newest first), the rest of the segment holding off is cleared
// (so it reads as zeros, as recovery expects past the end), the files and
// directory are synced, and the written, committed, flushed and readable
// offsets all become off. The next queue offsets are forgotten: the caller
// sets them again (SetQueueOffset) from its ConsumeQueues. A reopen after
// Truncate recovers the log to exactly off.
//
// Everything below off is made durable first (a flush), so after Truncate
// the log is durable up to its new end.
//
// The caller must make sure nothing appends meanwhile (replication into the
// log is stopped); an append that races anyway either lands before the cut
// and is discarded with the rest or after it. Concurrent readers are safe:
// reads past the new end fail with ErrOffset (or see zeros and report a bad
// header), none crashes. Truncate at MaxOffset only flushes.
func (l *Log) Truncate(off int64) error {
	if l.closed.Load() {
		return ErrClosed
	}
	// Write out and sync what is staged, so the kept prefix is durable and
	// nothing staged refers to a segment about to go.
	if err := l.flush(); err != nil {
		return fmt.Errorf("commitlog: truncate to %d: %w", off, err)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.segmentsClosed {
		return ErrClosed
	}
	// An append may have slipped in between the flush and the lock.
	if err := l.commit(); err != nil {
		return fmt.Errorf("commitlog: truncate to %d: %w", off, err)
	}
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	end := l.wpos
	l.segMu.Lock()
	if err := l.checkBoundaryLocked(off, end); err != nil {
		l.segMu.Unlock()
		return err
	}
	if off == end && l.flushed.Load() >= end {
		l.segMu.Unlock()
		return nil
	}
	var errs []error
	removed := 0
	keep := len(l.segs)
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if s.start <= off {
			break
		}
		// Newest first, so a crash leaves a contiguous run of files.
		if err := s.remove(); err != nil {
			errs = append(errs, err)
		}
		keep = i
		removed++
	}
	clear(l.segs[keep:])
	l.segs = l.segs[:keep]
	var active *segment
	if n := len(l.segs); n > 0 {
		if s := l.segs[n-1]; off >= s.start && off < s.end() {
			active = s
			rel := off - s.start
			if err := fsutil.ZeroRange(s.f, rel, s.size-rel); err != nil {
				errs = append(errs, fmt.Errorf("commitlog: clear %s from %d: %w", s.path, rel, err))
			}
		}
	}
	// Sync every kept segment that held bytes not yet durable, and the one
	// cleared.
	from := min(l.flushed.Load(), off)
	for _, s := range l.segs {
		if s.end() > from || s == active {
			if err := s.f.Sync(); err != nil {
				errs = append(errs, fmt.Errorf("commitlog: sync %s: %w", s.path, err))
			}
		}
	}
	l.segMu.Unlock()
	// A segment prepared after the old active one must not outlive it: it
	// would leave a gap in the names.
	l.allocMu.Lock()
	if l.next != nil {
		if err := l.next.remove(); err != nil {
			errs = append(errs, err)
		}
		l.next = nil
	}
	l.allocWant = -1
	if active != nil {
		l.allocWant = active.end()
	}
	l.allocMu.Unlock()
	if err := fsutil.SyncDir(l.opts.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		// The files are in an unknown state: refuse appends until a reopen
		// (whose recovery, or the caller's intent record, finishes the cut).
		return l.fail(fmt.Errorf("truncate to %d: %w", off, err))
	}
	for i := range l.stage {
		l.stage[i] = chunk{}
	}
	l.stage = l.stage[:0]
	l.staged = 0
	l.wpos = off
	l.setActiveLocked(active)
	if active != nil {
		// The cleared range is unwritten and out of the page cache again:
		// what was made writable or zeroed ahead of the writer there is not.
		rel := off - active.start
		active.populated = min(active.populated, rel)
		active.zeroed = min(active.zeroed, rel)
	}
	l.written.Store(off)
	l.quietEnd.Store(0)
	l.committed.Store(off)
	l.flushed.Store(off)
	clear(l.qoff)
	l.lastKnown = false
	l.lastStoreTs.Store(0)
	lower(&l.residentFrom, off)
	lower(&l.cacheFrom, off)
	if active != nil {
		signal(l.allocReq)
	}
	l.log.Warn("commitlog truncated", zap.Int64("to", off), zap.Int64("oldEnd", end),
		zap.Int("segmentsRemoved", removed))
	return nil
}
