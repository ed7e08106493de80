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
