package broker_test

import (
	"context"
	"testing"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestPullCommitOnlyMovesForward: the progress a pull carries never moves a
// committed offset back (a pull still on its way when its consumer released
// the queue with a final commit must not undo that commit); explicit
// commits still can.
func TestPullCommitOnlyMovesForward(t *testing.T) {
	_, c := testBroker(t)
	createTopic(t, c, "orders", 2)
	ctx := context.Background()
	offset := func() int64 {
		t.Helper()
		q, err := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "orders", QueueId: 1})
		if err != nil {
			t.Fatal(err)
		}
		return q.Offset
	}
	pull := func(commit int64) {
		t.Helper()
		if _, err := c.Pull(ctx, &pb.PullRequest{Group: "g", Topic: "orders", QueueId: 1, CommitOffset: commit}); err != nil {
			t.Fatal(err)
		}
	}
	pull(5) // no offset yet: the pull's progress is recorded
	if got := offset(); got != 5 {
		t.Fatalf("offset %d after a pull carrying 5", got)
	}
	if _, err := c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "orders", QueueId: 1, Offset: 25}}}); err != nil {
		t.Fatal(err)
	}
	pull(24) // late: must not undo the commit
	if got := offset(); got != 25 {
		t.Fatalf("offset %d after a late pull carrying 24, want 25", got)
	}
	pull(30)
	if got := offset(); got != 30 {
		t.Fatalf("offset %d after a pull carrying 30", got)
	}
	// An explicit commit may move it back (a reset).
	if _, err := c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "orders", QueueId: 1, Offset: 10}}}); err != nil {
		t.Fatal(err)
	}
	if got := offset(); got != 10 {
		t.Fatalf("offset %d after an explicit commit of 10", got)
	}
}
