package rocketmqgo_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/bolide-mq/bolide/client"
)

// One cluster, both worlds: what a RocketMQ client sends the Bolide SDK
// consumes with the same ids, tags, keys and properties, and the other way
// round; offsets one kind commits, the other honours.

// sdkCollector records what an SDK consumer gets.
type sdkCollector struct {
	mu   sync.Mutex
	list []*client.MessageExt
}

func (s *sdkCollector) listener(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
	s.mu.Lock()
	s.list = append(s.list, msgs...)
	s.mu.Unlock()
	return client.ConsumeSuccess
}

func (s *sdkCollector) byMsgID() map[string][]*client.MessageExt {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string][]*client.MessageExt{}
	for _, x := range s.list {
		m[sdkMsgID(x)] = append(m[sdkMsgID(x)], x)
	}
	return m
}

func (s *sdkCollector) waitDistinct(t testing.TB, n int, d time.Duration) {
	t.Helper()
	if !waitFor(d, func() bool { return len(s.byMsgID()) >= n }) {
		t.Fatalf("the SDK consumer got %d of %d messages in %v", len(s.byMsgID()), n, d)
	}
}

func bigBody(n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "compressible line %d ü✓\n", b.Len())
	}
	return b.Bytes()[:n]
}

func TestInteropRocketMQToSDK(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "r2s", 4)
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 12 {
			m := testMessage(topic, i, []string{"TagA", "TagB", ""}[i%3])
			if i == 5 {
				m.Body = bigBody(9000) // compressed by the client
			}
			msgs = append(msgs, m)
		}
		ss := sendAll(t, c, p, msgs)
		col := &sdkCollector{}
		startSDKConsumer(t, c, uniq("r2sg"), topic, col.listener)
		col.waitDistinct(t, len(ss), 30*time.Second)
		got := col.byMsgID()
		for _, s := range ss {
			d := got[s.res.MsgID]
			if len(d) != 1 {
				t.Errorf("message %s consumed %d times by the SDK", s.res.MsgID, len(d))
				continue
			}
			m := d[0]
			if sdkOffsetID(m) != s.res.OffsetMsgID {
				t.Errorf("%s: SDK offset id %q, RocketMQ send result %q", s.res.MsgID, sdkOffsetID(m), s.res.OffsetMsgID)
			}
			if m.Topic != topic || !bytes.Equal(m.Body, s.msg.Body) || m.Tag != s.msg.GetTags() ||
				strings.Join(m.Keys, " ") != s.msg.GetKeys() {
				t.Errorf("%s: SDK got topic %q body %q tag %q keys %q; sent %q %q %q", s.res.MsgID, m.Topic, trunc(m.Body), m.Tag, m.Keys,
					trunc(s.msg.Body), s.msg.GetTags(), s.msg.GetKeys())
			}
			for _, k := range userProps {
				if m.Properties[k] != s.msg.GetProperty(k) {
					t.Errorf("%s: SDK property %s = %q, want %q", s.res.MsgID, k, m.Properties[k], s.msg.GetProperty(k))
				}
			}
			if m.BrokerName != s.res.MessageQueue.BrokerName || int(m.QueueID) != s.res.MessageQueue.QueueId || m.QueueOffset != s.res.QueueOffset {
				t.Errorf("%s: SDK got %s/%d@%d, sent to %s/%d@%d", s.res.MsgID, m.BrokerName, m.QueueID, m.QueueOffset,
					s.res.MessageQueue.BrokerName, s.res.MessageQueue.QueueId, s.res.QueueOffset)
			}
			if m.ReconsumeTimes != 0 {
				t.Errorf("%s: reconsume times %d", s.res.MsgID, m.ReconsumeTimes)
			}
		}
		// The SDK's lookups find them by either id and by key.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range ss[:3] {
			for _, id := range []string{s.res.MsgID, s.res.OffsetMsgID} {
				l, err := c.Admin.ViewMessage(ctx, id, client.InTopic(topic))
				if err != nil || len(l.Messages) != 1 || sdkMsgID(l.Messages[0]) != s.res.MsgID || sdkOffsetID(l.Messages[0]) != s.res.OffsetMsgID {
					t.Errorf("SDK ViewMessage(%s): %v, %v", id, l, err)
				}
			}
			key := strings.Fields(s.msg.GetKeys())[0]
			ms, err := c.Admin.QueryMessageByKey(ctx, topic, key, time.Time{}, time.Time{}, 10)
			if err != nil || len(ms) != 1 || sdkMsgID(ms[0]) != s.res.MsgID {
				t.Errorf("SDK QueryMessageByKey(%s): %d messages, %v", key, len(ms), err)
			}
		}
	})
}

func TestInteropSDKToRocketMQ(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "s2r", 4)
		p := newSDKProducer(t, c)
		type sdkSent struct {
			msg *client.Message
			res *client.SendResult
		}
		var ss []sdkSent
		for i := range 12 {
			m := &client.Message{Topic: topic, Tag: []string{"TagA", "TagB", ""}[i%3],
				Keys:       []string{fmt.Sprintf("key-%d", i), "shared-key"},
				Body:       []byte(fmt.Sprintf("sdk-body-%d", i)),
				Properties: map[string]string{"seq": strconv.Itoa(i), "color": "bleu-ü-✓"}}
			if i == 5 {
				m.Body = bigBody(9000)
			}
			res, err := p.Send(context.Background(), m)
			if err != nil {
				t.Fatalf("SDK send: %v", err)
			}
			ss = append(ss, sdkSent{m, res})
		}
		// A batch too.
		var batch []*client.Message
		for i := range 4 {
			batch = append(batch, &client.Message{Topic: topic, Tag: "batch", Keys: []string{fmt.Sprintf("bkey-%d", i)},
				Body: []byte(fmt.Sprintf("sdk-batch-%d", i)), Properties: map[string]string{"seq": strconv.Itoa(100 + i), "color": "rouge"}})
		}
		rs, err := p.SendBatch(context.Background(), batch)
		if err != nil {
			t.Fatalf("SDK batch: %v", err)
		}
		for i, r := range rs {
			ss = append(ss, sdkSent{batch[i], r})
		}

		col := &collector{}
		startPushConsumer(t, c, uniq("s2rg"), topic, "*", col.listener("rmq"))
		col.waitDistinct(t, len(ss), 30*time.Second)
		got := col.byMsgID()
		for _, s := range ss {
			id := sdkSendMsgID(s.res)
			d := got[id]
			if len(d) != 1 {
				t.Errorf("SDK message %s consumed %d times by the RocketMQ client (ids seen: %v)", id, len(d), slices.Collect(maps.Keys(got))[:min(3, len(got))])
				continue
			}
			m := d[0].msg
			if m.OffsetMsgId != sdkSendOffsetID(s.res) {
				t.Errorf("%s: OffsetMsgId %q, SDK send result %q", id, m.OffsetMsgId, sdkSendOffsetID(s.res))
			}
			if m.Topic != topic || !bytes.Equal(m.Body, s.msg.Body) || m.GetTags() != s.msg.Tag || m.GetKeys() != strings.Join(s.msg.Keys, " ") {
				t.Errorf("%s: RocketMQ client got topic %q body %q tag %q keys %q; sent %q %q %v", id, m.Topic, trunc(m.Body), m.GetTags(), m.GetKeys(),
					trunc(s.msg.Body), s.msg.Tag, s.msg.Keys)
			}
			for k, v := range s.msg.Properties {
				if m.GetProperty(k) != v {
					t.Errorf("%s: property %s = %q, want %q", id, k, m.GetProperty(k), v)
				}
			}
			if m.Queue.BrokerName != s.res.BrokerName || m.Queue.QueueId != int(s.res.QueueID) || m.QueueOffset != s.res.QueueOffset {
				t.Errorf("%s: consumed at %s/%d@%d, SDK sent to %s/%d@%d", id, m.Queue.BrokerName, m.Queue.QueueId, m.QueueOffset,
					s.res.BrokerName, s.res.QueueID, s.res.QueueOffset)
			}
			if m.StoreHost != c.BrokerAddr(s.res.BrokerName) {
				t.Errorf("%s: StoreHost %q", id, m.StoreHost)
			}
		}
	})
}

// TestInteropOffsets passes one group between the two kinds of client:
// each starts where the other committed.
func TestInteropOffsets(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "offx", 4)
		group := uniq("offxg")
		p := newProducer(t, c)
		round := 0
		send := func(n int) map[string]bool {
			round++
			var msgs []*primitive.Message
			for i := range n {
				msgs = append(msgs, testMessage(topic, round*100+i, fmt.Sprintf("r%d", round)))
			}
			ids := map[string]bool{}
			for _, s := range sendAll(t, c, p, msgs) {
				ids[s.res.MsgID] = true
			}
			return ids
		}
		exactly := func(who string, got map[string]int, want map[string]bool) {
			t.Helper()
			for id := range want {
				if got[id] != 1 {
					t.Errorf("%s: message %s consumed %d times", who, id, got[id])
				}
			}
			for id, n := range got {
				if !want[id] {
					t.Errorf("%s: consumed %s (%d times), committed by the other kind", who, id, n)
				}
			}
		}

		// 1. The RocketMQ client consumes and commits (on shutdown).
		r1 := send(20)
		col := &collector{}
		rc := startPushConsumer(t, c, group, topic, "*", col.listener("rmq"))
		col.waitDistinct(t, len(r1), 30*time.Second)
		time.Sleep(300 * time.Millisecond)
		if err := rc.Shutdown(); err != nil {
			t.Fatal(err)
		}
		// The RocketMQ client commits on shutdown oneway: the broker
		// takes the commit a moment later, and the SDK must not look
		// before (it would start those queues from the first offset).
		waitAllCommitted(t, c, group, topic, "the RocketMQ consumer's commit on shutdown")
		cnt := map[string]int{}
		for id, d := range col.byMsgID() {
			cnt[id] = len(d)
		}
		exactly("RocketMQ consumer", cnt, r1)

		// 2. The SDK continues from there.
		r2 := send(20)
		sc := &sdkCollector{}
		sdkc := startSDKConsumer(t, c, group, topic, sc.listener)
		sc.waitDistinct(t, len(r2), 30*time.Second)
		time.Sleep(time.Second)
		if err := sdkc.Close(); err != nil {
			t.Fatal(err)
		}
		waitAllCommitted(t, c, group, topic, "the SDK consumer's commit on close")
		cnt = map[string]int{}
		for id, d := range sc.byMsgID() {
			cnt[id] = len(d)
		}
		exactly("SDK consumer", cnt, r2)

		// 3. And the RocketMQ client from where the SDK committed.
		r3 := send(20)
		col3 := &collector{}
		startPushConsumer(t, c, group, topic, "*", col3.listener("rmq"))
		col3.waitDistinct(t, len(r3), 30*time.Second)
		time.Sleep(time.Second)
		cnt = map[string]int{}
		for id, d := range col3.byMsgID() {
			cnt[id] = len(d)
		}
		exactly("RocketMQ consumer after the SDK", cnt, r3)
	})
}

// waitAllCommitted waits until group's committed offset of every queue of
// topic that holds messages is the queue's max offset.
func waitAllCommitted(t *testing.T, c *cluster, group, topic, what string) {
	t.Helper()
	var behind map[string]string
	ok := waitFor(15*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.Admin.ConsumeStats(ctx, group, topic)
		if err != nil {
			behind = map[string]string{"error": err.Error()}
			return false
		}
		behind = map[string]string{}
		for _, q := range st.Queues {
			if q.BrokerOffset > 0 && q.ConsumerOffset != q.BrokerOffset {
				behind[q.Queue.String()] = fmt.Sprintf("%d of %d", q.ConsumerOffset, q.BrokerOffset)
			}
		}
		return len(behind) == 0
	})
	if !ok {
		t.Fatalf("%s did not reach the broker: queues behind %v", what, behind)
	}
}
