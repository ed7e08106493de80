package broker

import (
	"testing"
	"time"
)

func TestQueueLocksAnyHeld(t *testing.T) {
	l := newQueueLocks(time.Minute)
	now := time.Now()
	if l.anyHeld("g", now) {
		t.Fatal("held before any lock")
	}
	l.lock("g", "c1", []Queue{{"t", 0}, {"t", 1}}, now)
	if !l.anyHeld("g", now) || l.anyHeld("other", now) {
		t.Fatal("lock not seen, or seen in another group")
	}
	if l.anyHeld("g", now.Add(2*time.Minute)) {
		t.Fatal("expired locks count")
	}
	l.unlock("g", "c1", []Queue{{"t", 0}, {"t", 1}})
	if l.anyHeld("g", now) {
		t.Fatal("released locks count")
	}
}
