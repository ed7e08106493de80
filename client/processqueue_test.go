package client

import "testing"

func msgsAt(offs ...int64) []*MessageExt {
	out := make([]*MessageExt, len(offs))
	for i, o := range offs {
		out[i] = &MessageExt{QueueOffset: o, Message: Message{Body: []byte("x")}}
	}
	return out
}

func TestProcessQueueCommittable(t *testing.T) {
	var commits []int64
	q := newProcessQueue(func(off int64) { commits = append(commits, off) })
	q.put(msgsAt(), 0) // before start: no commit callback
	if len(commits) != 0 {
		t.Fatalf("commit before start: %v", commits)
	}
	q.start(10)
	if q.committable() != 10 {
		t.Fatalf("committable = %d, want the start offset", q.committable())
	}
	m := msgsAt(10, 11, 12, 13)
	if got := q.put(m, 14); len(got) != 4 {
		t.Fatalf("put returned %d messages", len(got))
	}
	if got := q.put(msgsAt(12), 14); len(got) != 0 {
		t.Fatalf("duplicate offsets accepted: %d", len(got))
	}
	if q.count() != 4 || q.committable() != 10 {
		t.Fatalf("count %d committable %d", q.count(), q.committable())
	}
	steps := []struct {
		remove []*MessageExt
		want   int64
	}{
		{[]*MessageExt{m[1]}, 10},          // a later one done: 10 still in flight
		{[]*MessageExt{m[3]}, 10},          //
		{[]*MessageExt{m[0]}, 12},          // 10 and 11 done: lowest in flight is 12
		{[]*MessageExt{m[0]}, 12},          // removing twice changes nothing
		{[]*MessageExt{m[2]}, 14},          // none in flight: the next offset
		{[]*MessageExt{msgsAt(99)[0]}, 14}, // unknown offsets are ignored
	}
	for i, s := range steps {
		if got := q.remove(s.remove); got != s.want {
			t.Fatalf("step %d: committable %d, want %d", i, got, s.want)
		}
	}
	q.setNext(20) // filtered messages moved the next offset
	if q.committable() != 20 {
		t.Fatalf("committable after setNext = %d", q.committable())
	}
	want := []int64{10, 12, 14, 20}
	if len(commits) != len(want) {
		t.Fatalf("commits %v, want %v", commits, want)
	}
	for i := range want {
		if commits[i] != want[i] {
			t.Fatalf("commits %v, want %v", commits, want)
		}
	}
	q.put(msgsAt(20, 21), 22)
	started, final := q.drop()
	if !started || final != 20 {
		t.Fatalf("drop = %v %d", started, final)
	}
	q.remove(msgsAt(20, 21))
	if commits[len(commits)-1] != 20 {
		t.Fatalf("commit callback after drop: %v", commits)
	}
}

func TestProcessQueueFlowControlAndPeek(t *testing.T) {
	q := newProcessQueue(nil)
	q.start(0)
	q.put(msgsAt(0, 1, 2), 3)
	if !q.overLimit(2, 1<<20) || q.overLimit(3, 1<<20) {
		t.Fatal("message limit wrong")
	}
	if !q.overLimit(10, 2) {
		t.Fatal("byte limit wrong")
	}
	select {
	case <-q.arrived:
	default:
		t.Fatal("put did not signal arrival")
	}
	p := q.peek(2)
	if len(p) != 2 || p[0].QueueOffset != 0 || p[1].QueueOffset != 1 {
		t.Fatalf("peek = %v", p)
	}
	q.remove(p)
	select {
	case <-q.space:
	default:
		t.Fatal("remove did not signal space")
	}
	if p := q.peek(5); len(p) != 1 || p[0].QueueOffset != 2 {
		t.Fatalf("peek after remove = %v", p)
	}
}
