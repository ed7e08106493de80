package broker

import (
	"sync"
	"time"
)

type queueKey struct {
	topic string
	id    int32
}

type lockEntry struct {
	client  string
	renewed time.Time
}

// queueLocks are the orderly-consumption locks: a queue of a group is held
// by one client until it unlocks or the lock expires.
type queueLocks struct {
	mu     sync.Mutex
	ttl    time.Duration
	groups map[string]map[queueKey]*lockEntry
}

func newQueueLocks(ttl time.Duration) *queueLocks {
	return &queueLocks{ttl: ttl, groups: make(map[string]map[queueKey]*lockEntry)}
}

// lock takes or renews the requested queues for client and returns those it
// now holds.
func (l *queueLocks) lock(group, client string, queues []queueKey, now time.Time) []queueKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.groups[group]
	if m == nil {
		m = make(map[queueKey]*lockEntry)
		l.groups[group] = m
	}
	var held []queueKey
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
func (l *queueLocks) unlock(group, client string, queues []queueKey) {
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
func (l *queueLocks) holder(group string, q queueKey, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.groups[group][q]; e != nil && now.Sub(e.renewed) <= l.ttl {
		return e.client
	}
	return ""
}
