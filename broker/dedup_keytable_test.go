package broker

import (
	"testing"

	"github.com/bolide-mq/bolide/broker/dedup"
)

// TestKeyTable: each key of a batch is recorded once and found again at the
// message that recorded it first, also when keys share their low bits (the
// slot they probe first) and the table wraps around; reset forgets them.
func TestKeyTable(t *testing.T) {
	var kt keyTable
	// Keys whose low bits are equal probe the same slot first; the last
	// ones probe the last slot, taken, and wrap around to the first.
	keys := []dedup.Key{1 << 40, 2 << 40, 3 << 40, 15, 15 | 1<<50, 31, 1 << 40, 15 | 1<<50, 3 << 40, 31 | 1<<45, 31 | 1<<45}
	want := []int{-1, -1, -1, -1, -1, -1, 0, 4, 2, -1, 9}
	entries := make([]dedupEntry, len(keys))
	for round := range 2 {
		kt.reset(len(keys))
		if len(kt.slots) < 2*len(keys) {
			t.Fatalf("%d slots for %d keys", len(kt.slots), len(keys))
		}
		for i, k := range keys {
			entries[i].key = k
			if got := kt.firstOrAdd(k, i, entries); got != want[i] {
				t.Errorf("round %d, key %d (%#x): first %d, want %d", round, i, uint64(k), got, want[i])
			}
		}
	}
}
