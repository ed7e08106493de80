package commitlog

import "slices"

// releaseChunk is how much mapping ReleaseResident drops per hold of the
// flush lock: a sync-mode flush waits at most one chunk's madvise.
const releaseChunk = 64 << 20

// ReleaseResident drops the mapped pages of the log below offset before
// from the process's resident set (see mmap.Mapping.Release): reads of
// old records (dispatch, catching-up consumers, due timer messages) map
// pages that otherwise stay counted in the broker's RSS although the kernel
// holds them in its page cache anyway. A later read maps them again (a
// minor fault). It returns the bytes of mapping it went over.
//
// It works in chunks of releaseChunk, each under the flush lock (no segment
// is unmapped or removed meanwhile) but not the whole pass: over a log of
// many GiB the pass takes tens of milliseconds, and sync-mode appends wait
// for the flushes it would hold up.
func (l *Log) ReleaseResident(before int64) (int64, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	l.segMu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.segMu.RUnlock()
	var released int64
	for _, s := range segs {
		if s.start >= before {
			break
		}
		n := min(before, s.end()) - s.start
		for lo := int64(0); lo < n; lo += releaseChunk {
			done, err := l.releaseRange(s, lo, min(lo+releaseChunk, n))
			if err != nil {
				return released, err
			}
			if !done {
				break // retention removed the segment meanwhile
			}
			released += min(lo+releaseChunk, n) - lo
		}
	}
	raise(&l.residentFrom, before) // callers may overlap; residentFrom only grows
	return released, nil
}

// releaseRange drops [lo, hi) of segment s's mapping, if s is still part
// of the log and mapped; done is false when it is not.
func (l *Log) releaseRange(s *segment, lo, hi int64) (done bool, err error) {
	mapped := false
	done, err = l.onLiveSegment(s, func() error {
		if s.m == nil {
			return nil
		}
		mapped = true
		return s.m.Release(int(lo), int(hi-lo))
	})
	return done && mapped, err
}

// onLiveSegment runs fn under the flush lock (no segment is unmapped or
// removed meanwhile) if s is still part of the log; done is false when it
// is not.
func (l *Log) onLiveSegment(s *segment, fn func() error) (done bool, err error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.segmentsClosed {
		return false, ErrClosed
	}
	l.segMu.RLock()
	live := slices.Contains(l.segs, s)
	l.segMu.RUnlock()
	if !live {
		return false, nil
	}
	return true, fn()
}

// ResidentFrom returns the offset below which ReleaseResident has dropped
// the mapped pages: a record there is better read with PreadRecord or
// PreadRecords.
func (l *Log) ResidentFrom() int64 { return l.residentFrom.Load() }
