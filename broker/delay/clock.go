package delay

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the time source of the delay code. The broker uses the real
// clock; tests use a VirtualClock to run a year in minutes.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// TimerAt returns a timer of c that fires at t. For a VirtualClock the
// deadline is exact even if the clock moves while the timer is made.
func TimerAt(c Clock, t time.Time) Timer {
	if a, ok := c.(interface{ NewTimerAt(time.Time) Timer }); ok {
		return a.NewTimerAt(t)
	}
	return c.NewTimer(t.Sub(c.Now()))
}

// RealClock is the wall clock.
var RealClock Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// VirtualClock is a Clock that moves only when told to. Timers fire (in
// due order) when Set or Advance moves the time past them.
type VirtualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers vtimerHeap
	seq    uint64
}

// NewVirtualClock returns a virtual clock reading start.
func NewVirtualClock(start time.Time) *VirtualClock { return &VirtualClock{now: start} }

// Now returns the virtual time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing when the virtual time reaches now+d.
func (c *VirtualClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAtLocked(c.now.Add(d))
}

// NewTimerAt returns a timer firing when the virtual time reaches at.
func (c *VirtualClock) NewTimerAt(at time.Time) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAtLocked(at)
}

func (c *VirtualClock) timerAtLocked(at time.Time) *vtimer {
	c.seq++
	t := &vtimer{c: c, at: at, ch: make(chan time.Time, 1), seq: c.seq, index: -1}
	if !at.After(c.now) {
		t.ch <- c.now
		return t
	}
	heap.Push(&c.timers, t)
	return t
}

// Advance moves the clock forward by d.
func (c *VirtualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires every timer due by
// then.
func (c *VirtualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		vt := heap.Pop(&c.timers).(*vtimer)
		vt.ch <- c.now
	}
}

// Timers returns how many timers are waiting.
func (c *VirtualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type vtimer struct {
	c     *VirtualClock
	at    time.Time
	ch    chan time.Time
	seq   uint64
	index int
}

func (t *vtimer) C() <-chan time.Time { return t.ch }

func (t *vtimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

type vtimerHeap []*vtimer

func (h vtimerHeap) Len() int { return len(h) }
func (h vtimerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h vtimerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *vtimerHeap) Push(x any) {
	t := x.(*vtimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *vtimerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
