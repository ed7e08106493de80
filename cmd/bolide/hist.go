package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram is a log-linear latency histogram (in the manner of HDR
// histograms): exact below histSub microseconds, then histHalf buckets per
// power of two, so any value is within 0.4% of its bucket's midpoint. It
// takes constant memory however long a benchmark runs.
type histogram struct {
	counts   []uint64
	n        uint64
	min, max int64 // microseconds
	sum      float64
}

const (
	histSubBits = 8
	histSub     = 1 << histSubBits // 256
	histHalf    = histSub / 2
	// 64-bit values need at most 64-histSubBits shifts.
	histBuckets = histSub + (64-histSubBits)*histHalf
)

func newHistogram() *histogram {
	return &histogram{counts: make([]uint64, histBuckets), min: math.MaxInt64}
}

func bucketIndex(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - histSubBits
	return histSub + (shift-1)*histHalf + int(v>>shift) - histHalf
}

// bucketValue is the midpoint of bucket i.
func bucketValue(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	j := i - histSub
	shift := j/histHalf + 1
	m := int64(j%histHalf + histHalf)
	return m<<shift + (int64(1)<<shift)/2
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	us := max(d.Microseconds(), 0)
	h.counts[bucketIndex(us)]++
	h.n++
	h.sum += float64(us)
	h.min = min(h.min, us)
	h.max = max(h.max, us)
}

// merge adds o's values to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// quantile returns the value below which a fraction q of the values lie.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := min(max(bucketValue(i), h.min), h.max)
			return time.Duration(v) * time.Microsecond
		}
	}
	return time.Duration(h.max) * time.Microsecond
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum/float64(h.n)) * time.Microsecond
}

func (h *histogram) minimum() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.min) * time.Microsecond
}

// latencyJSON is a latency summary in milliseconds.
type latencyJSON struct {
	Count uint64  `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func (h *histogram) summary() latencyJSON {
	return latencyJSON{Count: h.n, Min: ms(h.minimum()), Mean: ms(h.mean()), P50: ms(h.quantile(0.5)),
		P90: ms(h.quantile(0.9)), P99: ms(h.quantile(0.99)), P999: ms(h.quantile(0.999)),
		Max: ms(time.Duration(max(h.max, 0)) * time.Microsecond)}
}
