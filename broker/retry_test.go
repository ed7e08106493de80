package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// openBroker starts a broker storing in dir, with no NameServers.
func openBroker(t *testing.T, dir string) *server.Server {
	t.Helper()
	opts := testOptions(dir)
	b, err := newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	return b
}

func wantCode(t *testing.T, what string, err error, code pb.Code) {
	t.Helper()
	if wire.CodeOf(err) != code {
		t.Errorf("%s: %v, want %v", what, err, code)
	}
}

// deadLetters lists a group's DLQ, waiting for dispatch to catch up.
func deadLetters(t *testing.T, b *server.Server, group string, n int) []*pb.DeadLetterEntry {
	t.Helper()
	if err := b.Store().WaitDispatched(context.Background(), b.Store().CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	list, err := listDeadLetters(b, &pb.ListDeadLettersRequest{Group: group})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("%d dead letters, want %d", len(list), n)
	}
	return list
}

// deadLetterClient dials the broker's gRPC DeadLetter service; close the
// connection after the call.
func deadLetterClient(b *server.Server) (pb.DeadLetterClient, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return pb.NewDeadLetterClient(conn), conn, nil
}

// listDeadLetters lists dead letters through the gRPC DeadLetter service.
func listDeadLetters(b *server.Server, req *pb.ListDeadLettersRequest) ([]*pb.DeadLetterEntry, error) {
	c, conn, err := deadLetterClient(b)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := c.ListDeadLetters(context.Background(), req)
	if err != nil {
		return nil, err
	}
	return resp.Entries, wire.FromStatus(resp.Status)
}

// markReplayed marks a dead letter through the gRPC DeadLetter service.
func markReplayed(ctx context.Context, b *server.Server, group string, queueOffset int64, msgID string, mark *pb.ReplayMark) (*pb.ReplayMark, bool, error) {
	c, conn, err := deadLetterClient(b)
	if err != nil {
		return nil, false, err
	}
	defer conn.Close()
	resp, err := c.MarkReplayed(ctx, &pb.MarkReplayedRequest{Group: group, QueueOffset: queueOffset, MsgId: msgID, Mark: mark})
	if err != nil {
		return nil, false, err
	}
	return resp.Mark, resp.Already, wire.FromStatus(resp.Status)
}

func TestSendBackRetryDeadLetterAndReplayMarks(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	defer func() { _ = b.Close() }()
	ctx := context.Background()
	if err := b.PutTopic(broker.TopicConfig{Name: "orders", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	send := func(body string) (*message.Ext, int64) {
		m := &message.Ext{Message: message.Message{Topic: "orders", Body: []byte(body),
			Properties: map[string]string{message.PropertyUniqueKey: "U-" + body, message.PropertyTags: "paid"}}}
		res, err := b.Send(ctx, []*message.Ext{m})
		if err != nil {
			t.Fatal(err)
		}
		return m, res[0].PhysicalOffset
	}
	_, off1 := send("one")
	_, off2 := send("two")
	first, err := b.Store().ReadMessage(off1)
	if err != nil {
		t.Fatal(err)
	}

	// A first failure goes to the retry topic, delayed by level 3.
	res, err := b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "billing", CommitLogOffset: off1, UniqueID: "U-one", MaxReconsumeTimes: 1, Reason: "db\ndown"})
	if err != nil || res.DeadLettered || res.Topic != "%RETRY%billing" || res.ReconsumeTimes != 1 {
		t.Fatalf("first send-back: %+v %v", res, err)
	}
	if tc, ok := b.TopicFor("%RETRY%billing"); !ok || tc.ReadQueueNums != 1 || tc.Perm != broker.PermReadWrite {
		t.Fatalf("retry topic %+v %v", tc, ok)
	}
	copyMsg, err := b.Store().LookupByMsgID(res.MsgID)
	if err != nil {
		t.Fatal(err)
	}
	p := copyMsg.Properties
	if copyMsg.Topic != message.ScheduleTopic || copyMsg.QueueID != 2 || p[message.PropertyRealTopic] != "%RETRY%billing" ||
		p[message.PropertyRetryTopic] != "orders" || p[message.PropertyOriginMessageID] != first.MsgID() ||
		p[retry.PropertyFailureReason] != "db down" || copyMsg.ReconsumeTimes != 1 || string(copyMsg.Body) != "one" {
		t.Fatalf("retry copy: topic %s queue %d props %v reconsume %d", copyMsg.Topic, copyMsg.QueueID, p, copyMsg.ReconsumeTimes)
	}

	// Past the limit (the consumer's count counts), or asked: the DLQ.
	res, err = b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "billing", CommitLogOffset: off1, ReconsumeTimes: 1, MaxReconsumeTimes: 1, Reason: "still down"})
	if err != nil || !res.DeadLettered || res.Topic != "%DLQ%billing" || res.ReconsumeTimes != 2 {
		t.Fatalf("second send-back: %+v %v", res, err)
	}
	if res, err = b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "billing", CommitLogOffset: off2, DelayLevel: -1}); err != nil || !res.DeadLettered {
		t.Fatalf("send-back to the DLQ: %+v %v", res, err)
	}

	// Bad requests change nothing.
	_, err = b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "billing", CommitLogOffset: off1, UniqueID: "U-other"})
	wantCode(t, "wrong unique id", err, pb.Code_QUERY_NOT_FOUND)
	_, err = b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "bad group", CommitLogOffset: off1})
	wantCode(t, "bad group", err, pb.Code_ILLEGAL_GROUP)
	_, err = b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "billing", CommitLogOffset: 1 << 40})
	wantCode(t, "no message", err, pb.Code_QUERY_NOT_FOUND)

	list := deadLetters(t, b, "billing", 2)
	d := list[0]
	if d.OriginTopic != "orders" || d.OriginMsgId != first.MsgID() || d.UniqueId != "U-one" || d.Reason != "still down" ||
		d.ReconsumeTimes != 2 || d.FirstFailureMs == 0 || d.FirstFailureMs > d.LastFailureMs || d.Replayed != nil {
		t.Fatalf("dead letter %+v", d)
	}
	if got, _ := listDeadLetters(b, &pb.ListDeadLettersRequest{Group: "billing", Ids: []string{"U-two"}}); len(got) != 1 || got[0].UniqueId != "U-two" {
		t.Fatalf("by id: %+v", got)
	}
	if got, _ := listDeadLetters(b, &pb.ListDeadLettersRequest{Group: "nobody"}); len(got) != 0 {
		t.Fatalf("unknown group: %+v", got)
	}

	// Marks: the first wins; a wrong id is refused.
	mark := &pb.ReplayMark{AtMs: 1000, Topic: "orders", MsgId: "NEW1"}
	if m, already, err := markReplayed(ctx, b, "billing", d.QueueOffset, d.MsgId, mark); err != nil || already || m.MsgId != "NEW1" {
		t.Fatalf("mark: %+v %v %v", m, already, err)
	}
	if m, already, err := markReplayed(ctx, b, "billing", d.QueueOffset, "", &pb.ReplayMark{AtMs: 2000, MsgId: "NEW2"}); err != nil || !already || m.MsgId != "NEW1" {
		t.Fatalf("mark again: %+v %v %v", m, already, err)
	}
	_, _, err = markReplayed(ctx, b, "billing", list[1].QueueOffset, d.MsgId, mark)
	wantCode(t, "mark with a wrong id", err, pb.Code_QUERY_NOT_FOUND)
	_, _, err = markReplayed(ctx, b, "billing", 99, "", mark)
	wantCode(t, "mark past the end", err, pb.Code_QUERY_NOT_FOUND)

	// Marks are durable: a restarted broker still knows them.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	list = deadLetters(t, b, "billing", 2)
	if r := list[0].Replayed; r == nil || r.MsgId != "NEW1" || r.AtMs != 1000 || r.Topic != "orders" {
		t.Fatalf("after restart, mark %+v", r)
	}
	if list[1].Replayed != nil {
		t.Fatalf("after restart, the unreplayed entry is marked: %+v", list[1].Replayed)
	}
	// The mark topic is internal: not a topic of the table.
	if _, ok := b.TopicFor(retry.ReplayMarkTopic); ok {
		t.Fatalf("%s is in the topic table", retry.ReplayMarkTopic)
	}
}

// TestRetryNeverEarlyWithinTheMillisecond: a retry copy sent back 0.6 ms
// into a millisecond waits its level's delay from that instant, not from
// its truncated store timestamp: it is not in the retry topic at store
// timestamp + delay + 0.3 ms, and is 1 ms after that.
func TestRetryNeverEarlyWithinTheMillisecond(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	vc := delay.NewVirtualClock(t0)
	db := startDelayBroker(t, t.TempDir(), func(o *broker.Options) {
		o.Delay.Clock = vc
		o.Store.Now, o.Store.CommitLog.Now = vc.Now, vc.Now
		o.Delay.Levels = "100ms 200ms 300ms"
	})
	ctx := context.Background()
	if err := db.b.PutTopic(broker.TopicConfig{Name: "orders", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	res, err := db.b.Send(ctx, []*message.Ext{{Message: message.Message{Topic: "orders", Body: []byte("one")}}})
	if err != nil {
		t.Fatal(err)
	}
	vc.Set(t0.Add(600 * time.Microsecond))
	failedAt := vc.Now()
	back, err := db.b.Retry().SendBack(ctx, retry.SendBackRequest{Group: "billing", CommitLogOffset: res[0].PhysicalOffset})
	if err != nil || back.Topic != message.RetryTopic("billing") {
		t.Fatalf("send-back: %+v %v", back, err)
	}
	vc.Set(t0.Add(300*time.Millisecond + 300*time.Microsecond)) // level 3: 300 ms after the truncated store time, + 0.3 ms
	// A correct broker never delivers now, so waiting cannot flake.
	time.Sleep(200 * time.Millisecond)
	if got := db.pullAll(t, back.Topic, 0, 0); len(got) != 0 {
		t.Fatalf("retry delivered at %v, %v after the failure, before the level's 300 ms", vc.Now().Format(time.StampMicro), vc.Now().Sub(failedAt))
	}
	vc.Set(t0.Add(301 * time.Millisecond))
	testutil.WaitFor(t, 5*time.Second, "the retry copy", func() error {
		if n := len(db.pullAll(t, back.Topic, 0, 0)); n != 1 {
			return fmt.Errorf("%d in %s", n, back.Topic)
		}
		return nil
	})
}
