package dedup

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestWindow(capacity int, maxWindow time.Duration) (*Window, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	w := New(capacity)
	w.now = c.now
	w.Reset(c.now().Add(maxWindow))
	return w, c
}

func lookup(t *testing.T, w *Window, k Key) (int64, bool, bool, *Reservation) {
	t.Helper()
	off, found, final, res, err := w.Lookup(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return off, found, final, res
}

func TestWindowRemembersUntilExpiry(t *testing.T) {
	w, c := newTestWindow(16, time.Minute)
	k := KeyOf("orders", "ID-1")
	if _, found, final, res := lookup(t, w, k); found || final || res == nil {
		t.Fatalf("fresh window: found=%v final=%v res=%v; want a non-final miss with a reservation", found, final, res)
	} else {
		res.Commit(4096, 2*time.Minute)
	}
	if off, found, _, res := lookup(t, w, k); !found || off != 4096 || res != nil {
		t.Fatalf("after commit: off=%d found=%v res=%v", off, found, res)
	}
	if KeyOf("other", "ID-1") == k || KeyOf("orders", "ID-2") == k {
		t.Fatal("keys of another topic or id collide")
	}
	c.add(2*time.Minute + time.Second)
	_, found, final, res := lookup(t, w, k)
	if found {
		t.Fatal("entry outlived its window")
	}
	if !final {
		t.Fatal("a window that watched for its whole length should answer misses finally")
	}
	res.Abort()
	if st := w.Stats(); st.Entries != 0 || !st.Complete {
		t.Fatalf("stats after expiry: %+v", st)
	}
}

func TestWindowReservationSerialisesOneID(t *testing.T) {
	w, _ := newTestWindow(16, 0)
	k := KeyOf("t", "same")
	_, _, _, first := lookup(t, w, k)
	type answer struct {
		off   int64
		found bool
		res   *Reservation
	}
	got := make(chan answer, 1)
	go func() {
		off, found, _, res, err := w.Lookup(context.Background(), k)
		if err != nil {
			t.Error(err)
		}
		got <- answer{off, found, res}
	}()
	select {
	case a := <-got:
		t.Fatalf("second lookup answered while the first send was in flight: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
	first.Commit(77, time.Minute)
	if a := <-got; !a.found || a.off != 77 || a.res != nil {
		t.Fatalf("second lookup after the first stored: %+v", a)
	}

	// A failed first send lets the waiter store the message itself.
	k2 := KeyOf("t", "failed")
	_, _, _, first = lookup(t, w, k2)
	go func() {
		off, found, _, res, err := w.Lookup(context.Background(), k2)
		if err != nil {
			t.Error(err)
		}
		got <- answer{off, found, res}
	}()
	time.Sleep(10 * time.Millisecond)
	first.Abort()
	a := <-got
	if a.found || a.res == nil {
		t.Fatalf("after an aborted send the waiter should get its own reservation: %+v", a)
	}
	a.res.Abort()

	// A waiter gives up with its context.
	_, _, _, first = lookup(t, w, k2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, _, err := w.Lookup(ctx, k2); err == nil {
		t.Fatal("a cancelled lookup waited or succeeded")
	}
	first.Abort()
}

func TestWindowCapacityDropsOldest(t *testing.T) {
	w, _ := newTestWindow(4, 0)
	for i := range 5 {
		_, _, final, res := lookup(t, w, Key(i))
		if !final {
			t.Fatalf("id %d: a complete window answered a miss as uncertain", i)
		}
		res.Commit(int64(i), time.Minute)
	}
	st := w.Stats()
	if st.Entries != 4 || st.Evicted != 1 || !st.Complete {
		t.Fatalf("after an early drop: %+v (want 4 entries, 1 evicted)", st)
	}
	if _, found, _, res := lookup(t, w, Key(0)); found {
		t.Fatal("the dropped id is still found")
	} else {
		res.Abort()
	}
	if _, found, _, _ := lookup(t, w, Key(1)); !found {
		t.Fatal("a kept id is not found")
	}
}

func TestWindowRemember(t *testing.T) {
	w, c := newTestWindow(8, time.Minute)
	k := KeyOf("t", "from-index")
	w.Remember(k, 123, c.now().Add(30*time.Second))
	if off, found, _, _ := lookup(t, w, k); !found || off != 123 {
		t.Fatalf("remembered copy: off=%d found=%v", off, found)
	}
	w.Remember(KeyOf("t", "stale"), 1, c.now().Add(-time.Second))
	if st := w.Stats(); st.Entries != 1 {
		t.Fatalf("an already expired copy was remembered: %+v", st)
	}
}

// TestWindowMemoryAtOneMillionIDs fills a window of one million entries
// with two million ids: it keeps one million, and its memory stays near
// the estimate the metrics report.
func TestWindowMemoryAtOneMillionIDs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates tens of megabytes; measured without the race detector")
	}
	const capacity = 1 << 20
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := New(capacity)
	for i := range 2 * capacity {
		k := KeyOf("bench", "id-"+itoa(i))
		_, found, _, res, err := w.Lookup(context.Background(), k)
		if err != nil || found {
			t.Fatalf("id %d: found=%v err=%v", i, found, err)
		}
		res.Commit(int64(i), time.Hour)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := w.Stats()
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d ids offered, %d kept, %d evicted early; heap %.1f MB, estimate %.1f MB (%.1f bytes an id)",
		2*capacity, st.Entries, st.Evicted, float64(used)/1e6, float64(st.Bytes)/1e6, float64(used)/float64(st.Entries))
	if st.Entries != capacity || st.Evicted != capacity {
		t.Fatalf("kept %d, evicted %d; want %d and %d", st.Entries, st.Evicted, capacity, capacity)
	}
	if limit := int64(capacity) * 80; used > limit {
		t.Fatalf("the window takes %d bytes for %d ids, more than %d", used, capacity, limit)
	}
	runtime.KeepAlive(w)
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// TestWindowLookupAllAndCommitAll: LookupAll answers each key as Lookup
// would, reports a key another send holds as Busy without waiting, and
// CommitAll records every reservation and releases the sends waiting for
// them.
func TestWindowLookupAllAndCommitAll(t *testing.T) {
	w, _ := newTestWindow(100, time.Minute)
	_, _, _, known := lookup(t, w, 1)
	known.Commit(10, time.Minute)
	_, _, _, held := lookup(t, w, 2) // another send holds key 2
	got := w.LookupAll([]Key{1, 2, 3, 4}, nil)
	if len(got) != 4 || !got[0].Found || got[0].Offset != 10 || !got[1].Busy ||
		got[2].Res == nil || got[3].Res == nil || got[2].Found || got[2].Final { // not final: the test window has just been reset
		t.Fatalf("LookupAll = %+v", got)
	}
	// A send waiting for key 3 is released by CommitAll with its offset.
	waited := make(chan int64, 1)
	go func() {
		off, found, _, _, err := w.Lookup(context.Background(), 3)
		if err != nil || !found {
			off = -1
		}
		waited <- off
	}()
	time.Sleep(20 * time.Millisecond) // let it wait (it passes either way)
	w.CommitAll([]*Reservation{got[2].Res, got[3].Res}, []int64{30, 40}, time.Minute)
	if off := <-waited; off != 30 {
		t.Fatalf("the waiter for key 3 got %d, want 30", off)
	}
	held.Abort()
	for k, want := range map[Key]int64{1: 10, 3: 30, 4: 40} {
		if off, found, _, _ := lookup(t, w, k); !found || off != want {
			t.Fatalf("key %d: %d, %v; want %d", k, off, found, want)
		}
	}
	if st := w.Stats(); st.Entries != 3 {
		t.Fatalf("%d entries, want 3", st.Entries)
	}
}
