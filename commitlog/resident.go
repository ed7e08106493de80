package commitlog

// ReleaseResident drops the mapped pages of the log below offset before
// from the process's resident set (see mmap.Mapping.Release): reads of
// old records (dispatch, catching-up consumers, due timer messages) map
// pages that otherwise stay counted in the broker's RSS although the kernel
// holds them in its page cache anyway. A later read maps them again (a
// minor fault). It returns the bytes of mapping it went over.
func (l *Log) ReleaseResident(before int64) (int64, error) {
	l.flushMu.Lock() // no segment is unmapped meanwhile
	defer l.flushMu.Unlock()
	if l.segmentsClosed {
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
		if s.m == nil {
			continue
		}
		n := min(before, s.end()) - s.start
		if err := s.m.Release(0, int(n)); err != nil {
			return released, err
		}
		released += n
	}
	if before > l.residentFrom.Load() { // flushMu serialises the callers
		l.residentFrom.Store(before)
	}
	return released, nil
}

// ResidentFrom returns the offset below which ReleaseResident has dropped
// the mapped pages: a record there is better read with PreadRecord.
func (l *Log) ResidentFrom() int64 { return l.residentFrom.Load() }
