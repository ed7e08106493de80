package commitlog

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

const pageSize = 4096

func float64frombits(b uint64) float64 { return math.Float64frombits(b) }

// startLoops starts the goroutines the log owns; Close stops them.
func (l *Log) startLoops() {
	l.wg.Add(3)
	if l.opts.CacheWindow > 0 {
		l.wg.Add(1)
		go l.tickLoop(dropEvery, l.dropBehind)
	}
	go l.allocLoop()
	if l.mode == WriteMmap {
		l.wg.Add(1)
		go l.populateLoop()
	}
	if l.zero {
		l.wg.Add(1)
		go l.zeroLoop()
		signal(l.zeroReq)
	}
	go l.tickLoop(l.opts.DiskCheckInterval, l.checkDisk) // disk-full flag
	go l.tickLoop(max(l.opts.SyncFlushTimeout/watchQuarters, time.Millisecond), l.watchTick)
	if l.opts.FlushMode == FlushSync {
		l.wg.Add(1)
		go l.groupCommitLoop()
	} else {
		l.wg.Add(1)
		go l.asyncFlushLoop()
	}
	// Prepare the segment after the active one straight away.
	l.mu.Lock()
	if l.active != nil {
		l.allocMu.Lock()
		l.allocWant = l.active.end()
		l.allocMu.Unlock()
		signal(l.allocReq)
	}
	l.mu.Unlock()
}

// groupCommitLoop is the sync-mode flusher: whenever appends are waiting it
// gathers them as the policy in use says (groupcommit.go), makes everything
// appended so far durable in one flush and wakes them all.
func (l *Log) groupCommitLoop() {
	defer l.wg.Done()
	var g gatherState
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.flushReq:
		}
		l.gatherFor(&g)
		mark := l.syncAppends.Load()
		if err := l.flush(); err != nil {
			l.flushedSig.Notify()
		}
		l.noteFlush(&g, mark)
	}
}

// gather lets appenders that are about to append join the coming flush
// (the eager policy of groupcommit.go).
// Right after a flush wakes its waiters they append again one by one; a
// flush started by the first of them would carry one record and make the
// rest wait a whole extra flush. So the flusher yields until the log stops
// growing between two yields, for at most GroupCommitWait.
func (l *Log) gather() {
	if l.opts.GroupCommitWait <= 0 {
		return
	}
	deadline := time.Now().Add(l.opts.GroupCommitWait)
	last := l.written.Load()
	for time.Now().Before(deadline) {
		runtime.Gosched()
		cur := l.written.Load()
		if cur == last {
			return
		}
		last = cur
	}
}

// asyncFlushLoop flushes every FlushInterval when at least FlushLeastPages
// pages are dirty, and fully every FlushThoroughInterval.
func (l *Log) asyncFlushLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.opts.FlushInterval)
	defer t.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		dirty := l.committed.Load() - l.flushed.Load()
		if l.mode == WritePwrite {
			dirty = l.written.Load() - l.flushed.Load()
		}
		full := time.Since(lastFull) >= l.opts.FlushThoroughInterval
		if dirty <= 0 || (!full && dirty < int64(l.opts.FlushLeastPages)*pageSize) {
			continue
		}
		if full {
			lastFull = time.Now()
		}
		_ = l.flush()
	}
}

// commitUpTo makes sure bytes below end are written to the file, writing
// everything staged so far if they are not.
func (l *Log) commitUpTo(end int64) error {
	if l.committed.Load() >= end {
		return nil
	}
	return l.commit()
}

// commit writes the staged chunks with pwrite and advances the committed
// offset. In mmap mode there is nothing to stage: a bulk append writes
// what it staged before it releases the append lock (mmapwrite.go).
func (l *Log) commit() error {
	if l.mode != WritePwrite {
		return nil
	}
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	if err := l.Err(); err != nil {
		// Bytes staged before a failed write are gone: never let the
		// committed offset move over them.
		return err
	}
	l.mu.Lock()
	if l.committed.Load() >= l.wpos {
		l.mu.Unlock()
		return nil
	}
	chunks := l.stage
	end := l.wpos
	l.stage, l.spareStage = l.spareStage[:0], nil
	l.staged = 0
	l.mu.Unlock()
	err := l.writeChunks(chunks)
	if len(chunks) > 0 {
		l.mu.Lock()
		l.recycleChunksLocked(chunks)
		if l.spareStage == nil {
			l.spareStage = chunks[:0]
		}
		l.mu.Unlock()
	}
	if err != nil {
		return err
	}
	l.advanceCommitted(end)
	return nil
}

// writeChunks writes staged chunks with pwrite, stopping at the first
// failure, which makes the log fail.
func (l *Log) writeChunks(chunks []chunk) error {
	for _, c := range chunks {
		if _, err := c.seg.f.WriteAt(c.buf, c.off); err != nil {
			return l.fail(fmt.Errorf("pwrite %s at %d: %w", c.seg.path, c.off, err))
		}
	}
	return nil
}

// recycleChunksLocked keeps the buffers of written chunks for the stage
// (a few, of bounded size) and clears the chunks. l.mu is held.
func (l *Log) recycleChunksLocked(chunks []chunk) {
	for i, c := range chunks {
		if cap(c.buf) <= 2*l.opts.StageLimit && len(l.free) < 4 {
			l.free = append(l.free, c.buf[:0])
		}
		chunks[i] = chunk{}
	}
}

// flush makes everything committed durable and advances the flushed offset.
// Flushes are serialised by flushMu, which Close and retention also take
// before they close or remove a segment, so no segment is unmapped or
// closed while it is being synced and the flushed offset only grows.
func (l *Log) flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.segmentsClosed {
		return ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.commit(); err != nil {
		return err
	}
	from := l.flushed.Load()
	to := l.committed.Load()
	if to <= from {
		return nil
	}
	// Collect the segments to sync without holding segMu during the I/O.
	// Retention never removes a segment that is not fully flushed.
	l.segMu.RLock()
	var todo []*segment
	for _, s := range l.segs {
		if s.end() > from && s.start < to {
			todo = append(todo, s)
		}
	}
	l.segMu.RUnlock()
	start := time.Now()
	for _, s := range todo {
		var err error
		if l.mode == WriteMmap {
			lo := max(from, s.start) - s.start
			hi := min(to, s.end()) - s.start
			// Unmap the writer's whole pages of the range first (mmapwrite.go):
			// their dirty state goes to the page cache with them, and
			// write-back then has no mapping to write-protect page by page.
			// The page holding hi stays: the writer may be storing into it.
			_ = s.m.Release(int(lo), int(hi-lo))
			err = s.m.Sync(int(lo), int(hi-lo))
		} else {
			if l.opts.FlushMode == FlushSync {
				err = fsutil.Fdatasync(s.f) // appenders wait for it
			} else {
				err = fsutil.BackgroundFdatasync(s.f)
			}
		}
		if err != nil {
			return l.fail(fmt.Errorf("flush %s: %w", s.path, err))
		}
	}
	if l.opts.OnFlush != nil {
		l.opts.OnFlush(time.Since(start), to-from)
	}
	l.flushed.Store(to)
	l.flushedSig.Notify()
	if l.opts.FlushMode == FlushSync {
		l.readableSig.Notify()
	}
	return nil
}

// Flush makes everything appended so far durable.
func (l *Log) Flush() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.flush()
}

// WaitFlushed blocks until the log is durable up to end, the context ends,
// SyncFlushTimeout passes (ErrFlushTimeout) or a write fails.
//
// Waiters keep no timer and read no clock (a timer per sync append was a
// tenth of the group-commit benchmark's CPU): the flusher wakes them after
// every flush, watchTick wakes them every quarter of SyncFlushTimeout
// and counts those quarters, and a waiter gives up once four have passed
// since it began (so after between 1 and 1.25 times SyncFlushTimeout).
func (l *Log) WaitFlushed(ctx context.Context, end int64) error {
	if l.flushed.Load() >= end {
		return nil
	}
	began := l.watchTicks.Load()
	done := ctx.Done()
	for {
		ch := l.flushedSig.C()
		if l.flushed.Load() >= end {
			return nil
		}
		if err := l.Err(); err != nil {
			return err
		}
		if l.closed.Load() {
			return ErrClosed
		}
		if l.watchTicks.Load()-began > watchQuarters {
			return fmt.Errorf("%w: durable up to %d, waiting for %d after more than %v", ErrFlushTimeout, l.flushed.Load(), end, l.opts.SyncFlushTimeout)
		}
		l.requestFlush()
		if done == nil {
			<-ch
			continue
		}
		select {
		case <-ch:
		case <-done:
			return ctx.Err()
		}
	}
}

// requestFlush asks the sync-mode flusher for a flush unless one is asked
// for already.
func (l *Log) requestFlush() {
	if len(l.flushReq) == 0 {
		signal(l.flushReq)
	}
}

// watchQuarters is how many watchTick calls make a SyncFlushTimeout.
const watchQuarters = 4

// watchTick wakes WaitFlushed waiters every quarter of SyncFlushTimeout
// (tickLoop), so that when a flush hangs (a stuck disk) they fail with
// ErrFlushTimeout instead of waiting for it.
func (l *Log) watchTick() {
	l.watchTicks.Add(1)
	l.flushedSig.Notify()
}

// tickLoop calls fn every d until the log closes.
func (l *Log) tickLoop(d time.Duration, fn func()) {
	defer l.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// allocLoop prepares the next segment (create, preallocate, map) before the
// writer needs it.
func (l *Log) allocLoop() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.allocReq:
		}
		l.allocMu.Lock()
		want := l.allocWant
		if want >= 0 && l.next == nil {
			seg, err := openSegment(l.opts.Dir, want, l.opts.SegmentSize, true, l.writable)
			if err != nil {
				// The writer creates it itself and reports the error then.
				l.log.Warn("preparing next segment failed", zap.String("segment", SegmentName(want)), zap.Error(err))
			} else {
				l.next = seg
			}
		}
		l.allocMu.Unlock()
	}
}

// checkDisk samples disk usage and raises or clears the disk-full flag.
func (l *Log) checkDisk() {
	used, _, err := fsutil.Usage(l.opts.Dir)
	if err != nil {
		l.log.Warn("disk usage check failed", zap.Error(err))
		return
	}
	l.diskUsed.Store(math.Float64bits(used))
	full := used >= l.opts.DiskFullRatio
	if l.diskFull.Swap(full) != full {
		if full {
			l.log.Error("disk above the full ratio; refusing appends",
				zap.Float64("used", used), zap.Float64("limit", l.opts.DiskFullRatio))
		} else {
			l.log.Info("disk below the full ratio again; accepting appends", zap.Float64("used", used))
		}
	}
}
