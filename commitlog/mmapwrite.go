package commitlog

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/bolide-mq/bolide/internal/mmap"
)

// In mmap write mode a store into a page of the segment that is not yet
// present and writable in the process's page tables takes a page fault,
// and under the append lock. Three measures keep those faults off the
// append path (docs/BENCHMARKS.md, "the CommitLog written through its
// mapping"):
//
//   - The active segment's mapping from the writer on is advised
//     MADV_RANDOM: a fault there reads no pages around it. By default the
//     kernel reads read_ahead_kb around a fault, and for the preallocated,
//     unwritten part of a file that means zero-filling megabytes inside
//     one store.
//   - A goroutine (populateLoop) makes the pages ahead of the writer
//     present and writable with MADV_POPULATE_WRITE, PopulateAhead bytes
//     ahead, outside the append lock. Those pages count in the process's
//     resident set; an idle log that has not been written to since it
//     opened has none.
//   - A flush drops the writer's mappings of the whole pages it is about to
//     write back (Log.flush): write-back otherwise write-protects each
//     mapped page on its own, one TLB shootdown per page.
//
// A page made writable this way is first read, and for the unwritten
// (preallocated) part of a file that means zero-filled: a memset per page
// before the copy. For a small append that is cheaper than a system call;
// for a large one it is not, so an append of at least bulkWriteMin bytes at
// once (a batch, a replicated chunk) is staged and written with one pwrite
// before the append lock is released, as in pwrite mode but without the
// hand-off, and the pages it writes need no populating.

// PopulateAhead is how far ahead of the writer the pages are made
// writable in mmap write mode; a request is sent when the writer comes
// within half of it of the pages made so far.
const PopulateAhead = 4 << 20

// bulkWriteMin is the size from which an append in mmap write mode is
// written with pwrite (see above): 64 records of 1 KiB are, one is not.
const bulkWriteMin = 16 << 10

// beginBulkLocked starts a bulk append if n bytes are to be appended at
// once in mmap write mode: writeLocked stages them until endBulkLocked.
// It reports whether it did. l.mu is held.
func (l *Log) beginBulkLocked(n int) bool {
	if l.mode != WriteMmap || n < bulkWriteMin {
		return false
	}
	l.bulk = true
	return true
}

// endBulkLocked writes what the bulk append staged and ends it. On
// failure the log fails (the bytes staged are lost and the committed
// offset never passes them). l.mu is held.
func (l *Log) endBulkLocked() error {
	l.bulk = false
	err := l.writeChunks(l.stage)
	l.recycleChunksLocked(l.stage)
	l.stage = l.stage[:0]
	l.staged = 0
	return err
}

// populateReq asks populateLoop to make [lo, hi) of seg writable.
type populateReq struct {
	seg    *segment
	lo, hi int64
}

// populateLocked asks for the pages ahead of a store into seg ending at end
// (relative to the segment) when the store comes close to the end of the
// pages made writable so far. It never waits: with the populating
// goroutine busy the request is dropped and the stores fault their pages
// themselves. l.mu is held.
func (l *Log) populateLocked(seg *segment, end int64) {
	if end+PopulateAhead/2 <= seg.populated || l.populateOff.Load() {
		return
	}
	lo := max(seg.populated, end&^(pageSize-1))
	hi := min(seg.size, end+PopulateAhead)
	if hi <= lo {
		return
	}
	seg.populated = hi
	select {
	case l.populateReqs <- populateReq{seg, lo, hi}:
	default:
	}
}

// populateLoop serves populateLocked's requests until the log closes.
func (l *Log) populateLoop() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case r := <-l.populateReqs:
			l.populate(r)
		}
	}
}

// populate makes [r.lo, r.hi) of r.seg writable if the segment is still
// part of the log. With zeroPopulate it first claims the whole pages of
// the range from populateZeroGap past the writer on and writes zeros into
// them (zeroahead.go), so that populating finds them in the page cache.
func (l *Log) populate(r populateReq) {
	var lo, hi int64
	claimed := false
	if l.zeroPopulate {
		l.mu.Lock()
		lo, hi, claimed = l.claimZerosLocked(r.seg, l.zeroGap, r.hi, r.hi) // bounded by r.hi alone
		l.mu.Unlock()
	}
	if claimed && l.zeroDelay > 0 {
		time.Sleep(l.zeroDelay)
	}
	var zerr error
	_ = l.inLiveSegment(r.seg, func() error {
		if claimed {
			zerr = pwriteZeros(r.seg, lo, hi)
		}
		l.populateRange(r.seg, r.lo, r.hi)
		return nil
	})
	if claimed {
		l.endZeroClaim(r.seg, hi, zerr)
		if zerr != nil {
			l.zeroingFailed(zerr, "pages ahead are populated without")
		}
	}
}

// inLiveSegment runs fn under the segment list's read lock if seg is still
// part of the log (and does nothing otherwise): retention and truncation
// take the write lock before they close a segment, so seg stays mapped and
// open during fn. It is for the log's own helpers that touch a segment
// holding no other lock (populateLoop, zeroLoop).
func (l *Log) inLiveSegment(seg *segment, fn func() error) error {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	if !slices.Contains(l.segs, seg) {
		return nil
	}
	return fn()
}

// populateStep is how much of a request one MADV_POPULATE_WRITE call
// makes writable. Before each step the rest of the range is cut to the
// pages the writer has not passed: a populating goroutine that fell behind
// would otherwise make pages dirty again that were written, flushed and
// perhaps dropped from the page cache meanwhile (their content stays, but
// dropBehind drops clean pages only, so they would stay cached, and their
// write-back would be done twice). A step is small so that only one step's
// pages can be passed while it runs.
const populateStep = 64 << 10

// populateRange makes [lo, hi) of seg writable, populateStep at a time
// and never below the writer's page; the segment is mapped throughout. A
// kernel without MADV_POPULATE_WRITE turns populating off for good; any
// other failure costs only the faults it would have saved (the file is
// allocated, so the stores themselves cannot fail there).
func (l *Log) populateRange(seg *segment, lo, hi int64) {
	for {
		lo = max(lo, (l.written.Load()-seg.start)&^(pageSize-1))
		if lo >= hi {
			return
		}
		n := min(hi-lo, populateStep)
		if err := l.populatePages(seg, lo, n); err != nil {
			return
		}
		lo += n
	}
}

// populatePages makes [lo, lo+n) of seg writable, logging a failure.
func (l *Log) populatePages(seg *segment, lo, n int64) error {
	err := seg.m.PopulateWrite(int(lo), int(n))
	switch {
	case errors.Is(err, mmap.ErrPopulateUnsupported):
		if !l.populateOff.Swap(true) {
			l.log.Info("the kernel cannot populate pages ahead of the CommitLog writer; stores fault them in", zap.Error(err))
		}
	case err != nil:
		l.log.Debug("populating pages ahead of the CommitLog writer failed",
			zap.String("segment", seg.path), zap.Int64("from", lo), zap.Error(err))
	}
	return err
}

// setActiveLocked makes seg (nil for none) the segment the writer
// appends to. In mmap mode the part of its mapping from the writer on is
// advised MADV_RANDOM and the segment it leaves gets the default
// read-around back, for the readers that come later. l.mu is held.
func (l *Log) setActiveLocked(seg *segment) {
	old := l.active
	l.active = seg
	if l.mode != WriteMmap || old == seg {
		return
	}
	if old != nil && old.m.Data != nil {
		_ = old.m.Advise(unix.MADV_NORMAL)
	}
	if seg != nil {
		rel := max(l.wpos-seg.start, 0)
		_ = seg.m.AdviseRange(int(rel), int(seg.size-rel), unix.MADV_RANDOM)
	}
}
