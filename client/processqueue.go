package client

import "sync"

// processQueue tracks a queue's messages that were pulled and not yet
// consumed, in offset order. The offset to commit is the lowest one still
// in flight, or the next offset to pull when none is: a message that is
// slow or retried holds the committed offset back, so it is never lost.
type processQueue struct {
	mu      sync.Mutex
	entries []*pqEntry // ascending offsets; consumed entries leave from the front
	index   map[int64]*pqEntry
	bytes   int64
	next    int64 // offset after the last pulled message (next pull)
	started bool
	dropped bool
	// commit is called, under mu, with the new committable offset whenever
	// it changes, until the queue is dropped.
	commit    func(int64)
	committed int64

	// space is notified when messages leave, arrived when they come.
	space   signal
	arrived signal
}

type pqEntry struct {
	msg  *MessageExt
	done bool
}

func newProcessQueue(commit func(int64)) *processQueue {
	return &processQueue{index: make(map[int64]*pqEntry), commit: commit, committed: -1,
		space: newSignal(), arrived: newSignal()}
}

// start sets the first offset to pull.
func (q *processQueue) start(offset int64) {
	q.mu.Lock()
	q.next, q.started = offset, true
	q.changed()
	q.mu.Unlock()
}

// put adds pulled messages (ascending offsets) and the next offset to pull.
// Messages already in flight are ignored.
func (q *processQueue) put(msgs []*MessageExt, next int64) []*MessageExt {
	q.mu.Lock()
	defer q.mu.Unlock()
	added := msgs[:0:0]
	for _, m := range msgs {
		if _, dup := q.index[m.QueueOffset]; dup || m.QueueOffset < q.lowest() {
			continue
		}
		e := &pqEntry{msg: m}
		q.entries = append(q.entries, e)
		q.index[m.QueueOffset] = e
		q.bytes += m.size()
		added = append(added, m)
	}
	if next > q.next {
		q.next = next
	}
	q.changed()
	if len(added) > 0 {
		q.arrived.notify()
	}
	return added
}

// lowest is the lowest offset that may still enter: the front entry or
// the committed position. Called with mu held.
func (q *processQueue) lowest() int64 {
	if len(q.entries) > 0 {
		return q.entries[0].msg.QueueOffset
	}
	return q.next
}

// setNext moves the next pull offset (no new message, filtered messages,
// or a corrected illegal offset).
func (q *processQueue) setNext(next int64) {
	q.mu.Lock()
	q.next = next
	q.changed()
	q.mu.Unlock()
}

// remove marks consumed messages and returns the committable offset.
func (q *processQueue) remove(msgs []*MessageExt) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		e := q.index[m.QueueOffset]
		if e == nil || e.done {
			continue
		}
		e.done = true
		delete(q.index, m.QueueOffset)
		q.bytes -= m.size()
	}
	n := 0
	for n < len(q.entries) && q.entries[n].done {
		n++
	}
	if n > 0 {
		clear(q.entries[:n])
		q.entries = q.entries[n:]
		q.space.notify()
	}
	q.changed()
	return q.committableLocked()
}

// peek returns up to n of the lowest messages in flight (orderly
// consumption takes them from the front, in order).
func (q *processQueue) peek(n int) []*MessageExt {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*MessageExt
	for _, e := range q.entries {
		if len(out) == n {
			break
		}
		if !e.done {
			out = append(out, e.msg)
		}
	}
	return out
}

func (q *processQueue) committableLocked() int64 {
	if len(q.entries) > 0 {
		return q.entries[0].msg.QueueOffset
	}
	return q.next
}

// committable returns the offset to commit: the lowest in flight, or the
// next offset to pull.
func (q *processQueue) committable() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.committableLocked()
}

// changed reports a new committable offset to the commit callback.
func (q *processQueue) changed() {
	if q.dropped || !q.started || q.commit == nil {
		return
	}
	if off := q.committableLocked(); off != q.committed {
		q.committed = off
		q.commit(off)
	}
}

// overLimit reports whether pulling must pause.
func (q *processQueue) overLimit(maxMsgs int, maxBytes int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.index) > maxMsgs || q.bytes > maxBytes
}

// count returns the messages in flight.
func (q *processQueue) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.index)
}

// drop stops commit callbacks; it returns whether the queue had started
// and its final committable offset.
func (q *processQueue) drop() (bool, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropped = true
	return q.started, q.committableLocked()
}

func (q *processQueue) isDropped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
