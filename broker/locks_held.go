package broker

import "time"

// GroupLocked reports whether a client holds an unexpired orderly lock on
// any queue of group: the group consumes orderly. RocketMQ's broker puts a
// retry that such a group's client sends itself straight into the
// dead-letter topic (an orderly consumer retries in place, and only sends
// a message back once it gave up on it).
func (b *Broker) GroupLocked(group string) bool {
	return b.locks.anyHeld(group, time.Now())
}

// anyHeld reports whether a queue of group is locked at now.
func (l *queueLocks) anyHeld(group string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.groups[group] {
		if now.Sub(e.renewed) <= l.ttl {
			return true
		}
	}
	return false
}
