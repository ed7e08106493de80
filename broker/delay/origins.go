package delay

import (
	"cmp"
	"slices"
)

// originIndex finds a loaded bucket's entry by its origin (the CommitLog
// offset of a timer message's first copy). A bucket's entries are indexed
// as the timer queue is read, so their origins mostly come in increasing
// order: those are appended to a sorted run, and the few that come out of
// order (a copy written again, whose origin is older) go to a map. At
// 100 000 timer messages a second a 10-second bucket holds a million
// entries; a Go map of that size cost a cache miss or two for every entry
// indexed, where appending to the run costs none.
type originIndex struct {
	run  []originAt // increasing origins
	rest map[int64]int32
}

type originAt struct {
	origin int64
	i      int32
}

func newOriginIndex(capacity int) originIndex {
	return originIndex{run: make([]originAt, 0, capacity)}
}

// get returns the entry of origin o.
func (x *originIndex) get(o int64) (int32, bool) {
	if k, ok := x.inRun(o); ok {
		return x.run[k].i, true
	}
	i, ok := x.rest[o]
	return i, ok
}

// put records i as the entry of origin o, replacing any entry it had.
func (x *originIndex) put(o int64, i int32) {
	if n := len(x.run); n == 0 || o > x.run[n-1].origin {
		x.run = append(x.run, originAt{o, i})
		return
	}
	if k, ok := x.inRun(o); ok {
		x.run[k].i = i
		return
	}
	if x.rest == nil {
		x.rest = make(map[int64]int32)
	}
	x.rest[o] = i
}

// inRun returns the position of origin o in the run.
func (x *originIndex) inRun(o int64) (int, bool) {
	n := len(x.run)
	if n == 0 || o < x.run[0].origin || o > x.run[n-1].origin {
		return 0, false
	}
	return slices.BinarySearchFunc(x.run, o, func(a originAt, o int64) int { return cmp.Compare(a.origin, o) })
}
