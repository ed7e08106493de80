package consumequeue

import (
	"fmt"
	"testing"
)

func reportUnits(b *testing.B, units int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(units)/s, "units/s")
	}
}

// BenchmarkPut appends units to one queue with the default file size,
// including file creation every 300 000 units (no flush).
func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir(), DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q, err := s.Queue("bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := q.Put(int64(i), unitFor(int64(i))); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportUnits(b, b.N)
}

// BenchmarkReadRange reads 32 units at a time, as a pull does, from a queue of
// 1 000 000 units (4 files), into a reused slice.
func BenchmarkReadRange(b *testing.B) {
	const total, batch = 1_000_000, 32
	s, err := Open(b.TempDir(), DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q, err := s.Queue("bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := int64(0); i < total; i++ {
		if err := q.Put(i, unitFor(i)); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]Unit, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	var from int64
	for i := 0; i < b.N; i++ {
		dst, err = q.Read(from, batch, dst[:0])
		if err != nil || len(dst) == 0 {
			b.Fatalf("Read(%d) = %d units, %v", from, len(dst), err)
		}
		from += int64(len(dst))
		if from >= total {
			from = 0
		}
	}
	b.StopTimer()
	reportUnits(b, b.N*batch)
}

// BenchmarkFlushBelowManyQueues is a periodic checkpoint's pass over a store
// of 10 000 topics × 8 queues with nothing to write (queues made in memory,
// no files): the snapshot of the queues and the look at each one, which
// every checkpoint pays whatever it writes.
func BenchmarkFlushBelowManyQueues(b *testing.B) {
	s, err := Open(b.TempDir(), DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for t := range 10_000 {
		for id := range int32(8) {
			if _, err := s.Queue(fmt.Sprintf("topic-%05d", t), id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.FlushBelow(0); err != nil {
			b.Fatal(err)
		}
	}
}
