package delay

import (
	"math/rand/v2"
	"testing"
)

// TestLateHeapOrder: entries pushed in random order (with equal due times
// and removals in between) come out in (due time, location) order, and
// chunked entries keep their addresses as the bucket grows.
func TestLateHeapOrder(t *testing.T) {
	lb := newLBucket(&bfile{}, 0)
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 5*entChunk + 17
	first := lb.ents.add(went{deliverMS: -1})
	p := lb.ents.at(first)
	for i := range n {
		lb.late.push(lb.ents.add(went{deliverMS: rng.Int64N(500), loc: int64(i)}))
		if i%7 == 0 && lb.late.len() > 0 {
			lb.late.pop() // interleaved pops keep the heap property
		}
	}
	if lb.ents.len() != n+1 || lb.ents.at(first) != p || p.deliverMS != -1 {
		t.Fatalf("entries: len %d, first moved %v", lb.ents.len(), lb.ents.at(first) != p)
	}
	var prev *went
	for lb.late.len() > 0 {
		w := lb.ents.at(lb.late.pop())
		if prev != nil && w.before(prev) {
			t.Fatalf("popped (%d, %d) after (%d, %d)", w.deliverMS, w.loc, prev.deliverMS, prev.loc)
		}
		prev = w
	}
}

// TestLoadedBucketFiringOrder: entries loaded sorted, then appended late
// mostly in order (the run) and sometimes not (the heap), fire once each in
// (due time, location) order, as peek and pop take them interleaved with
// more appends.
func TestLoadedBucketFiringOrder(t *testing.T) {
	lb := newLBucket(&bfile{}, 0)
	rng := rand.New(rand.NewPCG(3, 9))
	loc := int64(0)
	next := func(due int64) Entry {
		loc++
		return Entry{DeliverMS: due, Location: loc, Origin: loc, Size: 100}
	}
	for range 300 {
		lb.addInitial(next(rng.Int64N(1000)), loc, false)
	}
	lb.sortInitial()
	due := int64(0)
	added := 300
	var prev *went
	popped := 0
	seen := map[int64]bool{}
	sources := map[source]int{}
	for step := 0; step < 5000 || popped < added; step++ {
		if step < 5000 && rng.IntN(3) > 0 {
			if rng.IntN(10) == 0 {
				lb.addLate(next(due-rng.Int64N(50)), loc, false) // out of order: the heap
			} else {
				due += rng.Int64N(3)
				lb.addLate(next(due), loc, false)
			}
			added++
			continue
		}
		i, from, ok := lb.peek()
		if !ok {
			continue
		}
		lb.pop(from)
		sources[from]++
		w := lb.ents.at(i)
		for k := range int32(lb.ents.len()) {
			if o := lb.ents.at(k); o.state == stPending && o != w && o.before(w) {
				t.Fatalf("fired (%d, %d) before the pending (%d, %d)", w.deliverMS, w.loc, o.deliverMS, o.loc)
			}
		}
		w.state = stDone
		if seen[w.loc] {
			t.Fatalf("entry %d fired twice", w.loc)
		}
		seen[w.loc] = true
		popped++
	}
	if popped != added {
		t.Fatalf("fired %d of %d", popped, added)
	}
	if sources[fromOrder] == 0 || sources[fromRun] == 0 || sources[fromLate] == 0 {
		t.Fatalf("sources %v: the test should take from all three", sources)
	}
	// Without appends in between, the rest comes out in order.
	for range 500 {
		due += rng.Int64N(3)
		lb.addLate(next(due-rng.Int64N(5)), loc, false)
	}
	for {
		i, from, ok := lb.peek()
		if !ok {
			break
		}
		lb.pop(from)
		w := lb.ents.at(i)
		w.state = stDone
		if prev != nil && w.before(prev) {
			t.Fatalf("fired (%d, %d) after (%d, %d)", w.deliverMS, w.loc, prev.deliverMS, prev.loc)
		}
		prev = w
	}
}
