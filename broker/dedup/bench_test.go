package dedup

import (
	"context"
	"testing"
	"time"
)

// BenchmarkWindowNewIDs is the window's cost per send of a message with a
// new unique id (a miss, a reservation, a commit) in a full window of a
// million entries, where each commit also drops the oldest entry: the
// steady state of a busy broker.
func BenchmarkWindowNewIDs(b *testing.B) {
	const capacity = 1 << 20
	w := New(capacity)
	keys := make([]Key, 2*capacity)
	for i := range keys {
		keys[i] = KeyOf("bench", "id-"+itoa(i))
	}
	for _, k := range keys[:capacity] {
		_, _, _, res, _ := w.Lookup(context.Background(), k)
		res.Commit(1, time.Hour)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := keys[capacity+i%capacity]
		_, found, _, res, err := w.Lookup(context.Background(), k)
		if err != nil || found {
			b.Fatalf("found=%v err=%v", found, err)
		}
		res.Commit(int64(i), time.Hour)
		if i%capacity == capacity-1 {
			b.StopTimer()
			w.Reset(time.Time{})
			for _, k := range keys[:capacity] {
				_, _, _, res, _ := w.Lookup(context.Background(), k)
				res.Commit(1, time.Hour)
			}
			b.StartTimer()
		}
	}
}

// BenchmarkWindowNewIDsBatch64 is BenchmarkWindowNewIDs for the messages
// of batched sends, 64 a send, as the broker looks them up (LookupAll)
// and records them (CommitAll); ns/op is per message.
func BenchmarkWindowNewIDsBatch64(b *testing.B) {
	const capacity, batch = 1 << 20, 64
	w := New(capacity)
	keys := make([]Key, 2*capacity)
	for i := range keys {
		keys[i] = KeyOf("bench", "id-"+itoa(i))
	}
	fill := func() {
		for _, k := range keys[:capacity] {
			_, _, _, res, _ := w.Lookup(context.Background(), k)
			res.Commit(1, time.Hour)
		}
	}
	fill()
	var found []Found
	rs := make([]*Reservation, batch)
	offsets := make([]int64, batch)
	b.ReportAllocs()
	b.ResetTimer()
	next := 0
	for done := 0; done < b.N; done += batch {
		if next+batch > capacity {
			b.StopTimer()
			w.Reset(time.Time{})
			fill()
			next = 0
			b.StartTimer()
		}
		found = w.LookupAll(keys[capacity+next:capacity+next+batch], found)
		for i, f := range found {
			if f.Found || f.Busy {
				b.Fatalf("key %d: %+v", next+i, f)
			}
			rs[i], offsets[i] = f.Res, int64(next+i)
		}
		w.CommitAll(rs, offsets, time.Hour)
		next += batch
	}
}
