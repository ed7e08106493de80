package pop

import (
	"sort"
	"sync"
	"sync/atomic"
)

// entry is one message in flight: handed out and neither acknowledged nor
// dead-lettered. Its visibility may have run out (it waits for a
// redelivery then).
type entry struct {
	attempt     int32
	seq         uint64
	visibleAt   int64 // Unix ms
	popMS       int64 // when this delivery began (bounds auto-renewal)
	invisibleMS int64 // the renewal period
	client      string
}

// queueState is the POP state of one (group, topic, queue). Every offset
// below next that is not in flight is done (acknowledged, dead-lettered or
// filtered out); the acknowledged low watermark is the smallest offset in
// flight, or next.
type queueState struct {
	next        int64
	inflight    map[int64]*entry
	attemptID   string // FIFO: the attempt id of the last batch
	redelivered int64
	committed   int64 // the watermark last committed to the offset table
	// visibleFrom is a lower bound of the entries' visible times: before
	// it no entry needs looking at (0: look).
	visibleFrom int64
}

func newQueueState(next int64) *queueState {
	return &queueState{next: next, inflight: make(map[int64]*entry), committed: -2}
}

func (q *queueState) watermark() int64 {
	w := q.next
	for off := range q.inflight {
		w = min(w, off)
	}
	return w
}

// sortedInflight returns the offsets in flight, ascending.
func (q *queueState) sortedInflight() []int64 {
	offs := make([]int64, 0, len(q.inflight))
	for off := range q.inflight {
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs
}

// gtKey names a (group, topic).
type gtKey struct{ group, topic string }

// groupTopic is the POP state of a group on a topic: its queues and
// counters.
type groupTopic struct {
	key gtKey
	mu  sync.Mutex
	qs  map[int32]*queueState

	acks, redeliveries, dlq, popped atomic.Int64
}

// applyLocked applies one record to the state; gt.mu is held. It is the
// one way the state changes, on a master as it acts and on a slave or a
// restarting broker as it reads the POP log, so both agree.
func (s *Service) applyLocked(gt *groupTopic, r *Record) {
	q := gt.qs[r.QueueID]
	if r.Kind == KindReset {
		q = newQueueState(r.Next)
		gt.qs[r.QueueID] = q
		s.changes.Add(1)
		return
	}
	if q == nil {
		if r.Kind != KindPop {
			return
		}
		next := r.Next
		for _, e := range r.Entries {
			next = min(next, e.Offset)
		}
		q = newQueueState(next)
		gt.qs[r.QueueID] = q
	}
	for _, e := range r.Entries {
		s.seenSeq(e.Seq)
	}
	s.changes.Add(1)
	switch r.Kind {
	case KindPop:
		for _, e := range r.Entries {
			q.visibleFrom = min(q.visibleFrom, e.VisibleAtMS)
			q.inflight[e.Offset] = &entry{attempt: e.Attempt, seq: e.Seq, visibleAt: e.VisibleAtMS,
				popMS: r.TimeMS, invisibleMS: r.InvisibleMS, client: r.ClientID}
			if e.Attempt > 1 {
				q.redelivered++
			}
		}
		q.next = max(q.next, r.Next)
		if r.AttemptID != "" {
			q.attemptID = r.AttemptID
		}
	case KindAck:
		for _, e := range r.Entries {
			if cur := q.inflight[e.Offset]; cur != nil && cur.seq == e.Seq {
				delete(q.inflight, e.Offset)
			}
		}
	case KindDLQ:
		for _, e := range r.Entries {
			delete(q.inflight, e.Offset)
		}
	case KindChange:
		for _, e := range r.Entries {
			if cur := q.inflight[e.Offset]; cur != nil && cur.seq == e.OldSeq {
				cur.seq, cur.visibleAt, cur.client = e.Seq, e.VisibleAtMS, ""
				q.visibleFrom = min(q.visibleFrom, e.VisibleAtMS)
			}
		}
	case KindRenew:
		for _, e := range r.Entries {
			if cur := q.inflight[e.Offset]; cur != nil && cur.seq == e.Seq {
				cur.visibleAt = e.VisibleAtMS
				q.visibleFrom = min(q.visibleFrom, e.VisibleAtMS)
			}
		}
	}
}

// seenSeq keeps the sequence counter above every sequence in the state.
func (s *Service) seenSeq(seq uint64) {
	for {
		cur := s.seq.Load()
		if seq <= cur || s.seq.CompareAndSwap(cur, seq) {
			return
		}
	}
}
