package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverAndOrder(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<40 + 12345, math.MaxInt64} {
		i := bucketIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("bucketIndex(%d) = %d after %d (of %d)", v, i, prev, histBuckets)
		}
		prev = i
		mid := bucketValue(i)
		if v >= histSub {
			if rel := math.Abs(float64(mid-v)) / float64(v); rel > 0.008 {
				t.Errorf("value %d in bucket %d with midpoint %d: %.4f off", v, i, mid, rel)
			}
		} else if mid != v {
			t.Errorf("small value %d has midpoint %d", v, mid)
		}
	}
	if bucketIndex(-5) != 0 {
		t.Error("negative value")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := newHistogram()
	if h.quantile(0.5) != 0 || h.mean() != 0 || h.minimum() != 0 {
		t.Fatal("empty histogram")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var vals []int64
	for range 100000 {
		us := int64(rng.ExpFloat64() * 2000) // mean 2 ms
		vals = append(vals, us)
		h.record(time.Duration(us) * time.Microsecond)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.quantile(q).Microseconds()
		if d := math.Abs(float64(got - exact)); d > 1 && d/float64(exact) > 0.01 {
			t.Errorf("p%v = %dus, exact %dus", q*100, got, exact)
		}
	}
	if h.quantile(1).Microseconds() != vals[len(vals)-1] || h.minimum().Microseconds() != vals[0] {
		t.Error("min or max not exact")
	}

	// Merging two halves gives the same quantiles.
	a, b := newHistogram(), newHistogram()
	for i, v := range vals {
		if i%2 == 0 {
			a.record(time.Duration(v) * time.Microsecond)
		} else {
			b.record(time.Duration(v) * time.Microsecond)
		}
	}
	a.merge(b)
	for _, q := range []float64{0.5, 0.99} {
		if a.quantile(q) != h.quantile(q) || a.n != h.n {
			t.Errorf("merged p%v = %v, want %v", q*100, a.quantile(q), h.quantile(q))
		}
	}
	s := h.summary()
	if s.Count != 100000 || !(s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Errorf("summary %+v", s)
	}
}
