package delay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// checkDeliveries asserts every id in want was delivered exactly once (at
// most maxDup extra copies in total), none early, in due order when ordered.
func checkDeliveries(t *testing.T, ds []delivery, want map[int]int64, maxDup int, ordered bool) {
	t.Helper()
	seen := make(map[int]int)
	dups := 0
	var last int64 = math.MinInt64
	for i, d := range ds {
		due, ok := want[d.id]
		if !ok {
			t.Fatalf("delivery %d: id %d was not expected (cancelled or never sent)", i, d.id)
		}
		if d.due != due {
			t.Fatalf("id %d delivered with due %d, sent with %d", d.id, d.due, due)
		}
		if d.at < d.due {
			t.Fatalf("id %d delivered %d ms early", d.id, d.due-d.at)
		}
		if seen[d.id]++; seen[d.id] > 1 {
			dups++
		}
		if ordered && seen[d.id] == 1 {
			if d.due < last {
				t.Fatalf("delivery %d: id %d due %d after one due %d", i, d.id, d.due, last)
			}
			last = d.due
		}
	}
	for id := range want {
		if seen[id] == 0 {
			t.Fatalf("id %d (due %v) never delivered (%d of %d delivered)", id, time.UnixMilli(want[id]).UTC(), len(seen), len(want))
		}
	}
	if dups > maxDup {
		t.Fatalf("%d duplicate deliveries, at most %d allowed", dups, maxDup)
	}
}

// TestHorizonVirtualClock: messages with delays log-uniform from 1 s to 400
// days, all sent at once, each fire exactly once, in due order, never early,
// while a virtual clock runs through the 400 days; then every bucket is
// reclaimed. BOLIDE_DELAY_BENCH=1 runs the full 1 000 000.
func TestHorizonVirtualClock(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	if os.Getenv("BOLIDE_DELAY_BENCH") != "" {
		n = 1_000_000
	}
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	dir := fastTempDir(t)
	e := testEngine(t, dir, h)
	defer e.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	want := make(map[int]int64, n)
	maxDelay := 400 * 24 * time.Hour
	for i := 0; i < n; i++ {
		d := time.Duration(math.Exp(rng.Float64()*math.Log(float64(maxDelay/time.Millisecond)/1000)) * 1000 * float64(time.Millisecond))
		due := t0.Add(d).UnixMilli()
		want[i] = due
		h.send(i, due)
	}
	settle(t, e)
	st := e.Status()
	t.Logf("%d pending: %d bucket files, %d bytes of index, %d loaded entries", n, st.Buckets, st.IndexBytes, st.LoadedEntries)
	start := time.Now()
	steps := 0
	end := t0.Add(maxDelay + time.Minute)
	for vc.Now().Before(end) {
		elapsed := vc.Now().Sub(t0)
		step := max(time.Second, elapsed/256)
		vc.Advance(step)
		settle(t, e)
		steps++
	}
	ds := h.deliveries()
	t.Logf("%d messages over 400 virtual days in %d steps, %v wall time", len(ds), steps, time.Since(start).Round(time.Millisecond))
	checkDeliveries(t, ds, want, 0, true)
	testutil.WaitFor(t, 10*time.Second, "every bucket to be reclaimed", func() error {
		if st := e.Status(); st.Buckets != 0 || st.LoadedBuckets != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if st := e.Status(); st.Delivered != int64(n) || st.Lost != 0 {
		t.Fatalf("status: %+v", st)
	}
}

// TestLateArrivals: messages indexed after their bucket was loaded, or
// after they were due, are delivered (at once if overdue), never early.
func TestLateArrivals(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	e := testEngine(t, t.TempDir(), h)
	defer e.Close()
	want := map[int]int64{}
	now := t0.UnixMilli()
	for i, d := range []int64{-5000, 0, 1, 500, 9_999, 10_000, 25_000} {
		want[i] = now + d
		h.send(i, now+d)
	}
	settle(t, e)
	vc.Advance(10 * time.Second)
	settle(t, e)
	// More, into buckets already loaded and into the past.
	now = vc.Now().UnixMilli()
	for i, d := range []int64{-1, 3, 7_000, 12_000} {
		want[100+i] = now + d
		h.send(100+i, now+d)
	}
	for i := 0; i < 30; i++ {
		vc.Advance(time.Second)
		settle(t, e)
	}
	checkDeliveries(t, h.deliveries(), want, 0, false)
}

// TestCrashRecovery: an engine dies (kill -9: nothing synced beyond what
// was written, no final checkpoint) at random points while delivering;
// after each restart nothing is lost, nothing early, and at most one batch
// per crash is delivered twice.
func TestCrashRecovery(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	dir := t.TempDir()
	const batch = 16
	opts := func(o *Options) { o.BatchSize = batch }
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[int]int64{}
	id := 0
	crashes := 0
	for cycle := 0; cycle < 20; cycle++ {
		e := testEngine(t, dir, h, opts)
		now := vc.Now().UnixMilli()
		for i := 0; i < 200; i++ {
			due := now + rng.Int64N(60_000) - 1_000
			if rng.IntN(10) == 0 {
				due = now + rng.Int64N(3*24*3600_000) // far: coarse buckets
			}
			want[id] = due
			h.send(id, due)
			id++
		}
		for s := 0; s < 5+rng.IntN(20); s++ {
			vc.Advance(time.Duration(rng.Int64N(3000)) * time.Millisecond)
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
		if rng.IntN(2) == 0 {
			// Die right after a batch was stored, before it is recorded.
			h.mu.Lock()
			h.storedThenFail = true
			h.mu.Unlock()
			vc.Advance(time.Second)
			time.Sleep(time.Millisecond)
		}
		e.crash()
		h.mu.Lock()
		h.storedThenFail = false
		h.mu.Unlock()
		crashes++
	}
	e := testEngine(t, dir, h, opts)
	defer e.Close()
	for vc.Now().Before(t0.Add(4 * 24 * time.Hour)) {
		vc.Advance(10 * time.Minute)
		settle(t, e)
	}
	checkDeliveries(t, h.deliveries(), want, crashes*batch, false)
	t.Logf("%d messages, %d crashes, %d deliveries", len(want), crashes, len(h.deliveries()))
}

// TestCrashBetweenStoreAndRecord: a crash after a batch was stored but
// before the fired log records it delivers that batch again, and only it.
func TestCrashBetweenStoreAndRecord(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	dir := t.TempDir()
	const batch = 10
	e := testEngine(t, dir, h, func(o *Options) { o.BatchSize = batch })
	want := map[int]int64{}
	for i := 0; i < 25; i++ {
		want[i] = t0.UnixMilli() + 2000 + int64(i)
		h.send(i, want[i])
	}
	want[99] = t0.UnixMilli() + 1000
	h.send(99, want[99])
	vc.Advance(1500 * time.Millisecond)
	settle(t, e) // 99 delivered and recorded
	h.mu.Lock()
	h.storedThenFail = true
	h.mu.Unlock()
	vc.Advance(time.Second)
	testutil.WaitFor(t, 5*time.Second, "a stored, unrecorded batch", func() error {
		if n := h.deliveredCount(); n <= 1 {
			return fmt.Errorf("%d delivered", n)
		}
		return nil
	})
	e.crash()
	h.mu.Lock()
	h.storedThenFail = false
	h.mu.Unlock()
	e = testEngine(t, dir, h, func(o *Options) { o.BatchSize = batch })
	defer e.Close()
	vc.Advance(time.Second)
	settle(t, e)
	ds := h.deliveries()
	checkDeliveries(t, ds, want, batch, false)
	if len(ds) < len(want)+1 {
		t.Fatalf("%d deliveries: the unrecorded batch was not delivered again", len(ds))
	}
	t.Logf("%d messages, %d deliveries (one batch of %d repeated)", len(want), len(ds), batch)
}

// TestCancel: a cancelled message is never delivered, also after a crash
// and restart; cancelling a delivered one says so.
func TestCancel(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	dir := t.TempDir()
	e := testEngine(t, dir, h)
	now := t0.UnixMilli()
	want := map[int]int64{}
	locs := map[int]int64{}
	dues := []int64{500, 5_000, 20_000, 3600_000, 30 * 24 * 3600_000}
	for i, d := range dues {
		locs[i] = h.send(i, now+d)
		locs[i+10] = h.send(i+10, now+d)
		want[i+10] = now + d
	}
	settle(t, e)
	for i, d := range dues {
		n, err := e.Cancel([]CancelTarget{{Origin: locs[i], Location: locs[i], DeliverMS: now + d}})
		if err != nil || n != 1 {
			t.Fatalf("cancel %d: %d %v", i, n, err)
		}
	}
	// Cancelling again is fine.
	if n, err := e.Cancel([]CancelTarget{{Origin: locs[0], Location: locs[0], DeliverMS: now + dues[0]}}); err != nil || n != 1 {
		t.Fatalf("cancel again: %d %v", n, err)
	}
	vc.Advance(time.Second)
	settle(t, e)
	// A delivered message cannot be cancelled.
	if _, err := e.Cancel([]CancelTarget{{Origin: locs[10], Location: locs[10], DeliverMS: now + dues[0]}}); err != ErrAlreadyDelivered {
		t.Fatalf("cancel of a delivered message: %v", err)
	}
	e.crash()
	e = testEngine(t, dir, h)
	defer e.Close()
	for vc.Now().Before(t0.Add(31 * 24 * time.Hour)) {
		vc.Advance(time.Hour)
		settle(t, e)
	}
	checkDeliveries(t, h.deliveries(), want, 0, true)
	// Delivered long ago and reclaimed: still known as delivered.
	if _, err := e.Cancel([]CancelTarget{{Origin: locs[11], Location: locs[11], DeliverMS: now + dues[1]}}); err != ErrAlreadyDelivered {
		t.Fatalf("cancel of a reclaimed message: %v", err)
	}
}

// TestCopiesFolded: copies of a message (split repeated after a crash,
// replayed index) in level-0 and coarse buckets are delivered once.
func TestCopiesFolded(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	dir := t.TempDir()
	now := t0.UnixMilli()
	want := map[int]int64{}
	var l0, l1 []byte
	for i := 0; i < 50; i++ {
		due := now + 5*60_000 + int64(i)*1000
		loc := h.send(i, due)
		want[i] = due
		en := Entry{DeliverMS: due, Location: loc, Origin: loc, Size: 200}
		b := make([]byte, EntrySize)
		en.Encode(b)
		k := bucketKey{0, floorTo(due, granularity[0])}
		// The entry in its level-0 bucket, twice, and in a coarse bucket.
		if err := appendFile(filepath.Join(dir, k.name()+idxSuffix), append(b, b...)); err != nil {
			t.Fatal(err)
		}
		l0 = append(l0, b...)
		l1 = append(l1, b...)
	}
	_ = l0
	k1 := bucketKey{1, floorTo(now+5*60_000, granularity[1])}
	if err := os.WriteFile(filepath.Join(dir, k1.name()+idxSuffix), l1, 0o644); err != nil {
		t.Fatal(err)
	}
	// The index checkpoint says the queue is indexed already.
	if err := os.WriteFile(filepath.Join(dir, checkpointName), []byte(`{"version":1,"queueOffset":50,"location":`+strconv.FormatInt(h.nextLoc, 10)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := testEngine(t, dir, h)
	defer e.Close()
	for i := 0; i < 20; i++ {
		vc.Advance(time.Minute)
		settle(t, e)
	}
	checkDeliveries(t, h.deliveries(), want, 0, true)
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestTornFiles: a torn last entry of a bucket and a torn cancel record
// are dropped; the rest is delivered.
func TestTornFiles(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	dir := t.TempDir()
	e := testEngine(t, dir, h)
	now := t0.UnixMilli()
	want := map[int]int64{}
	for i := 0; i < 10; i++ {
		want[i] = now + 60_000 + int64(i)
		h.send(i, want[i])
	}
	settle(t, e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	k := bucketKey{0, floorTo(now+60_000, granularity[0])}
	if err := appendFile(filepath.Join(dir, k.name()+idxSuffix), []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := appendFile(filepath.Join(dir, cancelLogName), []byte{9, 9, 9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	e = testEngine(t, dir, h)
	defer e.Close()
	vc.Advance(2 * time.Minute)
	settle(t, e)
	h.send(10, vc.Now().UnixMilli()+1000)
	want[10] = vc.Now().UnixMilli() + 1000
	vc.Advance(2 * time.Second)
	settle(t, e)
	ds := h.deliveries()
	sort.Slice(ds, func(i, j int) bool { return ds[i].id < ds[j].id })
	checkDeliveries(t, ds, want, 0, false)
}

// TestDeliveryRetried: a failed store is retried until it succeeds; the
// batch is delivered once.
func TestDeliveryRetried(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	h.failNext = 3
	e := testEngine(t, t.TempDir(), h)
	defer e.Close()
	want := map[int]int64{0: t0.UnixMilli() + 10, 1: t0.UnixMilli() + 20}
	h.send(0, want[0])
	h.send(1, want[1])
	vc.Advance(time.Second)
	testutil.WaitFor(t, 10*time.Second, "delivery after failures", func() error {
		if n := h.deliveredCount(); n != 2 {
			return fmt.Errorf("%d delivered", n)
		}
		return nil
	})
	checkDeliveries(t, h.deliveries(), want, 0, true)
}
