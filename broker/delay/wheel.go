package delay

import (
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

// entChunk is how many entries one chunk of a loaded bucket holds.
const entChunk = 1024

// wents is a loaded bucket's entries, in chunks: a bucket grows while it is
// loaded (up to every message due in its 10 s), and growing one slice
// would copy it whole and allocate it anew under the engine lock each time
// it doubles. Chunks never move, so a pointer to an entry stays valid.
type wents struct {
	chunks [][]went
	n      int
}

func (ws *wents) len() int { return ws.n }

// at returns entry i (0 ≤ i < len).
func (ws *wents) at(i int32) *went { return &ws.chunks[i/entChunk][i%entChunk] }

// add appends w and returns its index.
func (ws *wents) add(w went) int32 {
	c := ws.n / entChunk
	if c == len(ws.chunks) {
		ws.chunks = append(ws.chunks, make([]went, 0, entChunk))
	}
	ws.chunks[c] = append(ws.chunks[c], w)
	ws.n++
	return int32(ws.n - 1)
}

// lbucket is a level-0 bucket loaded into the wheel: the in-memory level of
// the timing wheel. Its entries fire in (due time, CommitLog offset) order:
// those present when it was loaded from a sorted slice, those appended
// later from a sorted run while they come in order (messages sent with one
// delay arrive in due-time order: appended, not sifted through a heap) and
// from a heap otherwise. Guarded by Engine.mu.
type lbucket struct {
	key      bucketKey
	bf       *bfile
	ents     wents
	byOrigin originIndex
	order    []int32
	cur      int
	run      []int32 // late entries appended in firing order
	runCur   int
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

// lateHeap is a binary min-heap of entry indices in firing order (no
// container/heap: its interface boxes every index pushed).
type lateHeap struct {
	lb  *lbucket
	idx []int32
}

func (h *lateHeap) len() int { return len(h.idx) }

func (h *lateHeap) less(i, j int) bool {
	return h.lb.ents.at(h.idx[i]).before(h.lb.ents.at(h.idx[j]))
}

func (h *lateHeap) push(x int32) {
	h.idx = append(h.idx, x)
	for j := len(h.idx) - 1; j > 0; {
		p := (j - 1) / 2
		if !h.less(j, p) {
			break
		}
		h.idx[j], h.idx[p] = h.idx[p], h.idx[j]
		j = p
	}
}

func (h *lateHeap) pop() int32 {
	x := h.idx[0]
	n := len(h.idx) - 1
	h.idx[0] = h.idx[n]
	h.idx = h.idx[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.idx[i], h.idx[m] = h.idx[m], h.idx[i]
		i = m
	}
	return x
}

func newLBucket(bf *bfile, capacity int) *lbucket {
	lb := &lbucket{key: bf.key, bf: bf, byOrigin: newOriginIndex(capacity), maxLoc: -1}
	lb.late.lb = lb
	return lb
}

// addInitial adds an entry read at load time (before sort); done marks it
// delivered (its position is in the fired log).
func (lb *lbucket) addInitial(e Entry, idx int64, done bool) {
	lb.maxLoc = max(lb.maxLoc, e.Location)
	if i, ok := lb.byOrigin.get(e.Origin); ok {
		w := lb.ents.at(i)
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
	lb.byOrigin.put(e.Origin, lb.ents.add(went{deliverMS: e.DeliverMS, loc: e.Location, origin: e.Origin, size: e.Size, idx: uint32(idx), state: st}))
}

// sortInitial orders the pending entries read at load time.
func (lb *lbucket) sortInitial() {
	lb.order = make([]int32, 0, lb.open)
	for i := range int32(lb.ents.len()) {
		if lb.ents.at(i).state == stPending {
			lb.order = append(lb.order, i)
		}
	}
	slices.SortFunc(lb.order, func(a, b int32) int {
		wa, wb := lb.ents.at(a), lb.ents.at(b)
		switch {
		case wa.before(wb):
			return -1
		case wb.before(wa):
			return 1
		}
		return 0
	})
}

// addLate adds an entry appended after the bucket was loaded. It reports
// whether the entry is new (not a copy of one already known).
func (lb *lbucket) addLate(e Entry, idx int64, done bool) bool {
	lb.maxLoc = max(lb.maxLoc, e.Location)
	if i, ok := lb.byOrigin.get(e.Origin); ok {
		w := lb.ents.at(i)
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
	i := lb.ents.add(went{deliverMS: e.DeliverMS, loc: e.Location, origin: e.Origin, size: e.Size, idx: uint32(idx), state: st})
	lb.byOrigin.put(e.Origin, i)
	if st == stPending {
		lb.open++
		if n := len(lb.run); n == lb.runCur || !lb.ents.at(i).before(lb.ents.at(lb.run[n-1])) {
			lb.run = append(lb.run, i)
		} else {
			lb.late.push(i)
		}
	}
	return true
}

// Where peek found the next entry.
type source uint8

const (
	fromOrder source = iota // the entries sorted at load time
	fromRun                 // the late entries that came in order
	fromLate                // the late heap
)

// peek returns the next pending entry in firing order and where it is.
func (lb *lbucket) peek() (i int32, from source, ok bool) {
	for lb.cur < len(lb.order) && lb.ents.at(lb.order[lb.cur]).state != stPending {
		lb.cur++
	}
	for lb.runCur < len(lb.run) && lb.ents.at(lb.run[lb.runCur]).state != stPending {
		lb.runCur++
	}
	for lb.late.len() > 0 && lb.ents.at(lb.late.idx[0]).state != stPending {
		lb.late.pop()
	}
	var best *went
	if lb.cur < len(lb.order) {
		i, from, ok = lb.order[lb.cur], fromOrder, true
		best = lb.ents.at(i)
	}
	if lb.runCur < len(lb.run) {
		if j := lb.run[lb.runCur]; best == nil || lb.ents.at(j).before(best) {
			i, from, ok = j, fromRun, true
			best = lb.ents.at(j)
		}
	}
	if lb.late.len() > 0 {
		if j := lb.late.idx[0]; best == nil || lb.ents.at(j).before(best) {
			i, from, ok = j, fromLate, true
		}
	}
	return i, from, ok
}

// pop removes the entry peek returned.
func (lb *lbucket) pop(from source) {
	switch from {
	case fromLate:
		lb.late.pop()
	case fromRun:
		lb.runCur++
		if lb.runCur == len(lb.run) {
			lb.run, lb.runCur = lb.run[:0], 0
		}
	default:
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
