package pop

import (
	"testing"
)

func newTestService() *Service { return New(nil, Options{BrokerName: "b"}, nil) }

func applyAll(s *Service, recs ...*Record) *queueState {
	gt := s.groupTopic("g", "t")
	gt.mu.Lock()
	defer gt.mu.Unlock()
	for _, r := range recs {
		r.Group, r.Topic = "g", "t"
		s.applyLocked(gt, r)
	}
	return gt.qs[0]
}

// TestApplyOrderTolerant: records of concurrent operations on one message
// may reach the log in another order than the master applied them; the
// state after replay is the same.
func TestApplyOrderTolerant(t *testing.T) {
	pop1 := func() *Record {
		return &Record{Kind: KindPop, Next: 1, Entries: []Entry{{Offset: 0, Seq: 1, Attempt: 1, VisibleAtMS: 100}}}
	}
	change := func() *Record {
		return &Record{Kind: KindChange, Entries: []Entry{{Offset: 0, OldSeq: 1, Seq: 2, VisibleAtMS: 50}}}
	}
	redeliver := func() *Record {
		return &Record{Kind: KindPop, Next: 1, Entries: []Entry{{Offset: 0, Seq: 3, Attempt: 2, VisibleAtMS: 200}}}
	}
	a := applyAll(newTestService(), pop1(), change(), redeliver())
	b := applyAll(newTestService(), pop1(), redeliver(), change())
	if a.inflight[0].seq != 3 || b.inflight[0].seq != 3 || a.inflight[0].visibleAt != 200 || b.inflight[0].visibleAt != 200 {
		t.Fatalf("states differ: %+v %+v", *a.inflight[0], *b.inflight[0])
	}
	// An ack or renewal of a replaced sequence does nothing.
	q := applyAll(newTestService(), pop1(), change(),
		&Record{Kind: KindAck, Entries: []Entry{{Offset: 0, Seq: 1}}},
		&Record{Kind: KindRenew, Entries: []Entry{{Offset: 0, Seq: 1, VisibleAtMS: 999}}})
	if e := q.inflight[0]; e == nil || e.seq != 2 || e.visibleAt != 50 {
		t.Fatalf("stale ack or renew applied: %+v", e)
	}
	// The current one does; a dead letter removes whatever the sequence.
	q = applyAll(newTestService(), pop1(), &Record{Kind: KindAck, Entries: []Entry{{Offset: 0, Seq: 1}}})
	if len(q.inflight) != 0 || q.watermark() != 1 {
		t.Fatalf("ack not applied: %d in flight, watermark %d", len(q.inflight), q.watermark())
	}
	q = applyAll(newTestService(), pop1(), &Record{Kind: KindDLQ, Entries: []Entry{{Offset: 0, Seq: 77}}})
	if len(q.inflight) != 0 {
		t.Fatal("dead letter not applied")
	}
	// Records of a queue the state does not know, other than POP, are
	// ignored; a POP creates it at its lowest offset.
	s := newTestService()
	if q := applyAll(s, &Record{Kind: KindAck, QueueID: 0, Entries: []Entry{{Offset: 5, Seq: 1}}}); q != nil {
		t.Fatal("ack created a queue")
	}
	q = applyAll(s, &Record{Kind: KindPop, Next: 9, Entries: []Entry{{Offset: 7, Seq: 4, Attempt: 1}}})
	if q.next != 9 || q.watermark() != 7 {
		t.Fatalf("queue created at next %d, watermark %d", q.next, q.watermark())
	}
	if s.seq.Load() != 4 {
		t.Fatalf("sequence counter %d", s.seq.Load())
	}
	if n := s.nextSeq(); n <= 4 {
		t.Fatalf("next sequence %d", n)
	}
}
