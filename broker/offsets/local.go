package offsets

import (
	"maps"
	"sync"
)

// Local is a slave's local commits: the offsets consumers committed to it
// that its master has not taken yet. The zero value is empty and usable.
//
// Lock order: Local's mutex is taken before the Table's, so that a local
// commit and the table's replacement by the master's (Adopt) do not
// interleave.
type Local struct {
	mu sync.Mutex
	m  Map
}

// Record sets an offset in t as Table.Set does and, if it did, remembers
// it as a local commit.
func (l *Local) Record(t *Table, group, topic string, queueID int32, offset int64, forwardOnly bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !t.Set(group, topic, queueID, offset, forwardOnly) {
		return
	}
	if l.m == nil {
		l.m = make(Map)
	}
	k := Key(topic, group)
	q := l.m[k]
	if q == nil {
		q = make(map[int32]int64)
		l.m[k] = q
	}
	q[queueID] = offset
}

// Pending copies the local commits, for the master.
func (l *Local) Pending() Map {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(Map, len(l.m))
	for k, qs := range l.m {
		if len(qs) > 0 {
			out[k] = maps.Clone(qs)
		}
	}
	return out
}

// Adopt replaces t with the master's table, keeping a local commit where
// it is larger than the master's offset (or the master has none), and
// forgets the local commits the master has.
func (l *Local) Adopt(t *Table, master Map) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t.adopt(master, l.m)
	for k, qs := range l.m {
		for q, v := range qs {
			if mv, ok := master[k][q]; ok && mv >= v {
				delete(qs, q) // the master has it
			}
		}
		if len(qs) == 0 {
			delete(l.m, k)
		}
	}
}
