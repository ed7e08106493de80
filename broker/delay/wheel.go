package delay

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
)

// Entry states in a loaded bucket.
const (
	stPending uint8 = iota
	stInflight
	stDone // delivered, or lost
	stCancelled
)

// went is one message of a loaded bucket (one per origin: copies are
// folded into the first one seen).
type went struct {
	deliverMS int64
	loc       int64
	origin    int64
	size      int32
	idx       uint32 // position in the bucket file (for the fired log)
	state     uint8
}

func (a *went) before(b *went) bool {
	if a.deliverMS != b.deliverMS {
		return a.deliverMS < b.deliverMS
	}
	return a.loc < b.loc
}

// lbucket is a level-0 bucket loaded into the wheel: the in-memory level of
// the timing wheel. Its entries fire in (due time, CommitLog offset) order:
// those present when it was loaded from a sorted slice, those appended
// later from a heap. Guarded by Engine.mu.
type lbucket struct {
	key      bucketKey
	bf       *bfile
	ents     []went
	byOrigin map[int64]int32
	order    []int32
	cur      int
	late     lateHeap
	open     int // entries neither done nor cancelled (inflight included)
	inflight int
	maxLoc   int64

	fired      *os.File // nil until the first delivery
	firedPath  string
	firedN     int64
	firedDirty bool
	firedPins  int
}

type lateHeap struct {
	lb  *lbucket
	idx []int32
}

func (h *lateHeap) Len() int { return len(h.idx) }
func (h *lateHeap) Less(i, j int) bool {
	return h.lb.ents[h.idx[i]].before(&h.lb.ents[h.idx[j]])
}
func (h *lateHeap) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *lateHeap) Push(x any)    { h.idx = append(h.idx, x.(int32)) }
func (h *lateHeap) Pop() any {
	n := len(h.idx) - 1
	x := h.idx[n]
	h.idx = h.idx[:n]
	return x
}

func newLBucket(bf *bfile, capacity int) *lbucket {
	lb := &lbucket{key: bf.key, bf: bf, ents: make([]went, 0, capacity), byOrigin: make(map[int64]int32, capacity), maxLoc: -1}
	lb.late.lb = lb
	return lb
}

// addInitial adds an entry read at load time (before sort); done marks it
// delivered (its position is in the fired log).
func (lb *lbucket) addInitial(e Entry, idx int64, done bool) {
	lb.maxLoc = max(lb.maxLoc, e.Location)
	if i, ok := lb.byOrigin[e.Origin]; ok {
		w := &lb.ents[i]
		if done && w.state == stPending {
			w.state = stDone
			lb.open--
		}
		if e.Location > w.loc {
			w.loc, w.size = e.Location, e.Size
		}
		return
	}
	st := stPending
	if done {
		st = stDone
	} else {
		lb.open++
	}
	lb.byOrigin[e.Origin] = int32(len(lb.ents))
	lb.ents = append(lb.ents, went{deliverMS: e.DeliverMS, loc: e.Location, origin: e.Origin, size: e.Size, idx: uint32(idx), state: st})
}

// sortInitial orders the pending entries read at load time.
func (lb *lbucket) sortInitial() {
	lb.order = make([]int32, 0, lb.open)
	for i := range lb.ents {
		if lb.ents[i].state == stPending {
			lb.order = append(lb.order, int32(i))
		}
	}
	slices.SortFunc(lb.order, func(a, b int32) int {
		switch {
		case lb.ents[a].before(&lb.ents[b]):
			return -1
		case lb.ents[b].before(&lb.ents[a]):
			return 1
		}
		return 0
	})
}

// addLate adds an entry appended after the bucket was loaded. It reports
// whether the entry is new (not a copy of one already known).
func (lb *lbucket) addLate(e Entry, idx int64, done bool) bool {
	lb.maxLoc = max(lb.maxLoc, e.Location)
	if i, ok := lb.byOrigin[e.Origin]; ok {
		w := &lb.ents[i]
		if done && w.state == stPending {
			w.state = stDone
			lb.open--
		}
		if w.state == stPending && e.Location > w.loc {
			w.loc, w.size = e.Location, e.Size
		}
		return false
	}
	st := stPending
	if done {
		st = stDone
	}
	i := int32(len(lb.ents))
	lb.byOrigin[e.Origin] = i
	lb.ents = append(lb.ents, went{deliverMS: e.DeliverMS, loc: e.Location, origin: e.Origin, size: e.Size, idx: uint32(idx), state: st})
	if st == stPending {
		lb.open++
		heap.Push(&lb.late, i)
	}
	return true
}

// peek returns the next pending entry in firing order.
func (lb *lbucket) peek() (i int32, fromLate, ok bool) {
	for lb.cur < len(lb.order) && lb.ents[lb.order[lb.cur]].state != stPending {
		lb.cur++
	}
	for lb.late.Len() > 0 && lb.ents[lb.late.idx[0]].state != stPending {
		heap.Pop(&lb.late)
	}
	hasOrder, hasLate := lb.cur < len(lb.order), lb.late.Len() > 0
	switch {
	case hasOrder && hasLate:
		a, b := lb.order[lb.cur], lb.late.idx[0]
		if lb.ents[b].before(&lb.ents[a]) {
			return b, true, true
		}
		return a, false, true
	case hasOrder:
		return lb.order[lb.cur], false, true
	case hasLate:
		return lb.late.idx[0], true, true
	}
	return 0, false, false
}

// pop removes the entry peek returned.
func (lb *lbucket) pop(fromLate bool) {
	if fromLate {
		heap.Pop(&lb.late)
	} else {
		lb.cur++
	}
	if lb.cur == len(lb.order) && lb.cur > 0 {
		lb.order, lb.cur = nil, 0
	}
}

// appendFired records delivered entries in the bucket's fired log.
func (lb *lbucket) appendFired(idx []uint32) error {
	if len(idx) == 0 {
		return nil
	}
	if lb.fired == nil {
		f, err := os.OpenFile(lb.firedPath, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("delay: fired log: %w", err)
		}
		lb.fired = f
	}
	buf := make([]byte, 4*len(idx))
	for i, x := range idx {
		binary.BigEndian.PutUint32(buf[4*i:], x)
	}
	if _, err := lb.fired.WriteAt(buf, lb.firedN*4); err != nil {
		return fmt.Errorf("delay: fired log of %s: %w", lb.key.name(), err)
	}
	lb.firedN += int64(len(idx))
	lb.firedDirty = true
	return nil
}
