package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	pop_ "github.com/bolide-mq/bolide/broker/pop"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// popBroker starts a broker with a topic of n queues.
func popBroker(t *testing.T, topic string, queues int32, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	b, _ := testBroker(t, mutate...)
	if err := b.CreateTopic(broker.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	return b
}

// sendN sends n messages round robin over the queues, bodies prefix0...,
// and waits until they are dispatched.
func sendN(t *testing.T, b *server.Server, topic string, queues int32, prefix string, n int, tag string) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(fmt.Sprint(prefix, i)),
			Properties: map[string]string{message.PropertyTags: tag, message.PropertyUniqueKey: fmt.Sprint("U", prefix, i)}},
			QueueID: int32(i) % queues, BornTimestamp: time.Now().UnixMilli()}
		if _, err := b.Send(ctx, []*message.Ext{m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Store().WaitDispatched(ctx, b.Store().CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
}

func body(t *testing.T, p broker.PoppedMessage) string {
	t.Helper()
	m, err := message.Decode(p.Record)
	if err != nil {
		t.Fatal(err)
	}
	return string(m.Body)
}

func wantErrCode(t *testing.T, what string, err error, code errcode.Code) {
	t.Helper()
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
}

func pop(t *testing.T, b *server.Server, req broker.PopRequest) []broker.PoppedMessage {
	t.Helper()
	out, err := b.Pop(context.Background(), req)
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	return out
}

// TestPopReceiveAck: messages handed out are invisible to the group until
// acknowledged; acks move the low watermark and the committed offset.
func TestPopReceiveAck(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "pa", 2)
	sendN(t, b, "pa", 2, "m", 10, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "pa", QueueID: -1, MaxMessages: 32, Invisible: time.Minute})
	if len(got) != 10 {
		t.Fatalf("popped %d messages, want 10", len(got))
	}
	seen := map[string]bool{}
	for _, p := range got {
		if p.Attempt != 1 || p.Handle == "" || !p.VisibleAt.After(time.Now()) {
			t.Fatalf("popped %+v", p)
		}
		seen[body(t, p)] = true
	}
	if len(seen) != 10 {
		t.Fatalf("bodies %v", seen)
	}
	// Nothing more for the group; another group gets them all.
	if again := pop(t, b, broker.PopRequest{Group: "g", Topic: "pa", QueueID: -1, Invisible: time.Minute}); len(again) != 0 {
		t.Fatalf("popped %d in-flight messages again", len(again))
	}
	if other := pop(t, b, broker.PopRequest{Group: "g2", Topic: "pa", QueueID: -1, Invisible: time.Minute}); len(other) != 10 {
		t.Fatalf("other group popped %d", len(other))
	}
	// A batch: one bad handle and one twice, each answered on its own.
	batch := []string{"bad"}
	for _, p := range got[:9] {
		batch = append(batch, p.Handle)
	}
	batch = append(batch, got[0].Handle)
	errs := b.PopAckBatch(ctx, "g", "pa", batch)
	wantErrCode(t, "bad handle in a batch", errs[0], errcode.InvalidReceiptHandle)
	wantErrCode(t, "handle twice in a batch", errs[10], errcode.InvalidReceiptHandle)
	for i, err := range errs[1:10] {
		if err != nil {
			t.Fatalf("batch ack %d: %v", i, err)
		}
	}
	if err := b.PopAck(ctx, "g", "pa", got[9].Handle); err != nil {
		t.Fatal(err)
	}
	wantErrCode(t, "second ack", b.PopAck(ctx, "g", "pa", got[0].Handle), errcode.InvalidReceiptHandle)
	for _, st := range b.PopStats("g", "pa") {
		if st.AckedOffset != 5 || st.NextOffset != 5 || st.InFlight != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
	mfs := gather(t, b)
	for name, want := range map[string]float64{"bolide_pop_acks_total": 10, "bolide_pop_inflight_messages": 0, "bolide_pop_redeliveries_total": 0} {
		if v, ok := value(t, mfs, name, map[string]string{"topic": "pa", "consumer_group": "g"}); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if v, _ := value(t, mfs, "bolide_pop_inflight_messages", map[string]string{"topic": "pa", "consumer_group": "g2"}); v != 10 {
		t.Errorf("in flight for g2: %v", v)
	}
}

// declareGroup saves a subscription group.
func declareGroup(t *testing.T, b *server.Server, group string, f func(*subgroup.Config)) {
	t.Helper()
	c := subgroup.Default(group)
	f(&c)
	if err := b.UpdateSubscriptionGroup(c); err != nil {
		t.Fatal(err)
	}
}

// TestPopLongPoll: a receive with nothing to hand out waits for a message
// to arrive, and one that times out answers empty.
func TestPopLongPoll(t *testing.T) {
	b := popBroker(t, "lp", 4)
	if got := pop(t, b, broker.PopRequest{Group: "g", Topic: "lp", QueueID: -1, Invisible: time.Minute, PollTimeout: 50 * time.Millisecond}); len(got) != 0 {
		t.Fatalf("popped %d from an empty topic", len(got))
	}
	done := make(chan []broker.PoppedMessage, 1)
	go func() {
		out, _ := b.Pop(context.Background(), broker.PopRequest{Group: "g", Topic: "lp", QueueID: -1, Invisible: time.Minute, PollTimeout: 20 * time.Second})
		done <- out
	}()
	sendN(t, b, "lp", 4, "late", 1, "")
	if got := <-done; len(got) != 1 || body(t, got[0]) != "late0" {
		t.Fatalf("long poll got %d messages", len(got))
	}
}

// TestPopInvisibilityExpiry: a message not acknowledged in time is handed
// out again with the next attempt; the old handle is then invalid. The
// parked receive is woken by the expiry itself.
func TestPopInvisibilityExpiry(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "ex", 1)
	sendN(t, b, "ex", 1, "m", 1, "")
	first := pop(t, b, broker.PopRequest{Group: "g", Topic: "ex", QueueID: 0, Invisible: 200 * time.Millisecond})
	if len(first) != 1 || first[0].Attempt != 1 {
		t.Fatalf("first pop %+v", first)
	}
	second := pop(t, b, broker.PopRequest{Group: "g", Topic: "ex", QueueID: -1, Invisible: time.Minute, PollTimeout: 20 * time.Second})
	if len(second) != 1 || second[0].Attempt != 2 || second[0].QueueOffset != first[0].QueueOffset || body(t, second[0]) != "m0" {
		t.Fatalf("redelivery %+v", second)
	}
	wantErrCode(t, "ack with the expired handle", b.PopAck(ctx, "g", "ex", first[0].Handle), errcode.InvalidReceiptHandle)
	if err := b.PopAck(ctx, "g", "ex", second[0].Handle); err != nil {
		t.Fatal(err)
	}
	st := b.PopStats("g", "ex")
	if len(st) != 1 || st[0].Redelivered != 1 || st[0].AckedOffset != 1 || st[0].InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The watermark reaches the consumer offset table.
	testutil.WaitFor(t, 10*time.Second, "the committed offset", func() error {
		if off := b.OffsetTable().Query("g", "ex", 0); off != 1 {
			return fmt.Errorf("committed %d", off)
		}
		return nil
	})
}

// TestPopChangeInvisible: a new handle per change, the old one invalid;
// a zero duration makes the message visible at once, with attempt + 1.
func TestPopChangeInvisible(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "ci", 1)
	sendN(t, b, "ci", 1, "m", 2, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "ci", QueueID: 0, MaxMessages: 1, Invisible: time.Minute})
	if len(got) != 1 {
		t.Fatal("nothing popped")
	}
	_, err := b.ChangeInvisible(ctx, "g", "ci", got[0].Handle, 13*time.Hour)
	wantErrCode(t, "13 h", err, errcode.IllegalInvisibleTime)
	_, err = b.ChangeInvisible(ctx, "g", "ci", got[0].Handle, -time.Second)
	wantErrCode(t, "negative", err, errcode.IllegalInvisibleTime)
	ch, err := b.ChangeInvisible(ctx, "g", "ci", got[0].Handle, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Handle == "" || ch.Handle == got[0].Handle || ch.Record != nil || time.Until(ch.VisibleAt) < 59*time.Minute || ch.Attempt != 1 {
		t.Fatalf("change answered %+v", ch)
	}
	wantErrCode(t, "ack with the replaced handle", b.PopAck(ctx, "g", "ci", got[0].Handle), errcode.InvalidReceiptHandle)
	_, err = b.ChangeInvisible(ctx, "g", "ci", got[0].Handle, time.Second)
	wantErrCode(t, "change with the replaced handle", err, errcode.InvalidReceiptHandle)
	ch2, err := b.ChangeInvisible(ctx, "g", "ci", ch.Handle, 0)
	if err != nil {
		t.Fatal(err)
	}
	again := pop(t, b, broker.PopRequest{Group: "g", Topic: "ci", QueueID: 0, MaxMessages: 1, Invisible: time.Minute})
	if len(again) != 1 || again[0].QueueOffset != got[0].QueueOffset || again[0].Attempt != 2 {
		t.Fatalf("after a change to 0: %+v", again)
	}
	wantErrCode(t, "ack with the handle of the change", b.PopAck(ctx, "g", "ci", ch2.Handle), errcode.InvalidReceiptHandle)
	if err := b.PopAck(ctx, "g", "ci", again[0].Handle); err != nil {
		t.Fatal(err)
	}
	// Invisible durations a receive may not ask for.
	for _, d := range []time.Duration{0, -time.Second, 12*time.Hour + time.Millisecond} {
		_, err := b.Pop(ctx, broker.PopRequest{Group: "g", Topic: "ci", QueueID: 0, Invisible: d})
		wantErrCode(t, fmt.Sprint("pop with invisible ", d), err, errcode.IllegalInvisibleTime)
	}
}

// TestPopNackBackoff: a nack makes the message visible after the group's
// backoff for the attempt.
func TestPopNackBackoff(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "nk", 1)
	declareGroup(t, b, "g", func(c *subgroup.Config) {
		// Backoff(n) reads Next[n+2].
		c.GroupRetryPolicy = subgroup.Customized([]time.Duration{time.Hour, time.Hour, 100 * time.Millisecond, time.Hour})
	})
	sendN(t, b, "nk", 1, "m", 1, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "nk", QueueID: 0, Invisible: time.Minute})
	d, err := b.PopNack(ctx, "g", "nk", got[0].Handle)
	if err != nil || d != 100*time.Millisecond {
		t.Fatalf("nack: %v %v", d, err)
	}
	again := pop(t, b, broker.PopRequest{Group: "g", Topic: "nk", QueueID: 0, Invisible: time.Minute, PollTimeout: 20 * time.Second})
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("after the nack: %+v", again)
	}
	d, err = b.PopNack(ctx, "g", "nk", again[0].Handle)
	if err != nil || d != time.Hour {
		t.Fatalf("second nack: %v %v", d, err)
	}
	wantErrCode(t, "nack with a used handle", func() error { _, err := b.PopNack(ctx, "g", "nk", again[0].Handle); return err }(), errcode.InvalidReceiptHandle)
}

// dlqBodies reads the group's dead-letter queue.
func dlqMessages(t *testing.T, b *server.Server, group string) []*message.Ext {
	t.Helper()
	if err := b.Store().WaitDispatched(context.Background(), b.Store().CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	res, err := b.Store().GetMessages(message.DLQTopic(group), 0, 0, 100, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*message.Ext
	for _, r := range res.Records {
		m, err := message.Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestPopMaxAttemptsDLQ: a message whose next delivery would exceed the
// group's maximum goes to %DLQ%<group> with its ids; PopToDLQ moves one
// at once.
func TestPopMaxAttemptsDLQ(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "dl", 1)
	declareGroup(t, b, "g", func(c *subgroup.Config) { c.RetryMaxTimes = 1 }) // 2 deliveries
	sendN(t, b, "dl", 1, "m", 1, "")
	req := broker.PopRequest{Group: "g", Topic: "dl", QueueID: 0, MaxMessages: 1, Invisible: 100 * time.Millisecond}
	first := pop(t, b, req)
	req.PollTimeout, req.Invisible = 20*time.Second, time.Minute
	second := pop(t, b, req)
	if len(first) != 1 || len(second) != 1 || second[0].Attempt != 2 || second[0].QueueOffset != 0 {
		t.Fatalf("deliveries %+v %+v", first, second)
	}
	// Visible again: the third delivery would exceed the maximum, so it is
	// dead-lettered instead.
	if _, err := b.ChangeInvisible(ctx, "g", "dl", second[0].Handle, 0); err != nil {
		t.Fatal(err)
	}
	req.PollTimeout = 0
	if third := pop(t, b, req); len(third) != 0 {
		t.Fatalf("third delivery %+v", third)
	}
	sendN(t, b, "dl", 1, "n", 1, "")
	third := pop(t, b, req)
	if len(third) != 1 || third[0].QueueOffset != 1 || third[0].Attempt != 1 {
		t.Fatalf("after the dead letter: %+v", third)
	}
	wantErrCode(t, "ack of a dead letter", b.PopAck(ctx, "g", "dl", second[0].Handle), errcode.InvalidReceiptHandle)
	if err := b.PopToDLQ(ctx, "g", "dl", third[0].Handle); err != nil {
		t.Fatal(err)
	}
	wantErrCode(t, "ack after PopToDLQ", b.PopAck(ctx, "g", "dl", third[0].Handle), errcode.InvalidReceiptHandle)
	dead := dlqMessages(t, b, "g")
	if len(dead) != 2 {
		t.Fatalf("%d dead letters", len(dead))
	}
	for i, m := range dead {
		if string(m.Body) != []string{"m0", "n0"}[i] || m.UniqueID() != []string{"Um0", "Un0"}[i] ||
			m.Properties[message.PropertyDLQOriginTopic] != "dl" || m.Properties[message.PropertyDLQOriginMessageID] == "" {
			t.Fatalf("dead letter %d: %q %v", i, m.Body, m.Properties)
		}
	}
	if st := b.PopStats("g", "dl"); st[0].InFlight != 0 || st[0].AckedOffset != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPopFIFO: a FIFO group gets one batch of a queue at a time; the queue
// is blocked while any of it is unacknowledged and invisible; the same
// attempt id gets the same batch; expired messages come again in order.
func TestPopFIFO(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "ff", 1)
	declareGroup(t, b, "g", func(c *subgroup.Config) { c.ConsumeMessageOrderly = true })
	sendN(t, b, "ff", 1, "m", 6, "")
	req := broker.PopRequest{Group: "g", Topic: "ff", QueueID: -1, MaxMessages: 2, Invisible: time.Minute, AttemptID: "a1"}
	batch := pop(t, b, req)
	if len(batch) != 2 || body(t, batch[0]) != "m0" || body(t, batch[1]) != "m1" {
		t.Fatalf("first batch %+v", batch)
	}
	req.AttemptID = "a2"
	if got := pop(t, b, req); len(got) != 0 {
		t.Fatalf("blocked queue handed out %d", len(got))
	}
	req.AttemptID = "a1"
	retry := pop(t, b, req)
	if len(retry) != 2 || retry[0].Handle != batch[0].Handle || retry[1].Handle != batch[1].Handle {
		t.Fatalf("retry of the attempt: %+v", retry)
	}
	if err := b.PopAck(ctx, "g", "ff", batch[0].Handle); err != nil {
		t.Fatal(err)
	}
	req.AttemptID = "a3"
	if got := pop(t, b, req); len(got) != 0 {
		t.Fatalf("half-acknowledged batch: handed out %d", len(got))
	}
	if _, err := b.ChangeInvisible(ctx, "g", "ff", batch[1].Handle, 0); err != nil {
		t.Fatal(err)
	}
	again := pop(t, b, req)
	if len(again) != 1 || body(t, again[0]) != "m1" || again[0].Attempt != 2 {
		t.Fatalf("redelivery %+v", again)
	}
	if err := b.PopAck(ctx, "g", "ff", again[0].Handle); err != nil {
		t.Fatal(err)
	}
	// Next batch; let it expire: the same two in order, attempt 2.
	req.AttemptID, req.Invisible = "a4", 150*time.Millisecond
	next := pop(t, b, req)
	if len(next) != 2 || body(t, next[0]) != "m2" || body(t, next[1]) != "m3" {
		t.Fatalf("second batch %+v", next)
	}
	req.AttemptID, req.Invisible, req.PollTimeout = "a5", time.Minute, 20*time.Second
	redo := pop(t, b, req)
	if len(redo) != 2 || body(t, redo[0]) != "m2" || body(t, redo[1]) != "m3" || redo[0].Attempt != 2 || redo[1].Attempt != 2 {
		t.Fatalf("expired batch again: %+v", redo)
	}
	for _, p := range redo {
		if err := b.PopAck(ctx, "g", "ff", p.Handle); err != nil {
			t.Fatal(err)
		}
	}
	req.AttemptID = "a6"
	last := pop(t, b, req)
	if len(last) != 2 || body(t, last[0]) != "m4" || body(t, last[1]) != "m5" {
		t.Fatalf("last batch %+v", last)
	}
}

// TestPopBadHandles: every kind of bad handle is INVALID_RECEIPT_HANDLE.
func TestPopBadHandles(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "bh", 1)
	if err := b.CreateTopic(broker.TopicConfig{Name: "bh2", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	sendN(t, b, "bh", 1, "m", 3, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "bh", QueueID: 0, Invisible: time.Minute})
	h := got[0].Handle
	parsed, err := pop_.DecodeHandle("g", h)
	if err != nil {
		t.Fatal(err)
	}
	other := parsed
	other.Broker = "broker-z"
	shifted := parsed
	shifted.Offset = 2 // in flight, other sequence
	for name, bad := range map[string]string{
		"empty":          "",
		"garbage":        "not a handle",
		"truncated":      h[:len(h)-3],
		"flipped":        h[:4] + "X" + h[5:],
		"version":        "9" + h[1:],
		"other broker":   pop_.EncodeHandle("g", other),
		"wrong sequence": pop_.EncodeHandle("g", shifted),
		"huge":           string(make([]byte, 4096)),
	} {
		wantErrCode(t, name, b.PopAck(ctx, "g", "bh", bad), errcode.InvalidReceiptHandle)
	}
	wantErrCode(t, "other group", b.PopAck(ctx, "g2", "bh", h), errcode.InvalidReceiptHandle)
	wantErrCode(t, "other topic", b.PopAck(ctx, "g", "bh2", h), errcode.InvalidReceiptHandle)
	_, err = b.ChangeInvisible(ctx, "g2", "bh", h, time.Second)
	wantErrCode(t, "change by another group", err, errcode.InvalidReceiptHandle)
	wantErrCode(t, "dlq by another group", b.PopToDLQ(ctx, "g2", "bh", h), errcode.InvalidReceiptHandle)
	// The handle still works for its group.
	if err := b.PopAck(ctx, "g", "bh", h); err != nil {
		t.Fatal(err)
	}
	wantErrCode(t, "acked", b.PopAck(ctx, "g", "bh", h), errcode.InvalidReceiptHandle)
	// Names and topics.
	wantErrCode(t, "illegal group", b.PopAck(ctx, "g g", "bh", h), errcode.IllegalGroup)
	_, err = b.Pop(ctx, broker.PopRequest{Group: "g", Topic: "nope", QueueID: -1, Invisible: time.Minute})
	wantErrCode(t, "unknown topic", err, errcode.TopicNotExist)
	_, err = b.Pop(ctx, broker.PopRequest{Group: "g", Topic: "bh", QueueID: -1, Invisible: time.Minute, TagExpression: "a ||| b"})
	wantErrCode(t, "bad tag expression", err, errcode.SubscriptionParseFailed)
	_, err = b.Pop(ctx, broker.PopRequest{Group: "", Topic: "bh", QueueID: -1, Invisible: time.Minute})
	wantErrCode(t, "no group", err, errcode.IllegalGroup)
	_, err = b.Pop(ctx, broker.PopRequest{Group: "g", Topic: "b h", QueueID: -1, Invisible: time.Minute})
	wantErrCode(t, "illegal topic", err, errcode.IllegalTopic)
}

// TestPopFilters: only matching messages are handed out, by tag (exactly:
// "Aa" and "BB" share a hash code) or by an SQL92 condition; the others
// count as done for the group.
func TestPopFilters(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "tf", 1, func(o *broker.Options) { o.EnablePropertyFilter = true })
	sendN(t, b, "tf", 1, "a", 3, "Aa")
	sendN(t, b, "tf", 1, "b", 3, "BB")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "tf", QueueID: -1, Invisible: time.Minute, TagExpression: "BB"})
	if len(got) != 3 || body(t, got[0]) != "b0" {
		t.Fatalf("popped %d", len(got))
	}
	if st := b.PopStats("g", "tf"); st[0].InFlight != 3 || st[0].NextOffset != 6 {
		t.Fatalf("stats %+v", st)
	}
	for i := range 4 {
		m := &message.Ext{Message: message.Message{Topic: "tf", Body: []byte(fmt.Sprint("s", i)),
			Properties: map[string]string{"n": fmt.Sprint(i)}}, BornTimestamp: time.Now().UnixMilli()}
		if _, err := b.Send(ctx, []*message.Ext{m}); err != nil {
			t.Fatal(err)
		}
	}
	// A receive answers with what is dispatched when it wakes: s3 may come
	// in a second one.
	got = nil
	for len(got) < 2 {
		more := pop(t, b, broker.PopRequest{Group: "sql", Topic: "tf", QueueID: -1, Invisible: time.Minute,
			ExpressionType: "SQL92", TagExpression: "n >= 2", PollTimeout: 10 * time.Second})
		if len(more) == 0 {
			break
		}
		got = append(got, more...)
	}
	if len(got) != 2 || body(t, got[0]) != "s2" || body(t, got[1]) != "s3" {
		t.Fatalf("SQL92 pop: %d", len(got))
	}
	_, err := b.Pop(ctx, broker.PopRequest{Group: "sql", Topic: "tf", QueueID: -1, Invisible: time.Minute, ExpressionType: "SQL92", TagExpression: "n >="})
	wantErrCode(t, "bad SQL92", err, errcode.SubscriptionParseFailed)
}

// TestPopReset: an offset reset moves POP consumption: nothing in flight,
// the next message is the one at the new offset.
func TestPopReset(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "rz", 1)
	sendN(t, b, "rz", 1, "m", 5, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "rz", QueueID: 0, MaxMessages: 3, Invisible: time.Hour})
	if len(got) != 3 {
		t.Fatalf("popped %d", len(got))
	}
	if err := b.PopAck(ctx, "g", "rz", got[0].Handle); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ResetOffset("g", "rz", 0, true, false, false); err != nil {
		t.Fatal(err)
	}
	wantErrCode(t, "ack after a reset", b.PopAck(ctx, "g", "rz", got[1].Handle), errcode.InvalidReceiptHandle)
	again := pop(t, b, broker.PopRequest{Group: "g", Topic: "rz", QueueID: 0, MaxMessages: 32, Invisible: time.Hour})
	if len(again) != 5 || body(t, again[0]) != "m0" || again[0].Attempt != 1 {
		t.Fatalf("after the reset to the earliest: %d messages", len(again))
	}
	if st := b.PopStats("g", "rz"); st[0].AckedOffset != 0 || st[0].InFlight != 5 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPopChangeWakesParkedReceive: a receive parked on a topic whose only
// message is in flight for a minute gets it when a consumer gives it back
// for 1 s (ChangeInvisible, a nack), not when its poll ends empty.
func TestPopChangeWakesParkedReceive(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "wk", 1)
	sendN(t, b, "wk", 1, "m", 1, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "wk", QueueID: -1, Invisible: time.Minute})
	if len(got) != 1 {
		t.Fatalf("popped %d", len(got))
	}
	parked := make(chan []broker.PoppedMessage, 1)
	go func() {
		out, err := b.Pop(ctx, broker.PopRequest{Group: "g", Topic: "wk", QueueID: -1, Invisible: time.Minute, PollTimeout: 8 * time.Second})
		if err != nil {
			t.Error(err)
		}
		parked <- out
	}()
	time.Sleep(300 * time.Millisecond) // let it park first (it gets the message either way, once visible)
	if _, err := b.ChangeInvisible(ctx, "g", "wk", got[0].Handle, time.Second); err != nil {
		t.Fatal(err)
	}
	if out := <-parked; len(out) != 1 || out[0].Attempt != 2 || body(t, out[0]) != "m0" {
		t.Fatalf("the parked receive got %d messages; want m0 again, attempt 2, before its poll ended", len(out))
	}
}
