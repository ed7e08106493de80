package delay

import (
	"math/rand/v2"
	"testing"
)

// TestOriginIndexAgreesWithAMap puts and gets origins mostly in increasing
// order, with some older ones, repeats and replacements, as a bucket's
// entries come, and checks every answer against a plain map.
func TestOriginIndexAgreesWithAMap(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		x := newOriginIndex(0)
		want := map[int64]int32{}
		next := int64(r.IntN(100))
		for i := range int32(3000) {
			var o int64
			switch k := r.IntN(10); {
			case k < 6: // the next origin, in order
				next += 1 + int64(r.IntN(5))
				o = next
			case k < 8: // an older origin: a known one or one never seen
				o = int64(r.IntN(int(next) + 1))
			default: // one far ahead, which later in-order ones pass
				o = next + int64(r.IntN(50))
			}
			if g, ok := x.get(o); ok != (want[o] != 0) || (ok && g != want[o]-1) {
				t.Fatalf("seed %d: get(%d) = %d, %v before put %d; want %d, %v", seed, o, g, ok, i, want[o]-1, want[o] != 0)
			}
			x.put(o, i)
			want[o] = i + 1 // 0: absent
			probe := int64(r.IntN(int(next) + 60))
			if g, ok := x.get(probe); ok != (want[probe] != 0) || (ok && g != want[probe]-1) {
				t.Fatalf("seed %d: get(%d) = %d, %v; want %d, %v", seed, probe, g, ok, want[probe]-1, want[probe] != 0)
			}
		}
		for o, w := range want {
			if g, ok := x.get(o); !ok || g != w-1 {
				t.Fatalf("seed %d: at the end get(%d) = %d, %v; want %d", seed, o, g, ok, w-1)
			}
		}
		if len(x.run)+len(x.rest) < len(want) {
			t.Fatalf("seed %d: %d + %d entries for %d origins", seed, len(x.run), len(x.rest), len(want))
		}
	}
}
