package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// TestCreateQueuesTakesNewQueuesOffThePlan: the queues CreateQueues made
// need nothing from the dispatch planner when their first messages come:
// a burst of first messages to 30 such queues holds no spare file and
// grows no reserve (TestReserveTrimmedAfterBurst is the same burst to
// queues without files), and every message is stored.
func TestCreateQueuesTakesNewQueuesOffThePlan(t *testing.T) {
	opts := testOptions(t.TempDir(), commitlog.FlushAsync)
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 30
	for i := range n {
		made, err := s.CreateQueues(fmt.Sprintf("made-%d", i), 2)
		if err != nil || made != 2 {
			t.Fatalf("CreateQueues(made-%d, 2) = %d, %v; want 2, nil", i, made, err)
		}
	}
	if made, err := s.CreateQueues("made-0", 3); err != nil || made != 1 {
		t.Fatalf("CreateQueues again with one queue more = %d, %v; want 1, nil", made, err)
	}
	s.res.mu.Lock()
	before := s.res.seq
	s.res.mu.Unlock()

	var msgs []*message.Ext
	for i := range n {
		msgs = append(msgs, newMsg(fmt.Sprintf("made-%d", i), 1, i))
	}
	res, err := s.PutBatch(context.Background(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.res.mu.Lock()
	after := s.res.seq
	s.res.mu.Unlock()
	s.newMu.Lock()
	held := len(s.newFiles)
	s.newMu.Unlock()
	if after != before || held != 0 {
		t.Fatalf("first messages to %d made queues: %d spare files made, %d held; want none", n, after-before, held)
	}
	if err := waitDispatched(s, res[len(res)-1].End(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, maxOff := s.QueueOffsets(fmt.Sprintf("made-%d", i), 1); maxOff != 1 {
			t.Fatalf("made-%d/1 holds %d messages, want 1", i, maxOff)
		}
	}

	// A queue written to already is left to its files.
	if made, err := s.CreateQueues("made-0", 2); err != nil || made != 0 {
		t.Fatalf("CreateQueues of written queues = %d, %v; want 0, nil", made, err)
	}
}
