package rolegate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// role is a Source a test flips.
type role struct {
	master atomic.Bool
	sig    notify.Signal
}

func (r *role) IsMaster() bool           { return r.master.Load() }
func (r *role) Changes() <-chan struct{} { return r.sig.C() }
func (r *role) set(m bool)               { r.master.Store(m); r.sig.Notify() }

// service counts leads and checks that they never overlap.
type service struct {
	mu      sync.Mutex
	running int
	leads   int
	stops   int
	overlap bool
}

func (s *service) Lead(ctx context.Context) func() {
	s.mu.Lock()
	s.running++
	s.leads++
	s.overlap = s.overlap || s.running > 1
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		<-ctx.Done()
		time.Sleep(time.Millisecond) // work that takes a moment to stop
		s.mu.Lock()
		s.running--
		s.stops++
		s.mu.Unlock()
		close(done)
	}()
	return func() { <-done }
}

func (s *service) counts() (leads, stops, running int, overlap bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leads, s.stops, s.running, s.overlap
}

func TestGateFollowsTheRole(t *testing.T) {
	r := &role{}
	g := New(r, nil)
	a, b := &service{}, &service{}
	g.Subscribe("a", a)
	g.Start()
	if g.Leading() {
		t.Fatal("a slave's gate leads")
	}
	r.set(true)
	testutil.WaitFor(t, 5*time.Second, "lead after promotion", func() error {
		if !g.Leading() {
			return context.DeadlineExceeded
		}
		return nil
	})
	g.Subscribe("b", b) // late subscriber of a leading gate leads at once
	if l, _, run, _ := b.counts(); l != 1 || run != 1 {
		t.Fatalf("late subscriber: leads %d running %d", l, run)
	}
	// A loss waits for the work to stop: once Sync returns nothing runs.
	r.master.Store(false)
	if g.Sync() {
		t.Fatal("Sync after demotion says leading")
	}
	for _, s := range []*service{a, b} {
		if _, stops, run, _ := s.counts(); run != 0 || stops != 1 {
			t.Fatalf("after demotion: running %d stops %d", run, stops)
		}
	}
	// A promotion the watcher has not been told of: Sync leads before it
	// returns (a send right after a promotion relies on it), and once
	// applied, Sync leaves the services alone.
	r.master.Store(true)
	for range 2 {
		if !g.Sync() {
			t.Fatal("Sync after an unsignalled promotion says not leading")
		}
		if leads, _, run, _ := a.counts(); leads != 2 || run != 1 {
			t.Fatalf("after an unsignalled promotion: leads %d running %d", leads, run)
		}
	}
	// Flapping: leads and stops pair up, never overlapping.
	for i := 0; i < 50; i++ {
		r.set(i%2 == 0)
		if i%7 == 0 {
			g.Sync()
		}
	}
	g.Close()
	g.Close()
	for _, s := range []*service{a, b} {
		leads, stops, run, overlap := s.counts()
		if overlap || run != 0 || leads != stops {
			t.Fatalf("leads %d stops %d running %d overlap %v", leads, stops, run, overlap)
		}
	}
	r.set(true)
	if g.Sync() || g.Leading() {
		t.Fatal("a closed gate leads again")
	}
}
