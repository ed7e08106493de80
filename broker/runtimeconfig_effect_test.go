package broker_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// startRuntimeBroker starts a broker storing in a temporary directory with
// mutate applied to its options, closed when the test ends.
func startRuntimeBroker(t *testing.T, mutate func(*broker.Options)) *server.Server {
	t.Helper()
	opts := testOptions(t.TempDir())
	mutate(&opts)
	b, err := newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// segmentFiles lists the CommitLog's segment files.
func segmentFiles(t *testing.T, b *server.Server) []string {
	t.Helper()
	dir := b.Store().CommitLog().Options().Dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if len(e.Name()) == 20 { // segments are named by their start offset, 20 digits
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// TestFileReservedTimeAtRuntime: segments two hours old are kept while
// fileReservedTime is 72 hours; once it is changed to 1 at runtime, the
// next retention run deletes them, and the queues' first offsets follow.
func TestFileReservedTimeAtRuntime(t *testing.T) {
	b := startRuntimeBroker(t, func(o *broker.Options) {
		o.Store.CommitLog.SegmentSize = 256 << 10
		o.Store.CommitLog.FlushMode = commitlog.FlushSync // retention deletes flushed segments only
		o.MaxMessageSize = 64 << 10
		o.Store.ConsumeQueue.UnitsPerFile = 8 // queue files go with the segments they point into
		o.Store.Retention.DeleteHours = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
	})
	ctx := context.Background()
	if err := b.PutTopic(broker.TopicConfig{Name: "old", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("r"), 16<<10)
	var first int64
	for i := 0; i < 48; i++ { // 768 KiB: three full segments and a fourth
		res, err := b.Send(ctx, []*message.Ext{{Message: message.Message{Topic: "old", Body: body}}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res[0].PhysicalOffset
		}
	}
	clog := b.Store().CommitLog()
	if err := b.Store().WaitDispatched(ctx, clog.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, b)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	now := time.Now()
	for _, s := range segs {
		if err := os.Chtimes(s, now.Add(-2*time.Hour), now.Add(-2*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := b.Store().RunRetention(now); err != nil || n != 0 || clog.MinOffset() != 0 {
		t.Fatalf("retention with fileReservedTime 72: %d deleted, %v, min offset %d", n, err, clog.MinOffset())
	}
	if _, err := b.UpdateConfig(map[string]string{"fileReservedTime": "1"}); err != nil {
		t.Fatal(err)
	}
	// The store's own retention loop may run first: the effect is what
	// is checked.
	if _, err := b.Store().RunRetention(now); err != nil {
		t.Fatal(err)
	}
	// Every segment before the one being written is gone.
	size := clog.Options().SegmentSize
	if want := clog.MaxOffset() / size * size; clog.MinOffset() != want {
		t.Fatalf("after fileReservedTime 1: CommitLog min offset %d, want %d", clog.MinOffset(), want)
	}
	for _, s := range segs {
		start, err := strconv.ParseInt(filepath.Base(s), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(s); start < clog.MinOffset() && !os.IsNotExist(err) {
			t.Errorf("segment %s is still there: %v", filepath.Base(s), err)
		}
	}
	if _, err := b.Store().ReadMessage(first); err == nil {
		t.Error("the first message is still readable after its segment was deleted")
	}
	st, err := b.QueueState("old", 0)
	if err != nil || st.MinOffset == 0 || st.MaxOffset != 48 {
		t.Fatalf("queue after retention: %+v %v", st, err)
	}
}

// TestMaxReconsumeTimesAtRuntime: a message that fails every delivery
// reaches the group's dead-letter topic after maxReconsumeTimes retries —
// 16 by default, then the number set at runtime. Each failure is sent back
// as a consumer sends it, with the reconsume count of the copy it was
// delivered (the retry copies wait in the delay levels, 10 s and more: the
// count is taken from the copy the broker stored).
func TestMaxReconsumeTimesAtRuntime(t *testing.T) {
	b := startRuntimeBroker(t, func(*broker.Options) {})
	ctx := context.Background()
	if err := b.PutTopic(broker.TopicConfig{Name: "jobs", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	// retriesUntilDLQ fails one new message until it is dead-lettered and
	// returns the number of retries it had.
	retriesUntilDLQ := func(name string) int {
		t.Helper()
		res, err := b.Send(ctx, []*message.Ext{{Message: message.Message{Topic: "jobs", Body: []byte(name),
			Properties: map[string]string{message.PropertyUniqueKey: "U-" + name}}}})
		if err != nil {
			t.Fatal(err)
		}
		off, times := res[0].PhysicalOffset, int32(0)
		for retries := 0; retries <= 100; retries++ {
			// The consumer's count is the copy's: the broker takes the
			// larger of it and the original's (0).
			back, err := b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "workers", CommitLogOffset: off, ReconsumeTimes: times, Reason: "failed"})
			if err != nil {
				t.Fatal(err)
			}
			if back.DeadLettered {
				if back.Topic != "%DLQ%workers" {
					t.Fatalf("dead-lettered to %s", back.Topic)
				}
				return retries
			}
			copyMsg, err := b.Store().LookupByMsgID(back.MsgID)
			if err != nil {
				t.Fatal(err)
			}
			if copyMsg.ReconsumeTimes != int32(retries+1) {
				t.Fatalf("retry %d: the copy counts %d reconsumes", retries+1, copyMsg.ReconsumeTimes)
			}
			times = copyMsg.ReconsumeTimes
		}
		t.Fatalf("%s: not dead-lettered after 100 retries", name)
		return 0
	}
	if n := retriesUntilDLQ("default"); n != 16 {
		t.Fatalf("with the default maxReconsumeTimes: %d retries before the DLQ, want 16", n)
	}
	for _, max := range []int{3, 0, 5} {
		if _, err := b.UpdateConfig(map[string]string{"maxReconsumeTimes": strconv.Itoa(max)}); err != nil {
			t.Fatal(err)
		}
		if n := retriesUntilDLQ("max-" + strconv.Itoa(max)); n != max {
			t.Fatalf("with maxReconsumeTimes %d: %d retries before the DLQ", max, n)
		}
	}
}
