package rocketmqgo_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Every send mode of the RocketMQ producer, checked by reading the topic
// back with the RocketMQ pull consumer.

func TestSendSync(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "sync", 4)
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 16 {
			msgs = append(msgs, testMessage(topic, i, []string{"TagA", "TagB"}[i%2]))
		}
		ss := sendAll(t, c, p, msgs)
		// The default selector goes round the queues of every broker: each
		// queue's offsets run from 0 without a gap.
		next := map[string]int64{}
		brokers := map[string]bool{}
		for i, s := range ss {
			q := fmt.Sprintf("%s/%d", s.res.MessageQueue.BrokerName, s.res.MessageQueue.QueueId)
			if s.res.QueueOffset != next[q] {
				t.Errorf("message %d: queue %s offset %d, want %d", i, q, s.res.QueueOffset, next[q])
			}
			next[q] = s.res.QueueOffset + 1
			brokers[s.res.MessageQueue.BrokerName] = true
		}
		if len(brokers) != len(c.Brokers) {
			t.Errorf("messages went to brokers %v, want all %d", brokers, len(c.Brokers))
		}
		checkAllStored(t, c, topic, ss)
	})
}

func TestSendAsync(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "async", 4)
		p := newProducer(t, c)
		const n = 16
		var (
			mu   sync.Mutex
			ss   []sent
			errs []error
			wg   sync.WaitGroup
		)
		for i := range n {
			m := testMessage(topic, i, "async")
			wg.Add(1)
			err := p.SendAsync(context.Background(), func(_ context.Context, res *primitive.SendResult, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				ss = append(ss, sent{m, res})
			}, m)
			if err != nil {
				wg.Done()
				t.Fatalf("SendAsync: %v", err)
			}
		}
		if !waitGroupWait(&wg, 30*time.Second) {
			t.Fatalf("async callbacks: %d of %d after 30 s", len(ss)+len(errs), n)
		}
		if len(errs) > 0 {
			t.Fatalf("async sends failed: %v", errs)
		}
		for _, s := range ss {
			checkSendResult(t, c, s.msg, s.res)
		}
		checkAllStored(t, c, topic, ss)
	})
}

func waitGroupWait(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestSendOneWay(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "oneway", 4)
		p := newProducer(t, c)
		const n = 16
		var msgs []*primitive.Message
		for i := range n {
			m := testMessage(topic, i, "oneway")
			if err := p.SendOneWay(context.Background(), m); err != nil {
				t.Fatalf("SendOneWay: %v", err)
			}
			msgs = append(msgs, m)
		}
		if !waitFor(10*time.Second, func() bool { return storedCount(t, c, topic) >= n }) {
			t.Fatalf("%d of %d oneway messages stored after 10 s", storedCount(t, c, topic), n)
		}
		got := indexByMsgID(t, flatten(readTopic(t, c, topic, n)))
		if len(got) != n {
			t.Errorf("topic holds %d messages, want %d", len(got), n)
		}
		for _, m := range msgs {
			id := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
			g, ok := got[id]
			if !ok {
				t.Errorf("oneway message %s (seq %s) not stored", id, m.GetProperty("seq"))
				continue
			}
			if string(g.Body) != string(m.Body) || g.GetTags() != "oneway" || g.GetKeys() != m.GetKeys() || g.GetProperty("color") != m.GetProperty("color") {
				t.Errorf("oneway message %s stored as body %q tag %q keys %q color %q", id, g.Body, g.GetTags(), g.GetKeys(), g.GetProperty("color"))
			}
			checkOffsetMsgID(t, g.OffsetMsgId, c.BrokerAddr(g.Queue.BrokerName))
		}
	})
}

// storedCount is the number of messages in topic, by the brokers' queue
// offsets.
func storedCount(t testing.TB, c *cluster, topic string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.Admin.QueueStatus(ctx, topic)
	if err != nil {
		t.Logf("queue status %s: %v", topic, err)
		return 0
	}
	n := 0
	for _, q := range st {
		n += int(q.MaxOffset - q.MinOffset)
	}
	return n
}

func TestSendBatch(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "batch", 4)
		p := newProducer(t, c)
		type batch struct {
			msgs []*primitive.Message
			res  *primitive.SendResult
		}
		var batches []batch
		for b := range 3 {
			var msgs []*primitive.Message
			for i := range 5 {
				msgs = append(msgs, testMessage(topic, b*10+i, fmt.Sprintf("batch%d", i%2)))
			}
			res, err := p.SendSync(context.Background(), msgs...)
			if err != nil {
				t.Fatalf("batch send: %v", err)
			}
			if res.Status != primitive.SendOK {
				t.Fatalf("batch status %v", res)
			}
			ids := strings.Split(res.OffsetMsgID, ",")
			if len(ids) != len(msgs) {
				t.Fatalf("batch OffsetMsgID %q: want %d comma-separated offset ids", res.OffsetMsgID, len(msgs))
			}
			for _, id := range ids {
				checkOffsetMsgID(t, id, c.BrokerAddr(res.MessageQueue.BrokerName))
			}
			t.Logf("batch %d: %v", b, res)
			batches = append(batches, batch{msgs, res})
		}
		byQueue := readTopic(t, c, topic, 15)
		total := 0
		for _, q := range byQueue {
			total += len(q)
		}
		if total != 15 {
			t.Errorf("topic holds %d messages, want 15", total)
		}
		for b, bt := range batches {
			q := byQueue[fmt.Sprintf("%s/%d", bt.res.MessageQueue.BrokerName, bt.res.MessageQueue.QueueId)]
			ids := strings.Split(bt.res.OffsetMsgID, ",")
			for i, m := range bt.msgs {
				off := bt.res.QueueOffset + int64(i)
				var g *primitive.MessageExt
				for _, x := range q {
					if x.QueueOffset == off {
						g = x
					}
				}
				if g == nil {
					t.Errorf("batch %d message %d: nothing at queue offset %d of %v", b, i, off, bt.res.MessageQueue)
					continue
				}
				if string(g.Body) != string(m.Body) || g.GetTags() != m.GetTags() || g.GetKeys() != m.GetKeys() || g.GetProperty("seq") != m.GetProperty("seq") || g.GetProperty("color") != m.GetProperty("color") {
					t.Errorf("batch %d message %d: got body %q tag %q keys %q seq %q color %q, want %q %q %q %q %q", b, i,
						g.Body, g.GetTags(), g.GetKeys(), g.GetProperty("seq"), g.GetProperty("color"),
						m.Body, m.GetTags(), m.GetKeys(), m.GetProperty("seq"), m.GetProperty("color"))
				}
				if g.OffsetMsgId != ids[i] {
					t.Errorf("batch %d message %d: OffsetMsgId %s, send result says %s", b, i, g.OffsetMsgId, ids[i])
				}
				// The Go client gives batched messages no UNIQ_KEY: their
				// MsgId is then the offset id.
				want := g.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
				if want == "" {
					want = g.OffsetMsgId
				}
				if g.MsgId != want {
					t.Errorf("batch %d message %d: MsgId %s, want %s", b, i, g.MsgId, want)
				}
			}
		}
	})
}

func TestSendOrderedBySharding(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "ordered", 4)
		p := newProducer(t, c, producer.WithQueueSelector(producer.NewHashQueueSelector()))
		keys := []string{"order-1", "order-2", "order-3", "order-4", "order-5"}
		queueOf := map[string]string{}
		lastOff := map[string]int64{}
		var ss []sent
		for i := range 40 {
			k := keys[i%len(keys)]
			m := testMessage(topic, i, "ord")
			m.WithShardingKey(k)
			m.WithProperty("shard", k)
			res, err := p.SendSync(context.Background(), m)
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			checkSendResult(t, c, m, res)
			q := fmt.Sprintf("%s/%d", res.MessageQueue.BrokerName, res.MessageQueue.QueueId)
			if prev, ok := queueOf[k]; ok && prev != q {
				t.Errorf("sharding key %s went to %s and %s", k, prev, q)
			}
			queueOf[k] = q
			if off, ok := lastOff[q]; ok && res.QueueOffset != off+1 {
				t.Errorf("queue %s: offset %d after %d", q, res.QueueOffset, off)
			}
			lastOff[q] = res.QueueOffset
			ss = append(ss, sent{m, res})
		}
		// In each queue, the messages of a key are stored in send order.
		byQueue := readTopic(t, c, topic, len(ss))
		for q, msgs := range byQueue {
			last := map[string]int{}
			for _, m := range msgs {
				k := m.GetProperty("shard")
				n, _ := strconv.Atoi(m.GetProperty("seq"))
				if prev, ok := last[k]; ok && n <= prev {
					t.Errorf("queue %s: key %s seq %d after %d", q, k, n, prev)
				}
				last[k] = n
				if m.GetShardingKey() != k {
					t.Errorf("SHARDING_KEY %q, want %q", m.GetShardingKey(), k)
				}
			}
		}
		checkAllStored(t, c, topic, ss)
	})
}

func TestSendCompressedBody(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "zip", 2)
		p := newProducer(t, c)
		// The client compresses bodies of 4 KiB and more with zlib (sysflag
		// bit 0); below that it does not.
		var msgs []*primitive.Message
		for i, size := range []int{4095, 4096, 10 << 10, 200 << 10} {
			m := testMessage(topic, i, "zip")
			var body bytes.Buffer
			for body.Len() < size {
				fmt.Fprintf(&body, "line %d of a compressible body ü✓ %d\n", body.Len(), i)
			}
			m.Body = body.Bytes()[:size]
			msgs = append(msgs, m)
		}
		ss := sendAll(t, c, p, msgs)
		checkAllStored(t, c, topic, ss)

		// The push consumer gets the same bodies.
		col := &collector{}
		startPushConsumer(t, c, uniq("zipg"), topic, "*", col.listener("push"))
		col.waitDistinct(t, len(ss), 30*time.Second)
		got := col.byMsgID()
		for _, s := range ss {
			d := got[s.res.MsgID]
			if len(d) == 0 {
				t.Errorf("message %s not consumed", s.res.MsgID)
				continue
			}
			checkDelivered(t, c, s, d[0].msg)
		}
	})
}

// warmUp sends one message to each of the queues (queuesPerBroker on every
// broker) of topic and waits until col, the listener of a consumer just
// started, has them all: from then on the consumer pulls every queue, and
// a test may time what it sends (on two busy cores a new consumer's first
// pulls may come seconds after its start). It returns how many it sent.
func warmUp(t *testing.T, c *cluster, topic string, queuesPerBroker int, col *collector) int {
	t.Helper()
	wp := newProducer(t, c, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	n := 0
	for _, b := range c.Brokers {
		for q := range queuesPerBroker {
			m := testMessage(topic, 100+n, "warm")
			m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: b.Name, QueueId: q}
			if _, err := wp.SendSync(context.Background(), m); err != nil {
				t.Fatalf("warm-up send: %v", err)
			}
			n++
		}
	}
	col.waitDistinct(t, n, 30*time.Second)
	return n
}

func TestDelayLevel(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "delay", 2)
		col := &collector{}
		startPushConsumer(t, c, uniq("delayg"), topic, "*", col.listener("push"))
		warm := warmUp(t, c, topic, 2, col)
		p := newProducer(t, c)
		const level = 2
		delay := delayLevels[level-1]
		type timed struct {
			s     sent
			start time.Time
		}
		var ms []timed
		for i := range 3 {
			m := testMessage(topic, i, "delayed")
			m.WithDelayTimeLevel(level)
			start := time.Now()
			res, err := p.SendSync(context.Background(), m)
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			if res.Status != primitive.SendOK || res.MsgID != m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex) {
				t.Errorf("delayed send result %v", res)
			}
			ms = append(ms, timed{sent{m, res}, start})
		}
		// An undelayed message overtakes them.
		now := testMessage(topic, 99, "now")
		nowRes, err := p.SendSync(context.Background(), now)
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		col.waitDistinct(t, warm+4, delay+20*time.Second)
		got := col.byMsgID()
		if d := got[nowRes.MsgID]; len(d) == 0 || d[0].at.Sub(ms[0].start) >= delay {
			t.Errorf("the undelayed message was not consumed before the delayed ones")
		}
		for _, m := range ms {
			d := got[m.s.res.MsgID]
			if len(d) != 1 {
				t.Errorf("delayed message %s consumed %d times", m.s.res.MsgID, len(d))
				continue
			}
			after := d[0].at.Sub(m.start)
			t.Logf("delay level %d (%v): consumed %v after the send", level, delay, after)
			if after < delay {
				t.Errorf("delayed message %s consumed %v after its send, before its delay %v", m.s.res.MsgID, after, delay)
			}
			if after > delay+5*time.Second {
				t.Errorf("delayed message %s consumed %v after its send; delay %v", m.s.res.MsgID, after, delay)
			}
			g := d[0].msg
			if g.Topic != topic || string(g.Body) != string(m.s.msg.Body) || g.GetTags() != "delayed" || g.GetKeys() != m.s.msg.GetKeys() ||
				g.GetProperty("color") != m.s.msg.GetProperty("color") || g.ReconsumeTimes != 0 {
				t.Errorf("delayed message arrived as topic %q body %q tag %q keys %q color %q reconsume %d",
					g.Topic, g.Body, g.GetTags(), g.GetKeys(), g.GetProperty("color"), g.ReconsumeTimes)
			}
			if g.StoreTimestamp-g.BornTimestamp < delay.Milliseconds() {
				t.Errorf("delayed message stored in its topic %d ms after it was born, want ≥ %v", g.StoreTimestamp-g.BornTimestamp, delay)
			}
		}
	})
}

func TestDelayTimestamp(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "timer", 2)
		col := &collector{}
		startPushConsumer(t, c, uniq("timerg"), topic, "*", col.listener("push"))
		warm := warmUp(t, c, topic, 2, col)
		p := newProducer(t, c)
		at := time.Now().Add(2500 * time.Millisecond)
		m := testMessage(topic, 0, "timer")
		m.WithDelayTimestamp(at)
		if m.GetProperty("TIMER_DELIVER_MS") != strconv.FormatInt(at.UnixMilli(), 10) {
			t.Fatalf("the client did not set TIMER_DELIVER_MS: %v", m.GetProperties())
		}
		res, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send result %v", res)
		}
		col.waitDistinct(t, warm+1, 20*time.Second)
		ds := col.byMsgID()[res.MsgID]
		if len(ds) == 0 {
			t.Fatalf("the timer message %s was not consumed", res.MsgID)
		}
		d := ds[0]
		t.Logf("TIMER_DELIVER_MS %v: consumed %v after it", at.Format(time.RFC3339Nano), d.at.Sub(at))
		if d.msg.MsgId != res.MsgID {
			t.Errorf("MsgId %s, want %s", d.msg.MsgId, res.MsgID)
		}
		if d.at.Before(at.Truncate(time.Millisecond)) {
			t.Errorf("consumed at %v, before its delivery time %v", d.at, at)
		}
		if d.at.After(at.Add(5 * time.Second)) {
			t.Errorf("consumed at %v, long after its delivery time %v", d.at, at)
		}
		if string(d.msg.Body) != string(m.Body) || d.msg.GetTags() != "timer" || d.msg.GetKeys() != m.GetKeys() {
			t.Errorf("timer message arrived as body %q tag %q keys %q", d.msg.Body, d.msg.GetTags(), d.msg.GetKeys())
		}
	})
}

// TestSendRefused: sends the brokers refuse come back as errors, and the
// producer goes on working: a body over the brokers' size limit (4 MiB),
// plain or compressed by the client and inflating past it, a topic that
// does not exist (the client falls back to TBW102's route, which
// auto-creation off does not serve). A body of exactly the limit is taken.
func TestSendRefused(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "refused", 2)
		p := newProducer(t, c, producer.WithRetry(0))
		plain := newProducer(t, c, producer.WithRetry(0), producer.WithCompressMsgBodyOverHowmuch(1<<30))
		for _, tc := range []struct {
			name string
			p    interface {
				SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
			}
			msg *primitive.Message
		}{
			{"plain, over 4 MiB", plain, primitive.NewMessage(topic, bytes.Repeat([]byte("p"), 4<<20+1))},
			{"compressed, inflates over 4 MiB", p, primitive.NewMessage(topic, bytes.Repeat([]byte("z"), 4<<20+1))},
			{"unknown topic", p, primitive.NewMessage(uniq("nosuchtopic"), []byte("x"))},
		} {
			start := time.Now()
			res, err := tc.p.SendSync(context.Background(), tc.msg)
			if err == nil {
				t.Errorf("%s: sent (%v), want an error", tc.name, res)
				continue
			}
			t.Logf("%s: %v (%v)", tc.name, err, time.Since(start).Round(time.Millisecond))
		}
		var msgs []*primitive.Message
		for i, b := range [][]byte{bytes.Repeat([]byte("a"), 4<<20), bytes.Repeat([]byte("b"), 4<<20), []byte("small")} {
			m := testMessage(topic, i, "after")
			m.Body = b
			msgs = append(msgs, m)
		}
		ss := sendAll(t, c, p, msgs[:1])                   // compressed
		ss = append(ss, sendAll(t, c, plain, msgs[1:])...) // plain
		checkAllStored(t, c, topic, ss)
	})
}
