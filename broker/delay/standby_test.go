package delay

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// sendMarker stores a cancel marker for t (as the broker does after a
// cancel) and returns its location.
func (h *fakeHost) sendMarker(t CancelTarget) int64 {
	h.mu.Lock()
	loc := h.nextLoc
	h.nextLoc += 100
	h.units = append(h.units, Unit{QueueOffset: int64(len(h.units)), Location: loc, Size: 100, DeliverMS: t.DeliverMS, Cancel: &t})
	h.mu.Unlock()
	h.arrival.Notify()
	return loc
}

// replicated is a master's host and a slave's host holding the same timer
// queue at the same locations.
type replicated struct{ m, s *fakeHost }

func (r replicated) send(id int, due int64) int64 {
	loc := r.m.send(id, due)
	if l := r.s.send(id, due); l != loc {
		panic("hosts diverged")
	}
	return loc
}

func (r replicated) marker(t CancelTarget) {
	if r.m.sendMarker(t) != r.s.sendMarker(t) {
		panic("hosts diverged")
	}
}

// TestStandbyTakesOver: a standby engine over a replica of the master's
// timer queue delivers nothing; it takes the master's Progress and the
// master's cancel markers. Activated after the master stops, it delivers
// every message the master did not, none early, never the cancelled one,
// and again only what the master delivered after the Progress it took.
func TestStandbyTakesOver(t *testing.T) {
	vc := NewVirtualClock(t0)
	r := replicated{newFakeHost(vc), newFakeHost(vc)}
	master := testEngine(t, t.TempDir(), r.m)
	slaveDir := t.TempDir()
	slave := testEngine(t, slaveDir, r.s)
	slave.SetActive(false)
	defer slave.Close()
	if _, ok := slave.Progress(); ok {
		t.Fatal("a standby engine reports progress")
	}

	now := t0.UnixMilli()
	want := map[int]int64{}
	locs := map[int]int64{}
	for i := 0; i < 120; i++ {
		due := now + 500 + int64(i)*500 // 0.5 s .. 60 s
		want[i] = due
		locs[i] = r.send(i, due)
	}
	// The master delivers the first 20 s.
	for i := 0; i < 20; i++ {
		vc.Advance(time.Second)
		settle(t, master)
	}
	p, ok := master.Progress()
	if !ok {
		t.Fatal("the master reports no progress")
	}
	atProgress := r.m.deliveredCount()
	if p.DueBeforeMS > vc.Now().UnixMilli() || p.Location != locs[119] {
		t.Fatalf("progress %+v at %d, last location %d", p, vc.Now().UnixMilli(), locs[119])
	}
	if err := slave.Inherit(p); err != nil {
		t.Fatal(err)
	}
	// A cancel on the master, passed on as a marker.
	victim := 90
	target := CancelTarget{Origin: locs[victim], Location: locs[victim], DeliverMS: want[victim]}
	done, err := master.CancelEach([]CancelTarget{target})
	if err != nil || len(done) != 1 {
		t.Fatalf("cancel: %v %v", done, err)
	}
	r.marker(target)
	delete(want, victim)
	// The master delivers 3 s more that the slave never hears of.
	for i := 0; i < 3; i++ {
		vc.Advance(time.Second)
		settle(t, master)
	}
	afterProgress := r.m.deliveredCount() - atProgress
	if err := master.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the standby engine to skip what the master delivered", func() error {
		if st := slave.Status(); st.IndexedOffset != int64(len(r.s.units)) || st.Skipped < int64(atProgress)-1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if n := r.s.deliveredCount(); n != 0 {
		t.Fatalf("the standby engine delivered %d messages", n)
	}
	if st := slave.Status(); st.Cancelled != 1 || st.Active {
		t.Fatalf("standby status %+v", st)
	}

	// Promotion.
	slave.SetActive(true)
	for vc.Now().Before(t0.Add(70 * time.Second)) {
		vc.Advance(time.Second)
		settle(t, slave)
	}
	all := append(r.m.deliveries(), r.s.deliveries()...)
	checkDeliveries(t, all, want, afterProgress+1, false)
	checkDeliveries(t, r.s.deliveries(), onlyDelivered(want, r.s.deliveries()), 0, true)
	if r.s.early != 0 {
		t.Fatalf("%d deliveries early", r.s.early)
	}
	t.Logf("master delivered %d (%d after its last progress), the promoted engine %d; skipped %d",
		r.m.deliveredCount(), afterProgress, r.s.deliveredCount(), slave.Status().Skipped)

	// Restarted, it keeps its inherited progress and delivers new messages.
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	slave = testEngine(t, slaveDir, r.s)
	defer slave.Close()
	if got := slave.Inherited(); len(got) != 1 || got[0] != p {
		t.Fatalf("inherited after a restart: %+v, want %+v", got, p)
	}
	before := r.s.deliveredCount()
	due := vc.Now().UnixMilli() + 2000
	r.s.send(500, due)
	for i := 0; i < 3; i++ {
		vc.Advance(time.Second)
		settle(t, slave)
	}
	ds := r.s.deliveries()[before:]
	checkDeliveries(t, ds, map[int]int64{500: due}, 0, true)
}

// onlyDelivered restricts want to the ids delivered in ds.
func onlyDelivered(want map[int]int64, ds []delivery) map[int]int64 {
	out := make(map[int]int64)
	for _, d := range ds {
		out[d.id] = want[d.id]
	}
	return out
}

// TestStandDownGivesBatchBack: a batch that cannot be stored when the
// engine stands down goes back to the wheel; active again, the engine
// delivers it once.
func TestStandDownGivesBatchBack(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	h.failNext = 1 << 30
	e := testEngine(t, t.TempDir(), h)
	defer e.Close()
	want := map[int]int64{}
	for i := 0; i < 5; i++ {
		want[i] = t0.UnixMilli() + 100 + int64(i)
		h.send(i, want[i])
	}
	vc.Advance(time.Second)
	testutil.WaitFor(t, 5*time.Second, "a batch in flight", func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.failNext >= 1<<30 {
			return errors.New("no delivery attempted")
		}
		return nil
	})
	e.SetActive(false)
	testutil.WaitFor(t, 5*time.Second, "the batch back in the wheel", func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.inflight != 0 || len(e.flights) != 0 {
			return fmt.Errorf("%d in flight, %d flights", e.inflight, len(e.flights))
		}
		return nil
	})
	h.mu.Lock()
	h.failNext = 0
	h.mu.Unlock()
	vc.Advance(time.Second)
	time.Sleep(50 * time.Millisecond)
	if n := h.deliveredCount(); n != 0 {
		t.Fatalf("%d delivered while standing by", n)
	}
	e.SetActive(true)
	settle(t, e)
	checkDeliveries(t, h.deliveries(), want, 0, true)
}

// TestMergeProgress: the inherited statements stay an antichain of at most
// maxInherited.
func TestMergeProgress(t *testing.T) {
	var list []Progress
	add := func(p Progress, wantChanged bool) {
		t.Helper()
		var changed bool
		list, changed = mergeProgress(list, p)
		if changed != wantChanged {
			t.Fatalf("merge %+v: changed %v", p, changed)
		}
	}
	add(Progress{100, 1000}, true)
	add(Progress{50, 900}, false) // dominated
	add(Progress{200, 800}, true) // incomparable
	if len(list) != 2 {
		t.Fatalf("%+v", list)
	}
	add(Progress{300, 1000}, true) // dominates both
	if len(list) != 1 || list[0] != (Progress{300, 1000}) {
		t.Fatalf("%+v", list)
	}
	for i := 0; i < 20; i++ {
		add(Progress{int64(400 + i), int64(999 - i)}, true)
	}
	if len(list) != maxInherited || list[len(list)-1].Location != 419 {
		t.Fatalf("%d statements: %+v", len(list), list)
	}
	if !(Progress{10, 100}).covers(99, 10) || (Progress{10, 100}).covers(100, 10) || (Progress{10, 100}).covers(5, 11) {
		t.Fatal("covers")
	}
}

// gatedHost lets the engine read only the first limit units of the timer
// queue (an index lagging behind the replicated queue).
type gatedHost struct {
	*fakeHost
	gmu   sync.Mutex
	limit int64
}

func (g *gatedHost) ReadTimerQueue(from int64, max int) ([]Unit, int64, error) {
	g.gmu.Lock()
	limit := g.limit
	g.gmu.Unlock()
	if from >= limit {
		return nil, from, nil
	}
	return g.fakeHost.ReadTimerQueue(from, int(min(int64(max), limit-from)))
}

// TestActivationWaitsForIndex: an engine activated while its index lags
// the timer queue fires nothing until the index reaches the queue's end,
// so a cancel marker stored before the promotion is applied before the
// message it cancels is due to fire.
func TestActivationWaitsForIndex(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	g := &gatedHost{fakeHost: h, limit: 2}
	o := DefaultOptions(t.TempDir())
	o.Clock = vc
	o.CheckpointInterval = 50 * time.Millisecond
	e, err := Open(o, g, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.SetActive(false)
	e.Start()
	now := t0.UnixMilli()
	h.send(0, now+100)
	victim := h.send(1, now+200)
	h.sendMarker(CancelTarget{Origin: victim, Location: victim, DeliverMS: now + 200})
	testutil.WaitFor(t, 5*time.Second, "the first two units indexed", func() error {
		if off := e.Status().IndexedOffset; off != 2 {
			return fmt.Errorf("indexed to %d", off)
		}
		return nil
	})
	vc.Advance(time.Second)
	e.SetActive(true)
	time.Sleep(100 * time.Millisecond)
	if n := h.deliveredCount(); n != 0 {
		t.Fatalf("%d delivered before the index caught up", n)
	}
	g.gmu.Lock()
	g.limit = 1 << 30
	g.gmu.Unlock()
	h.arrival.Notify()
	settle(t, e)
	checkDeliveries(t, h.deliveries(), map[int]int64{0: now + 100}, 0, true)
}
