package commitlog

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// dropEvery is how often dropBehind runs: at 1 GB/s of appends a pass
// drops a quarter of a GB.
const dropEvery = 250 * time.Millisecond

// dropRedo is how far below the last drop each pass starts again: pages a
// reader mapped or read back meanwhile just behind it go too.
const dropRedo = 64 << 20

// dropBehind drops the log's bytes more than Options.CacheWindow behind
// the flushed end from the page cache: first from this process's
// mappings (mmap.Mapping.Release: the page cache keeps a mapped page),
// then from the cache itself (posix_fadvise POSIX_FADV_DONTNEED, which
// drops clean pages only: every byte below the flushed end is clean).
// The memory goes back to the kernel's free lists and the next appends
// take it from there, so the log reuses a bounded amount of memory
// instead of growing the cache until the kernel has to reclaim it — on
// a virtual machine whose memory the host backs lazily, each page taken
// fresh costs several times what a reused one does (docs/BENCHMARKS.md).
// Reads below the window (catching-up consumers, due timer messages) read
// the file (ResidentFrom is raised with it).
//
// It runs every dropEvery on a goroutine of the log, and works in
// chunks of releaseChunk under the flush lock, as ReleaseResident does.
func (l *Log) dropBehind() {
	before, dropped := l.flushed.Load()-l.opts.CacheWindow, l.cacheFrom.Load()
	if before <= dropped {
		return
	}
	from := max(dropped-dropRedo, 0)
	l.segMu.RLock()
	segs := slices.Clone(l.segs)
	l.segMu.RUnlock()
	for _, s := range segs {
		if s.end() <= from {
			continue
		}
		if s.start >= before {
			break
		}
		lo, hi := max(from, s.start)-s.start, min(before, s.end())-s.start
		for ; lo < hi; lo += releaseChunk {
			done, err := l.dropRange(s, lo, min(lo+releaseChunk, hi))
			if err != nil {
				if !errors.Is(err, ErrClosed) {
					l.log.Warn("drop CommitLog pages from the page cache", zap.String("segment", s.path), zap.Error(err))
				}
				return
			}
			if !done {
				break // retention removed the segment meanwhile
			}
		}
	}
	raise(&l.residentFrom, before)
	raise(&l.cacheFrom, before)
}

// dropRange drops [lo, hi) of segment s from the mapping and the page
// cache, if s is still part of the log; done is false when it is not.
func (l *Log) dropRange(s *segment, lo, hi int64) (done bool, err error) {
	return l.onLiveSegment(s, func() error {
		if s.m != nil {
			if err := s.m.Release(int(lo), int(hi-lo)); err != nil {
				return err
			}
		}
		return unix.Fadvise(int(s.f.Fd()), lo, hi-lo, unix.FADV_DONTNEED)
	})
}

// raise sets v to to unless it is higher already.
func raise(v *atomic.Int64, to int64) {
	for {
		cur := v.Load()
		if to <= cur || v.CompareAndSwap(cur, to) {
			return
		}
	}
}

// lower sets v to to unless it is lower already.
func lower(v *atomic.Int64, to int64) {
	for {
		cur := v.Load()
		if cur <= to || v.CompareAndSwap(cur, to) {
			return
		}
	}
}
