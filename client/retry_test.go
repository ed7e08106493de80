package client

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/message"
)

// retryLevels are short delay levels for retry tests: level 3 (the first
// retry) is 300 ms, level 4 400 ms, level 5 500 ms.
const retryLevels = "100ms 200ms 300ms 400ms 500ms 600ms 700ms 800ms 900ms 1s 1s 1s 1s 1s 1s 1s 1s 1s"

// startRetryEnv starts a cluster whose brokers use the given delay levels.
func startRetryEnv(t *testing.T, levels string) *env {
	t.Helper()
	return startEnvWith(t, cluster.Options{Broker: func(o *broker.Options) { o.Delay.Levels = levels }})
}

// delivery is one listener call for one message.
type delivery struct {
	topic, uniqueID, originID string
	reconsume                 int32
	at                        time.Time
}

type deliveries struct {
	mu  sync.Mutex
	byU map[string][]delivery
}

func (d *deliveries) add(m *MessageExt) []delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byU == nil {
		d.byU = make(map[string][]delivery)
	}
	d.byU[m.MsgID] = append(d.byU[m.MsgID], delivery{topic: m.Topic, uniqueID: m.MsgID, originID: m.OriginOffsetMsgID(),
		reconsume: m.ReconsumeTimes, at: time.Now()})
	return d.byU[m.MsgID]
}

func (d *deliveries) of(id string) []delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]delivery(nil), d.byU[id]...)
}

// dlqByUnique lists a group's dead letters by unique id.
func (e *env) dlqByUnique(group string) map[string][]DeadLetter {
	e.t.Helper()
	list, err := e.admin.DeadLetters(context.Background(), group, DeadLetterQuery{})
	if err != nil {
		e.t.Fatalf("dead letters: %v", err)
	}
	out := make(map[string][]DeadLetter)
	for _, d := range list {
		out[d.MsgID] = append(out[d.MsgID], d)
	}
	return out
}

// waitNoLag waits until the group has consumed everything but its DLQ.
func (e *env) waitNoLag(group string) {
	e.t.Helper()
	e.waitFor(30*time.Second, "group "+group+" caught up", func() error {
		st, err := e.admin.ConsumeStats(context.Background(), group, "")
		if err != nil {
			return err
		}
		for _, q := range st.Queues {
			if !message.IsDLQTopic(q.Queue.Topic) && q.Lag > 0 {
				return fmt.Errorf("%s lags %d", q.Queue, q.Lag)
			}
		}
		return nil
	})
}

func TestRetryThenDeadLetter(t *testing.T) {
	e := startRetryEnv(t, retryLevels)
	topic := e.topic(2)
	p := e.producer()
	const group = "retry-dlq"
	var got deliveries
	e.push(group, topic, "*", ConcurrentListener(func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		m := msgs[0]
		got.add(m)
		switch m.Tag {
		case "fail":
			SetConsumeFailureReason(ctx, "always fails")
			return ConsumeRetryLater
		case "once":
			if m.ReconsumeTimes == 0 {
				return ConsumeRetryLater
			}
		case "panic":
			if m.ReconsumeTimes == 0 {
				panic("listener bug")
			}
		}
		return ConsumeSuccess
	}), WithConsumeFrom(ConsumeFromFirst), WithMaxReconsumeTimes(2))
	tags := []string{"fail", "once", "ok", "panic"}
	res := e.sendN(p, topic, 8, func(i int) *Message {
		return &Message{Topic: topic, Tag: tags[i%4], Keys: []string{"k" + strconv.Itoa(i)}, Body: []byte("m" + strconv.Itoa(i))}
	})
	e.waitFor(60*time.Second, "failing messages dead-lettered", func() error {
		dlq := e.dlqByUnique(group)
		for i, r := range res {
			if tags[i%4] == "fail" && len(dlq[r.MsgID]) == 0 {
				return fmt.Errorf("message %d not in the DLQ yet", i)
			}
		}
		return nil
	})
	e.waitNoLag(group)
	dlq := e.dlqByUnique(group)
	levels := []time.Duration{300 * time.Millisecond, 400 * time.Millisecond}
	for i, r := range res {
		ds := got.of(r.MsgID)
		switch tags[i%4] {
		case "fail":
			if len(ds) != 3 {
				t.Fatalf("failing message %d delivered %d times, want 3: %+v", i, len(ds), ds)
			}
			for k, d := range ds {
				if d.reconsume != int32(k) || d.topic != topic || d.uniqueID != r.MsgID || d.originID != r.OffsetMsgID {
					t.Errorf("message %d delivery %d: reconsume %d topic %s unique %s origin %s; want %d %s %s %s",
						i, k, d.reconsume, d.topic, d.uniqueID, d.originID, k, topic, r.MsgID, r.OffsetMsgID)
				}
				if k > 0 && d.at.Sub(ds[k-1].at) < levels[k-1] {
					t.Errorf("message %d: attempt %d came %v after attempt %d, before the level's %v", i, k, d.at.Sub(ds[k-1].at), k-1, levels[k-1])
				}
			}
			if n := len(dlq[r.MsgID]); n != 1 {
				t.Fatalf("failing message %d has %d DLQ copies, want 1", i, n)
			}
			d := dlq[r.MsgID][0]
			if d.OriginTopic != topic || d.OriginOffsetMsgID != r.OffsetMsgID || d.Reason != "always fails" || d.ReconsumeTimes != 3 ||
				string(d.Message.Body) != "m"+strconv.Itoa(i) || d.Message.Tag != "fail" || d.Message.Topic != message.DLQTopic(group) {
				t.Errorf("dead letter of message %d: %+v", i, d)
			}
			if d.FirstFailure.After(d.LastFailure) || d.FirstFailure.Before(ds[0].at.Add(-time.Second)) {
				t.Errorf("dead letter of message %d: first failure %v, last %v", i, d.FirstFailure, d.LastFailure)
			}
		case "once", "panic":
			if len(ds) != 2 || ds[1].reconsume != 1 || ds[1].topic != topic || ds[1].at.Sub(ds[0].at) < levels[0] {
				t.Errorf("message %d (%s): deliveries %+v, want 2 with the second a retry after %v", i, tags[i%4], ds, levels[0])
			}
			if len(dlq[r.MsgID]) != 0 {
				t.Errorf("message %d (%s) is in the DLQ", i, tags[i%4])
			}
		default:
			if len(ds) != 1 {
				t.Errorf("message %d delivered %d times, want 1", i, len(ds))
			}
		}
	}
	// The retry and DLQ topics are routed and count in the group's lag.
	for _, tp := range []string{message.RetryTopic(group), message.DLQTopic(group)} {
		if _, err := e.admin.Route(context.Background(), tp); err != nil {
			t.Errorf("route of %s: %v", tp, err)
		}
	}
	st, err := e.admin.ConsumeStats(context.Background(), group, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	for _, q := range st.Queues {
		seen[q.Queue.Topic] += q.Lag
	}
	if _, ok := seen[message.RetryTopic(group)]; !ok {
		t.Errorf("group lag lists no retry topic: %v", seen)
	}
	if seen[message.DLQTopic(group)] != 2 {
		t.Errorf("group lag of the DLQ: %v, want 2", seen)
	}
}

func TestOrderlyRetryInPlaceThenDeadLetter(t *testing.T) {
	e := startRetryEnv(t, retryLevels)
	topic := e.topic(1)
	p := e.producer()
	const group = "orderly-dlq"
	var got deliveries
	var mu sync.Mutex
	var order []string
	e.push(group, topic, "*", OrderlyListener(func(ctx context.Context, msgs []*MessageExt) OrderlyResult {
		m := msgs[0]
		got.add(m)
		mu.Lock()
		order = append(order, string(m.Body))
		mu.Unlock()
		if m.Tag == "fail" {
			SetConsumeFailureReason(ctx, "poison")
			return OrderlySuspend
		}
		return OrderlySuccess
	}), WithConsumeFrom(ConsumeFromFirst), WithMaxReconsumeTimes(2))
	res := e.sendN(p, topic, 3, func(i int) *Message {
		tag := "ok"
		if i == 1 {
			tag = "fail"
		}
		return &Message{Topic: topic, Tag: tag, Body: []byte(strconv.Itoa(i))}
	})
	e.waitFor(30*time.Second, "the message after the poison one consumed", func() error {
		if len(got.of(res[2].MsgID)) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	ds := got.of(res[1].MsgID)
	if len(ds) != 3 {
		t.Fatalf("poison message delivered %d times, want 3", len(ds))
	}
	for k, d := range ds {
		if d.reconsume != int32(k) {
			t.Errorf("delivery %d: reconsume %d", k, d.reconsume)
		}
	}
	mu.Lock()
	if fmt.Sprint(order) != "[0 1 1 1 2]" {
		t.Errorf("order %v, want [0 1 1 1 2]", order)
	}
	mu.Unlock()
	// The DLQ is routed and its entry dispatched shortly after the send-back.
	e.waitFor(30*time.Second, "the poison message in the DLQ", func() error {
		dlq := e.dlqByUnique(group)
		if len(dlq) != 1 || len(dlq[res[1].MsgID]) != 1 || dlq[res[1].MsgID][0].Reason != "poison" {
			return fmt.Errorf("DLQ %+v, want the poison message once", dlq)
		}
		return nil
	})
}

// TestMaxReconsumeTimesZero: WithMaxReconsumeTimes(0) means no retries —
// the first failure of a concurrent or an orderly listener dead-letters the
// message — while a negative value keeps the broker's default.
func TestMaxReconsumeTimesZero(t *testing.T) {
	if o, _ := buildOptions([]ConsumerOption{WithMaxReconsumeTimes(-1)}, ConsumerOption.applyConsumer); o.maxReconsumeTimes >= 0 {
		t.Fatalf("WithMaxReconsumeTimes(-1) = %d, want the broker's default (< 0)", o.maxReconsumeTimes)
	}
	if o, _ := buildOptions[ConsumerOption](nil, ConsumerOption.applyConsumer); o.maxReconsumeTimes >= 0 {
		t.Fatalf("default max reconsume times %d, want the broker's default (< 0)", o.maxReconsumeTimes)
	}
	e := startRetryEnv(t, retryLevels)
	for _, orderly := range []bool{false, true} {
		topic := "no-retries-" + fmt.Sprint(orderly)
		if err := e.admin.CreateTopic(context.Background(), TopicSpec{Name: topic, Queues: 1}); err != nil {
			t.Fatal(err)
		}
		group := "no-retries-" + fmt.Sprint(orderly)
		var got deliveries
		var l Listener = ErrorListener(func(_ context.Context, msgs []*MessageExt) error {
			got.add(msgs[0])
			return fmt.Errorf("always fails")
		})
		if orderly {
			l = OrderlyListener(func(ctx context.Context, msgs []*MessageExt) OrderlyResult {
				got.add(msgs[0])
				SetConsumeFailureReason(ctx, "always fails")
				return OrderlySuspend
			})
		}
		e.push(group, topic, "*", l, WithConsumeFrom(ConsumeFromFirst), WithMaxReconsumeTimes(0))
		res := e.sendN(e.producer(), topic, 2, nil)
		// Done when both are dead letters, or as soon as one is retried.
		e.waitFor(30*time.Second, "failed messages dead-lettered", func() error {
			dlq := e.dlqByUnique(group)
			for _, r := range res {
				if len(got.of(r.MsgID)) > 1 {
					return nil
				}
			}
			for i, r := range res {
				if len(dlq[r.MsgID]) == 0 {
					return fmt.Errorf("message %d not in the DLQ yet (%d deliveries)", i, len(got.of(r.MsgID)))
				}
			}
			return nil
		})
		dlq := e.dlqByUnique(group)
		for i, r := range res {
			if ds := got.of(r.MsgID); len(ds) != 1 {
				t.Errorf("orderly %v: message %d delivered %d times, want once: %+v", orderly, i, len(ds), ds)
			}
			if d := dlq[r.MsgID]; len(d) != 1 || d[0].Reason != "always fails" {
				t.Errorf("orderly %v: message %d dead letters %+v, want one", orderly, i, d)
			}
		}
	}
}

func TestConsumeTimeoutSendsBack(t *testing.T) {
	e := startRetryEnv(t, retryLevels)
	topic := e.topic(1)
	p := e.producer()
	var got deliveries
	e.push("timeout-g", topic, "*", ErrorListener(func(ctx context.Context, msgs []*MessageExt) error {
		if len(got.add(msgs[0])) == 1 {
			<-ctx.Done() // stuck until the consume timeout
			return ctx.Err()
		}
		return nil
	}), WithConsumeFrom(ConsumeFromFirst), WithConsumeTimeout(300*time.Millisecond))
	res := e.sendN(p, topic, 1, nil)
	e.waitFor(30*time.Second, "redelivery after the consume timeout", func() error {
		if ds := got.of(res[0].MsgID); len(ds) < 2 {
			return fmt.Errorf("%d deliveries", len(ds))
		}
		return nil
	})
	e.waitNoLag("timeout-g")
	ds := got.of(res[0].MsgID)
	if len(ds) != 2 || ds[1].reconsume != 1 || ds[1].topic != topic {
		t.Fatalf("deliveries %+v", ds)
	}
	if dlq := e.dlqByUnique("timeout-g"); len(dlq) != 0 {
		t.Fatalf("DLQ %+v", dlq)
	}
}

// TestRetryManyMessagesNoneLost: of 10 000 messages 1 % always fail and
// 5 % fail once; each ends either consumed or dead-lettered, never both,
// never neither.
func TestRetryManyMessagesNoneLost(t *testing.T) {
	e := startRetryEnv(t, "50ms 50ms 100ms 150ms 200ms 250ms 300ms 350ms 400ms 450ms 500ms 1s 1s 1s 1s 1s 1s 1s")
	topic := e.topic(4)
	p := e.producer()
	const (
		group = "many-retry"
		total = 10000
	)
	kind := func(i int) string {
		switch {
		case i%100 == 7:
			return "fail"
		case i%20 == 3:
			return "once"
		}
		return "ok"
	}
	var mu sync.Mutex
	consumed := make(map[string]int) // body → successful consumptions
	attempts := 0
	e.push(group, topic, "*", ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		m := msgs[0]
		mu.Lock()
		defer mu.Unlock()
		attempts++
		switch m.Tag {
		case "fail":
			return ConsumeRetryLater
		case "once":
			if m.ReconsumeTimes == 0 {
				return ConsumeRetryLater
			}
		}
		consumed[string(m.Body)]++
		return ConsumeSuccess
	}), WithConsumeFrom(ConsumeFromFirst), WithMaxReconsumeTimes(2))
	var wantFail, wantOK int
	for b := 0; b < total/100; b++ {
		batch := make([]*Message, 100)
		for j := range batch {
			i := b*100 + j
			batch[j] = &Message{Topic: topic, Tag: kind(i), Body: []byte(strconv.Itoa(i))}
			if kind(i) == "fail" {
				wantFail++
			} else {
				wantOK++
			}
		}
		if _, err := p.SendBatch(context.Background(), batch); err != nil {
			t.Fatalf("send batch %d: %v", b, err)
		}
	}
	dlqBodies := func() map[string]int {
		list, err := e.admin.DeadLetters(context.Background(), group, DeadLetterQuery{})
		if err != nil {
			t.Fatalf("dead letters: %v", err)
		}
		out := make(map[string]int)
		for _, d := range list {
			out[string(d.Message.Body)]++
		}
		return out
	}
	e.waitFor(60*time.Second, "every message consumed or dead-lettered", func() error {
		mu.Lock()
		n := len(consumed)
		mu.Unlock()
		if d := len(dlqBodies()); n+d < total {
			return fmt.Errorf("%d consumed, %d dead-lettered of %d", n, d, total)
		}
		return nil
	})
	e.waitNoLag(group)
	dlq := dlqBodies()
	mu.Lock()
	defer mu.Unlock()
	var lost, both, dupConsumed, dupDLQ int
	for i := 0; i < total; i++ {
		b := strconv.Itoa(i)
		c, d := consumed[b], dlq[b]
		switch {
		case c == 0 && d == 0:
			lost++
		case c > 0 && d > 0:
			both++
		}
		if c > 1 {
			dupConsumed++
		}
		if d > 1 {
			dupDLQ++
		}
		if (kind(i) == "fail") != (d > 0) {
			t.Errorf("message %d (%s): consumed %d, dead-lettered %d", i, kind(i), c, d)
		}
	}
	t.Logf("%d messages: %d consumed (want %d), %d dead-lettered (want %d), %d listener calls; lost %d, both %d, consumed twice %d, dead-lettered twice %d",
		total, len(consumed), wantOK, len(dlq), wantFail, attempts, lost, both, dupConsumed, dupDLQ)
	if lost != 0 || both != 0 || dupDLQ != 0 || len(consumed) != wantOK || len(dlq) != wantFail {
		t.Fatalf("lost %d, both %d, dead-lettered twice %d", lost, both, dupDLQ)
	}
}

// TestSendBackFailureRetriesLocally: while the broker cannot take a failed
// message back, the consumer delivers it again itself, counting attempts,
// and never drops it; once send-back works the broker keeps the count.
func TestSendBackFailureRetriesLocally(t *testing.T) {
	e := startRetryEnv(t, retryLevels)
	topic := e.topic(1)
	p := e.producer()
	const group = "sendback-fails"
	var hookCalls sync.Map // unique id → failed send-backs
	hook := func(g string, m *MessageExt) error {
		if g != group {
			return nil
		}
		n, _ := hookCalls.LoadOrStore(m.MsgID, new(int))
		if *n.(*int) < 2 {
			*n.(*int)++
			return ErrServiceNotAvailable
		}
		return nil
	}
	sendBackHook.Store(&hook)
	t.Cleanup(func() { sendBackHook.Store(nil) })
	var got deliveries
	e.push(group, topic, "*", ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		if len(got.add(msgs[0])) < 4 {
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	}), WithConsumeFrom(ConsumeFromFirst), WithConsumeGoroutines(1))
	res := e.sendN(p, topic, 1, nil)
	e.waitFor(30*time.Second, "consumed on the fourth delivery", func() error {
		if ds := got.of(res[0].MsgID); len(ds) < 4 {
			return fmt.Errorf("%d deliveries", len(ds))
		}
		return nil
	})
	e.waitNoLag(group)
	ds := got.of(res[0].MsgID)
	if len(ds) != 4 {
		t.Fatalf("%d deliveries, want 4", len(ds))
	}
	// Two local redeliveries (send-back failed), then one through the
	// retry topic that continues the count.
	for k, d := range ds {
		if d.reconsume != int32(k) || d.topic != topic {
			t.Errorf("delivery %d: reconsume %d topic %s", k, d.reconsume, d.topic)
		}
	}
	if dlq := e.dlqByUnique(group); len(dlq) != 0 {
		t.Fatalf("DLQ %+v", dlq)
	}
}
