package consumequeue

import (
	"fmt"
	"testing"

	"github.com/bolide-mq/bolide/internal/testutil"
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

// BenchmarkFlushOneUnitEach puts one unit into each of 4 000 queues and
// flushes them all, as a checkpoint does when many queues are written now
// and then: with more queues than descriptors kept, each write opens its
// file and closes it again. One op is one queue's unit written.
func BenchmarkFlushOneUnitEach(b *testing.B) {
	const queues = 4000
	s, err := Open(b.TempDir(), DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	qs := make([]*Queue, 0, queues)
	for t := range queues / 8 {
		for id := range int32(8) {
			q, err := s.Queue(fmt.Sprintf("topic-%05d", t), id)
			if err != nil {
				b.Fatal(err)
			}
			qs = append(qs, q)
		}
	}
	off, phy := int64(0), int64(0)
	round := func() {
		for _, q := range qs {
			if err := q.Put(off, Unit{Offset: phy, Size: 1024}); err != nil {
				b.Fatal(err)
			}
			phy += 1024
		}
		off++
		if err := s.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	round() // the files are made here, not timed
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testutil.ProcessCPU(b)
	for n := 0; n < b.N; n += queues {
		round()
	}
	b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkFlushBelowStagedQueues is a periodic checkpoint in the steady
// state of many lightly written queues: 10 000 topics × 8 queues, each
// with a few units staged and journaled, of which an eighth got a new unit
// since the last checkpoint. One op is one FlushBelow; the puts between
// them are not timed.
func BenchmarkFlushBelowStagedQueues(b *testing.B) {
	s, err := Open(b.TempDir(), DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var qs []*Queue
	for t := range 10_000 {
		for id := range int32(8) {
			q, err := s.Queue(fmt.Sprintf("topic-%05d", t), id)
			if err != nil {
				b.Fatal(err)
			}
			qs = append(qs, q)
		}
	}
	phy := int64(0)
	put := func(q *Queue) {
		if err := q.Put(q.MaxOffset(), Unit{Offset: phy, Size: 1024}); err != nil {
			b.Fatal(err)
		}
		phy += 1024
	}
	for i, q := range qs {
		put(q)
		if i%1000 == 999 || i == len(qs)-1 {
			// Each file made is open until a flush: every file made, and
			// at the end the journal started.
			if err := s.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, q := range qs {
		put(q)
	}
	if _, err := s.FlushBelow(0); err != nil {
		b.Fatal(err)
	}
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for range len(qs) / 8 {
			put(qs[next%len(qs)])
			next++
		}
		b.StartTimer()
		if _, err := s.FlushBelow(0); err != nil {
			b.Fatal(err)
		}
	}
}
