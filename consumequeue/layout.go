package consumequeue

import "math/bits"

// layout says which file holds a queue offset (doc.go, "Files"): below
// UnitsPerFile the files grow, the first two holding FirstFileUnits units
// each and every later one twice the one before it, until the one that
// ends at UnitsPerFile; from there on every file holds UnitsPerFile units,
// as RocketMQ's do. It is a function of the offset alone, so the files of
// a queue are found again from their names, whatever its first offset.
type layout struct {
	upf   int64 // units of a full file
	first int64 // units of the first file; == upf: every file is full
}

func newLayout(opts Options) layout {
	return layout{upf: int64(opts.UnitsPerFile), first: int64(opts.firstFileUnits())}
}

// fileStart returns the queue offset of the first unit of the file that
// holds off.
func (l layout) fileStart(off int64) int64 {
	if off >= l.upf || l.first >= l.upf {
		return off - off%l.upf
	}
	if off < l.first {
		return 0
	}
	k := off / l.first // >= 1: the file is [p*first, 2*p*first) for the power of two p <= k
	return int64(1) << (bits.Len64(uint64(k)) - 1) * l.first
}

// fileUnits returns how many units the file starting at start holds;
// start must be a file start.
func (l layout) fileUnits(start int64) int64 {
	if start >= l.upf || l.first >= l.upf {
		return l.upf
	}
	if start == 0 {
		return l.first
	}
	return min(start, l.upf-start)
}

// isFileStart reports whether a file may start at queue offset start.
func (l layout) isFileStart(start int64) bool { return start >= 0 && l.fileStart(start) == start }

// fileEnd returns the queue offset just past the file starting at start.
func (l layout) fileEnd(start int64) int64 { return start + l.fileUnits(start) }
