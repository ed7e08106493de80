package rocketmqgo_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The RocketMQ push consumer: concurrent and orderly listeners, tags,
// broadcasting, retries into the dead-letter queue.

func TestPushConcurrent(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "push", 4)
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 60 {
			msgs = append(msgs, testMessage(topic, i, "push"))
		}
		ss := sendAll(t, c, p, msgs[:30])
		col := &collector{}
		startPushConsumer(t, c, uniq("pushg"), topic, "*", col.listener("push"),
			consumer.WithConsumeGoroutineNums(8))
		// Half sent before the consumer started, half after.
		ss = append(ss, sendAll(t, c, p, msgs[30:])...)
		col.waitDistinct(t, len(ss), 30*time.Second)
		time.Sleep(500 * time.Millisecond) // any duplicate would show now
		got := col.byMsgID()
		for _, s := range ss {
			d := got[s.res.MsgID]
			if len(d) != 1 {
				t.Errorf("message %s consumed %d times", s.res.MsgID, len(d))
			}
			if len(d) > 0 {
				checkDelivered(t, c, s, d[0].msg)
			}
		}
		if len(got) != len(ss) {
			t.Errorf("consumed %d distinct messages, sent %d", len(got), len(ss))
		}
	})
}

func TestPushOrderly(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "orderly", 4)
		p := newProducer(t, c, producer.WithQueueSelector(producer.NewHashQueueSelector()))
		keys := []string{"k1", "k2", "k3", "k4", "k5", "k6"}
		var (
			mu       sync.Mutex
			lastSeq  = map[string]int{}
			count    = map[string]int{}
			inQueue  = map[string]bool{}
			problems []string
			total    atomic.Int64
		)
		sendOrdered := func(from, to int) {
			for i := from; i < to; i++ {
				k := keys[i%len(keys)]
				m := testMessage(topic, i, "ord")
				m.WithShardingKey(k)
				m.WithProperty("shard", k)
				if _, err := p.SendSync(context.Background(), m); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
		}
		const n = 120
		sendOrdered(0, n/2)
		startPushConsumer(t, c, uniq("orderlyg"), topic, "*",
			func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				if _, ok := primitive.GetOrderlyCtx(ctx); !ok {
					mu.Lock()
					problems = append(problems, "listener called without an orderly context")
					mu.Unlock()
				}
				for _, m := range msgs {
					q := fmt.Sprintf("%s/%d", m.Queue.BrokerName, m.Queue.QueueId)
					mu.Lock()
					if inQueue[q] {
						problems = append(problems, "two listeners at once on queue "+q)
					}
					inQueue[q] = true
					k := m.GetProperty("shard")
					s, _ := strconv.Atoi(m.GetProperty("seq"))
					if prev, ok := lastSeq[k]; ok && s <= prev {
						problems = append(problems, fmt.Sprintf("key %s: seq %d after %d", k, s, prev))
					}
					lastSeq[k] = s
					count[m.MsgId]++
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					inQueue[q] = false
					mu.Unlock()
					total.Add(1)
				}
				return consumer.ConsumeSuccess, nil
			}, consumer.WithConsumerOrder(true))
		sendOrdered(n/2, n)
		if !waitFor(30*time.Second, func() bool { return total.Load() >= n }) {
			t.Fatalf("orderly consumer got %d of %d messages", total.Load(), n)
		}
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Error(p)
		}
		if len(count) != n {
			t.Errorf("%d distinct messages, want %d", len(count), n)
		}
		for id, k := range count {
			if k != 1 {
				t.Errorf("message %s consumed %d times", id, k)
			}
		}
	})
}

func TestPushTagFilter(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "tags", 4)
		p := newProducer(t, c)
		tags := []string{"TagA", "TagB", "TagC", ""}
		var msgs []*primitive.Message
		for i := range 40 {
			msgs = append(msgs, testMessage(topic, i, tags[i%len(tags)]))
		}
		ss := sendAll(t, c, p, msgs)
		want := func(expr []string) map[string]sent {
			m := map[string]sent{}
			for _, s := range ss {
				if expr == nil || slices.Contains(expr, s.msg.GetTags()) {
					m[s.res.MsgID] = s
				}
			}
			return m
		}
		cases := []struct {
			expr string
			tags []string
		}{
			{"TagA || TagC", []string{"TagA", "TagC"}},
			{"TagB", []string{"TagB"}},
			{"*", nil},
		}
		cols := make([]*collector, len(cases))
		for i, tc := range cases {
			cols[i] = &collector{}
			startPushConsumer(t, c, uniq("tagg"), topic, tc.expr, cols[i].listener(tc.expr))
		}
		for i, tc := range cases {
			w := want(tc.tags)
			cols[i].waitDistinct(t, len(w), 30*time.Second)
		}
		time.Sleep(500 * time.Millisecond)
		for i, tc := range cases {
			w := want(tc.tags)
			got := cols[i].byMsgID()
			if len(got) != len(w) {
				t.Errorf("%q: consumed %d messages, want %d", tc.expr, len(got), len(w))
			}
			for id, d := range got {
				s, ok := w[id]
				if !ok {
					t.Errorf("%q: consumed message %s with tag %q", tc.expr, id, d[0].msg.GetTags())
					continue
				}
				if len(d) != 1 {
					t.Errorf("%q: message %s consumed %d times", tc.expr, id, len(d))
				}
				checkDelivered(t, c, s, d[0].msg)
			}
		}
	})
}

func TestPushBroadcasting(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "bcast", 4)
		group := uniq("bcastg")
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 30 {
			msgs = append(msgs, testMessage(topic, i, "b"))
		}
		ss := sendAll(t, c, p, msgs[:15])
		cols := []*collector{{}, {}}
		for i, col := range cols {
			startPushConsumer(t, c, group, topic, "*", col.listener(fmt.Sprintf("member-%d", i)),
				consumer.WithConsumerModel(consumer.BroadCasting))
		}
		ss = append(ss, sendAll(t, c, p, msgs[15:])...)
		for i, col := range cols {
			col.waitDistinct(t, len(ss), 30*time.Second)
			time.Sleep(300 * time.Millisecond)
			got := col.byMsgID()
			if len(got) != len(ss) {
				t.Errorf("member %d consumed %d distinct messages, want %d", i, len(got), len(ss))
			}
			for _, s := range ss {
				d := got[s.res.MsgID]
				if len(d) != 1 {
					t.Errorf("member %d consumed %s %d times", i, s.res.MsgID, len(d))
				}
				if len(d) > 0 {
					checkDelivered(t, c, s, d[0].msg)
				}
			}
		}
	})
}

func TestRetryThenDeadLetter(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "retry", 2)
		group := uniq("retryg")
		prepareGroup(t, c, group, topic)
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 3 {
			msgs = append(msgs, testMessage(topic, i, "fail"))
		}
		ss := sendAll(t, c, p, msgs)
		col := &collector{}
		startPushConsumer(t, c, group, topic, "*",
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				col.add("push", msgs...)
				return consumer.ConsumeRetryLater, nil
			}, consumer.WithMaxReconsumeTimes(2))
		// Three deliveries each (reconsume times 0, 1, 2), then the DLQ.
		if !waitFor(60*time.Second, func() bool { return col.len() >= 3*len(ss) }) {
			t.Fatalf("%d deliveries of %d failing messages, want %d", col.len(), len(ss), 3*len(ss))
		}
		dl := waitDeadLetters(t, c, group, len(ss), 30*time.Second)
		for _, d := range col.all() {
			t.Logf("delivery of %s at %s: reconsume times %d", d.msg.MsgId, d.at.Format("15:04:05.000"), d.msg.ReconsumeTimes)
		}
		time.Sleep(2 * time.Second) // a fourth delivery would come by now
		got := col.byMsgID()
		for _, s := range ss {
			d := got[s.res.MsgID]
			var times []int32
			for _, x := range d {
				times = append(times, x.msg.ReconsumeTimes)
				if x.msg.Topic != topic {
					t.Errorf("%s: a delivery on topic %q, want %q (RETRY_TOPIC restored)", s.res.MsgID, x.msg.Topic, topic)
				}
				if string(x.msg.Body) != string(s.msg.Body) || x.msg.GetTags() != s.msg.GetTags() || x.msg.GetKeys() != s.msg.GetKeys() ||
					x.msg.GetProperty("color") != s.msg.GetProperty("color") {
					t.Errorf("%s: retried copy differs: body %q tag %q keys %q", s.res.MsgID, x.msg.Body, x.msg.GetTags(), x.msg.GetKeys())
				}
			}
			if !slices.Equal(times, []int32{0, 1, 2}) {
				t.Errorf("%s: delivered with reconsume times %v, want [0 1 2]", s.res.MsgID, times)
			}
			if len(d) > 0 && d[0].msg.QueueOffset != s.res.QueueOffset {
				t.Errorf("%s: first delivery at offset %d, sent at %d", s.res.MsgID, d[0].msg.QueueOffset, s.res.QueueOffset)
			}
		}
		// The Bolide SDK sees the dead letters.
		byID := map[string]bool{}
		for _, d := range dl {
			byID[sdkDeadLetterMsgID(d)] = true
			if d.OriginTopic != topic || d.ReconsumeTimes != 3 {
				t.Errorf("dead letter %s: origin topic %q reconsume times %d, want %q and 3", sdkDeadLetterMsgID(d), d.OriginTopic, d.ReconsumeTimes, topic)
			}
		}
		for _, s := range ss {
			if !byID[s.res.MsgID] {
				t.Errorf("message %s not in %%DLQ%%%s (SDK)", s.res.MsgID, group)
			}
		}
		// And so does the RocketMQ pull consumer, reading %DLQ%<group>.
		dlq := indexByMsgID(t, flatten(readTopic(t, c, "%DLQ%"+group, len(ss))))
		if len(dlq) != len(ss) {
			t.Errorf("%%DLQ%%%s holds %d messages, want %d", group, len(dlq), len(ss))
		}
		for _, s := range ss {
			m, ok := dlq[s.res.MsgID]
			if !ok {
				t.Errorf("message %s not read from %%DLQ%%%s", s.res.MsgID, group)
				continue
			}
			if m.Topic != "%DLQ%"+group || string(m.Body) != string(s.msg.Body) || m.GetTags() != s.msg.GetTags() ||
				m.GetKeys() != s.msg.GetKeys() || m.GetProperty("color") != s.msg.GetProperty("color") {
				t.Errorf("dead letter %s: topic %q body %q tag %q keys %q color %q", s.res.MsgID, m.Topic, m.Body, m.GetTags(), m.GetKeys(), m.GetProperty("color"))
			}
			if m.GetProperty(primitive.PropertyRetryTopic) != topic {
				t.Errorf("dead letter %s: RETRY_TOPIC %q, want %q", s.res.MsgID, m.GetProperty(primitive.PropertyRetryTopic), topic)
			}
			if m.ReconsumeTimes != 3 {
				t.Errorf("dead letter %s: ReconsumeTimes %d, want 3", s.res.MsgID, m.ReconsumeTimes)
			}
		}
	})
}

// prepareGroup has the brokers create group's retry topic (a clustering
// consumer's heartbeat does) and waits until the NameServer routes it. The
// RocketMQ client reads the route of %RETRY%<group> when it starts, before
// its first heartbeat, and then only every 30 s: without this, a brand-new
// group's first retries wait up to 30 s (as with Apache RocketMQ's broker).
// Call it before anything is sent to topic.
func prepareGroup(t testing.TB, c *cluster, group, topic string) {
	t.Helper()
	pc := startPushConsumer(t, c, group, topic, "*", func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		t.Errorf("the warm-up consumer of %s got a message", group)
		return consumer.ConsumeRetryLater, nil
	})
	defer func() { _ = pc.Shutdown() }()
	if !waitFor(15*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := c.Admin.Route(ctx, "%RETRY%"+group)
		return err == nil && len(r.Queues) == len(c.Brokers)
	}) {
		t.Errorf("%%RETRY%%%s is not routed on every broker 15 s after its consumer started", group)
	}
}

// TestConsumeFromWhere starts new groups on a topic that already holds
// messages: from the last offset (GET_MAX_OFFSET: nothing old), and from a
// timestamp (SEARCH_OFFSET_BY_TIMESTAMP: what was stored since).
func TestConsumeFromWhere(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "fromwhere", 2)
		p := newProducer(t, c, producer.WithQueueSelector(producer.NewManualQueueSelector()))
		var mqs []*primitive.MessageQueue
		for _, b := range c.Brokers {
			for q := range 2 {
				mqs = append(mqs, &primitive.MessageQueue{Topic: topic, BrokerName: b.Name, QueueId: q})
			}
		}
		seq := 0
		send := func(tag string, perQueue int) map[string]bool {
			ids := map[string]bool{}
			for range perQueue {
				for _, mq := range mqs {
					m := testMessage(topic, seq, tag)
					seq++
					m.Queue = mq
					res, err := p.SendSync(context.Background(), m)
					if err != nil {
						t.Fatalf("send: %v", err)
					}
					ids[res.MsgID] = true
				}
			}
			return ids
		}
		old := send("old", 3)
		// The timestamp has a one-second grain (yyyyMMddHHmmss, UTC).
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 200*time.Millisecond)))
		mark := time.Now().Truncate(time.Second)
		recent := send("recent", 2)
		storedCount(t, c, topic)

		// From the last offset: a probe on every queue shows the consumer
		// is at the end of each; then nothing old, everything new.
		colLast := &collector{}
		startPushConsumer(t, c, uniq("lastg"), topic, "*", colLast.listener("last"),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset))
		probed := map[int]bool{}
		deadline := time.Now().Add(30 * time.Second)
		for len(probed) < len(mqs) && time.Now().Before(deadline) {
			for i, mq := range mqs {
				if probed[i] {
					continue
				}
				m := primitive.NewMessage(topic, []byte("probe"))
				m.WithTag("probe")
				m.Queue = mq
				if _, err := p.SendSync(context.Background(), m); err != nil {
					t.Fatalf("probe: %v", err)
				}
			}
			time.Sleep(300 * time.Millisecond)
			for _, d := range colLast.all() {
				if d.msg.GetTags() == "probe" {
					for i, mq := range mqs {
						if d.msg.Queue.BrokerName == mq.BrokerName && d.msg.Queue.QueueId == mq.QueueId {
							probed[i] = true
						}
					}
				}
			}
		}
		if len(probed) < len(mqs) {
			t.Fatalf("the consumer from the last offset got probes on %d of %d queues", len(probed), len(mqs))
		}
		fresh := send("fresh", 2)
		if !waitFor(30*time.Second, func() bool {
			n := 0
			for id := range colLast.byMsgID() {
				if fresh[id] {
					n++
				}
			}
			return n == len(fresh)
		}) {
			t.Errorf("the consumer from the last offset did not get every new message")
		}
		for id, d := range colLast.byMsgID() {
			if old[id] || recent[id] {
				t.Errorf("the consumer from the last offset got %s (%s), stored before it started", id, d[0].msg.GetTags())
			}
			if fresh[id] && len(d) != 1 {
				t.Errorf("message %s consumed %d times", id, len(d))
			}
		}

		// From the mark: the recent and fresh ones, none older.
		colTS := &collector{}
		startPushConsumer(t, c, uniq("tsg"), topic, "*", colTS.listener("ts"),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromTimestamp),
			consumer.WithConsumeTimestamp(mark.UTC().Format("20060102150405")))
		want := len(recent) + len(fresh) + len(probed)
		if !waitFor(30*time.Second, func() bool { return colTS.distinct() >= want }) {
			t.Errorf("the consumer from %v got %d messages, want %d at least", mark, colTS.distinct(), want)
		}
		time.Sleep(300 * time.Millisecond)
		for id, d := range colTS.byMsgID() {
			if old[id] {
				t.Errorf("the consumer from %v got %s, stored before it", mark, id)
			}
			if len(d) != 1 {
				t.Errorf("message %s consumed %d times", id, len(d))
			}
		}
		for id := range recent {
			if len(colTS.byMsgID()[id]) == 0 {
				t.Errorf("the consumer from %v did not get %s, stored after it", mark, id)
			}
		}
	})
}

// TestOrderlyHandover: an orderly consumer stops (it unlocks its queues
// and commits); the next member of its group locks them at once and goes
// on in order from the committed offsets.
func TestOrderlyHandover(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "ordhand", 2)
		group := uniq("ordhandg")
		p := newProducer(t, c, producer.WithQueueSelector(producer.NewHashQueueSelector()))
		keys := []string{"a", "b", "c", "d", "e"}
		var (
			mu      sync.Mutex
			bySeq   = map[int][]string{}
			lastSeq = map[string]int{}
			errs    []string
		)
		listener := func(name string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					s, _ := strconv.Atoi(m.GetProperty("seq"))
					k := m.GetProperty("shard")
					if prev, ok := lastSeq[k]; ok && s <= prev {
						errs = append(errs, fmt.Sprintf("%s: key %s seq %d after %d", name, k, s, prev))
					}
					lastSeq[k] = s
					bySeq[s] = append(bySeq[s], name)
				}
				return consumer.ConsumeSuccess, nil
			}
		}
		send := func(from, to int) {
			for i := from; i < to; i++ {
				m := testMessage(topic, i, "oh")
				m.WithShardingKey(keys[i%len(keys)])
				m.WithProperty("shard", keys[i%len(keys)])
				if _, err := p.SendSync(context.Background(), m); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
		}
		got := func(from, to int) bool {
			mu.Lock()
			defer mu.Unlock()
			for i := from; i < to; i++ {
				if len(bySeq[i]) == 0 {
					return false
				}
			}
			return true
		}
		send(0, 50)
		x := startPushConsumer(t, c, group, topic, "*", listener("X"), consumer.WithConsumerOrder(true))
		if !waitFor(30*time.Second, func() bool { return got(0, 50) }) {
			t.Fatalf("X did not consume the first 50 messages")
		}
		if err := x.Shutdown(); err != nil {
			t.Fatal(err)
		}
		send(50, 100)
		start := time.Now()
		startPushConsumer(t, c, group, topic, "*", listener("Y"), consumer.WithConsumerOrder(true))
		// Far below the brokers' lock lifetime (60 s): X unlocked.
		if !waitFor(20*time.Second, func() bool { return got(50, 100) }) {
			t.Fatalf("Y did not consume the next 50 messages in 20 s (the queues stayed locked?)")
		}
		t.Logf("Y had consumed everything %v after it started", time.Since(start).Round(time.Millisecond))
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for _, e := range errs {
			t.Error(e)
		}
		for i := range 100 {
			want := "X"
			if i >= 50 {
				want = "Y"
			}
			if len(bySeq[i]) != 1 || bySeq[i][0] != want {
				t.Errorf("message %d consumed by %v, want %s once", i, bySeq[i], want)
			}
		}
	})
}
