package broker

import (
	"sync"
	"time"
)

type lockEntry struct {
	client  string
	renewed time.Time
}

// queueLocks are the orderly-consumption locks: a queue of a group is held
// by one client until it unlocks or the lock expires.
type queueLocks struct {
	mu     sync.Mutex
	ttl    time.Duration
	groups map[string]map[Queue]*lockEntry
}

func newQueueLocks(ttl time.Duration) *queueLocks {
	return &queueLocks{ttl: ttl, groups: make(map[string]map[Queue]*lockEntry)}
}

// lock takes or renews the requested queues for client and returns those it
// now holds.
func (l *queueLocks) lock(group, client string, queues []Queue, now time.Time) []Queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.groups[group]
	if m == nil {
		m = make(map[Queue]*lockEntry)
		l.groups[group] = m
	}
	var held []Queue
	for _, q := range queues {
		e := m[q]
		if e == nil || e.client == client || now.Sub(e.renewed) > l.ttl {
			m[q] = &lockEntry{client: client, renewed: now}
			held = append(held, q)
		}
	}
	return held
}

// unlock releases the queues client holds.
func (l *queueLocks) unlock(group, client string, queues []Queue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.groups[group]
	for _, q := range queues {
		if e := m[q]; e != nil && e.client == client {
			delete(m, q)
		}
	}
}

// holder returns who holds a queue now ("" if nobody).
func (l *queueLocks) holder(group string, q Queue, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.groups[group][q]; e != nil && now.Sub(e.renewed) <= l.ttl {
		return e.client
	}
	return ""
}
