package indexfile

import (
	"fmt"
	"math"
	"testing"
)

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = BuildKey("TopicTest", fmt.Sprintf("order-%08d", i))
	}
	return keys
}

// BenchmarkPut appends entries with distinct keys to a 1M-slot store (84 MB
// files of 4M entries), including the key hash; roll-overs (msync of the full
// file, then fallocate of the next) are part of the cost.
func BenchmarkPut(b *testing.B) {
	opts := Options{SlotCount: 1 << 20, MaxEntries: 4 << 20}
	s, err := Open(b.TempDir(), opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := benchKeys(1 << 20)
	if err := s.Put(keys[0], 0, t0); err != nil { // create the first file
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 1
	for b.Loop() {
		if err := s.Put(keys[i&(len(keys)-1)], int64(i)*200, t0+int64(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkQuery looks up keys in one file holding 1M entries in 1M slots,
// over the whole time range with RocketMQ's default max of 32 results.
func BenchmarkQuery(b *testing.B) {
	const entries = 1_000_000
	for _, perKey := range []int{1, 32} {
		b.Run(fmt.Sprintf("entries-per-key=%d", perKey), func(b *testing.B) {
			opts := Options{SlotCount: 1_000_000, MaxEntries: entries + 1}
			s, err := Open(b.TempDir(), opts, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			keys := benchKeys(entries / perKey)
			for i := 0; i < entries; i++ {
				if err := s.Put(keys[i%len(keys)], int64(i)*200, t0+int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := keys[(i*7919)%len(keys)]
				got, err := s.Query(k, math.MinInt64, math.MaxInt64, 32)
				if err != nil || len(got) != perKey {
					b.Fatalf("Query(%q) = %d results, %v", k, len(got), err)
				}
				i++
			}
		})
	}
}

func BenchmarkKeyHash(b *testing.B) {
	key := BuildKey("TopicTest", "7F0000010A2C18B4AAC26E31E5A40000")
	for b.Loop() {
		_ = KeyHash(key)
	}
}
