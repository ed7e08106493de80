package dedup

import (
	"math/rand/v2"
	"testing"
)

// TestTableAgainstMap runs random inserts, updates, deletes and lookups on
// a table and on a Go map, over a key space small enough for clusters,
// collisions of home slots and keys 0 and zeroKey, and checks that both
// always agree.
func TestTableAgainstMap(t *testing.T) {
	for _, space := range []int{8, 300, 5000, 100000} {
		rng := rand.New(rand.NewPCG(uint64(space), 7))
		var tb table
		want := map[Key]int64{}
		key := func() Key {
			switch r := rng.IntN(space + 2); r {
			case space:
				return 0
			case space + 1:
				return zeroKey - 1
			default:
				// Keys that share low or high bits land in few homes.
				return Key(uint64(r)<<40 | uint64(r%7))
			}
		}
		for step := range 200000 {
			k := key()
			switch op := rng.IntN(10); {
			case op < 5:
				off := int64(step)
				_, had := want[k]
				if existed := tb.put(k, off); existed != had {
					t.Fatalf("space %d step %d: put(%#x) existed=%v, want %v", space, step, k, existed, had)
				}
				want[k] = off
			case op < 8:
				tb.del(k)
				delete(want, k)
			default:
				got, ok := tb.get(k)
				w, had := want[k]
				if ok != had || got != w {
					t.Fatalf("space %d step %d: get(%#x) = %d, %v; want %d, %v", space, step, k, got, ok, w, had)
				}
			}
			if tb.len() != len(want) {
				t.Fatalf("space %d step %d: %d entries, want %d", space, step, tb.len(), len(want))
			}
		}
		for k, w := range want {
			if got, ok := tb.get(k); !ok || got != w {
				t.Fatalf("space %d: at the end get(%#x) = %d, %v; want %d", space, k, got, ok, w)
			}
		}
		// 0 and its stand-in are one slot identity, as any two keys
		// whose hashes collide: never both present.
		if _, ok0 := want[0]; ok0 {
			if _, okz := want[zeroKey]; okz {
				t.Fatalf("space %d: keys 0 and zeroKey both held", space)
			}
		}
	}
}

// TestTableEmptiesAndGrows deletes everything it inserted, in another
// order, across several growths.
func TestTableEmptiesAndGrows(t *testing.T) {
	var tb table
	const n = 50000
	for i := range n {
		tb.put(KeyOf("t", itoa(i)), int64(i))
	}
	if tb.len() != n || len(tb.slots) < n*4/3 {
		t.Fatalf("%d entries in %d slots", tb.len(), len(tb.slots))
	}
	for i := n - 1; i >= 0; i -= 2 {
		tb.del(KeyOf("t", itoa(i)))
	}
	for i := range n {
		off, ok := tb.get(KeyOf("t", itoa(i)))
		if ok != (i%2 == 0) || (ok && off != int64(i)) {
			t.Fatalf("id %d: %d, %v", i, off, ok)
		}
	}
	for i := 0; i < n; i += 2 {
		tb.del(KeyOf("t", itoa(i)))
	}
	if tb.len() != 0 {
		t.Fatalf("%d entries left", tb.len())
	}
	for i, s := range tb.slots {
		if s != (tslot{}) {
			t.Fatalf("slot %d not empty: %+v", i, s)
		}
	}
}
