package rocketmqgo_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/bolide-mq/bolide/client"
)

// Helpers around the RocketMQ client: every client gets a unique instance
// name, so that no two share a clientID (one client object per clientID
// in a process, whose first user decides the NameServer and which
// transaction producer answers check-backs).

// newProducer starts a RocketMQ producer of a fresh group on c, shut down
// at the end of the test.
func newProducer(t testing.TB, c *cluster, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	base := []producer.Option{
		producer.WithNameServer([]string{c.NameSrv}),
		producer.WithGroupName(uniq("pg")),
		producer.WithInstanceName(uniq("p")),
		producer.WithRetry(2),
	}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("start producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// consumerOpts are the options of every test push consumer of group: a
// unique instance, from the first offset (a new group then gets what was
// sent before it started too).
func consumerOpts(c *cluster, group string, opts ...consumer.Option) []consumer.Option {
	return append([]consumer.Option{
		consumer.WithNameServer([]string{c.NameSrv}),
		consumer.WithGroupName(group),
		consumer.WithInstance(uniq("c")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
}

// startPushConsumer subscribes a new push consumer of group to topic with
// expr and starts it; it is shut down at the end of the test (or earlier
// by the caller).
func startPushConsumer(t testing.TB, c *cluster, group, topic, expr string,
	f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error), opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	pc, err := rocketmq.NewPushConsumer(consumerOpts(c, group, opts...)...)
	if err != nil {
		t.Fatalf("new push consumer: %v", err)
	}
	sel := consumer.MessageSelector{}
	if expr != "" && expr != "*" {
		sel = consumer.MessageSelector{Type: consumer.TAG, Expression: expr}
	}
	if err := pc.Subscribe(topic, sel, f); err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start push consumer of %s: %v", group, err)
	}
	t.Cleanup(func() { _ = pc.Shutdown() })
	return pc
}

// delivery is one message handed to a listener.
type delivery struct {
	msg *primitive.MessageExt
	at  time.Time
	by  string
}

// collector records deliveries.
type collector struct {
	mu   sync.Mutex
	list []delivery
}

func (c *collector) add(by string, msgs ...*primitive.MessageExt) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.list = append(c.list, delivery{msg: m, at: now, by: by})
	}
}

// listener records and succeeds.
func (c *collector) listener(by string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		c.add(by, msgs...)
		return consumer.ConsumeSuccess, nil
	}
}

func (c *collector) all() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.list)
}

// distinct counts the different message ids delivered.
func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range c.list {
		seen[d.msg.MsgId] = true
	}
	return len(seen)
}

// waitDistinct waits until n different messages were delivered.
func (c *collector) waitDistinct(t testing.TB, n int, d time.Duration) {
	t.Helper()
	if !waitFor(d, func() bool { return c.distinct() >= n }) {
		t.Fatalf("got %d of %d messages in %v", c.distinct(), n, d)
	}
}

// byMsgID returns the deliveries by message id.
func (c *collector) byMsgID() map[string][]delivery {
	m := map[string][]delivery{}
	for _, d := range c.all() {
		m[d.msg.MsgId] = append(m[d.msg.MsgId], d)
	}
	return m
}

// sent is a message as the producer sent it and the broker answered.
type sent struct {
	msg *primitive.Message
	res *primitive.SendResult
}

// testMessage builds message i of a test: body, tag, two keys, user
// properties (one non-ASCII).
func testMessage(topic string, i int, tag string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(fmt.Sprintf("body-%d-%s", i, topic)))
	if tag != "" {
		m.WithTag(tag)
	}
	m.WithKeys([]string{fmt.Sprintf("key-%d", i), "shared-key"})
	m.WithProperty("seq", strconv.Itoa(i))
	m.WithProperty("color", "bleu-ü-✓")
	return m
}

// userProps are the properties testMessage sets besides tags and keys.
var userProps = []string{"seq", "color"}

// sendAll sends msgs one by one with SendSync and checks each result.
func sendAll(t testing.TB, c *cluster, p rocketmq.Producer, msgs []*primitive.Message) []sent {
	t.Helper()
	out := make([]sent, 0, len(msgs))
	for _, m := range msgs {
		res, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		checkSendResult(t, c, m, res)
		out = append(out, sent{m, res})
	}
	return out
}

// checkSendResult checks what the client makes of a SEND answer: status
// OK, MsgID the message's UNIQ_KEY, OffsetMsgID an offset id of the
// queue's broker, the queue on a broker of the cluster.
func checkSendResult(t testing.TB, c *cluster, m *primitive.Message, res *primitive.SendResult) {
	t.Helper()
	if res.Status != primitive.SendOK {
		t.Fatalf("send status %v: %v", res.Status, res)
	}
	if res.MessageQueue == nil {
		t.Fatalf("send result without a queue: %v", res)
	}
	uk := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
	if uk == "" || res.MsgID != uk {
		t.Errorf("SendResult.MsgID %q, want the message's UNIQ_KEY %q", res.MsgID, uk)
	}
	addr := c.BrokerAddr(res.MessageQueue.BrokerName)
	if addr == "" {
		t.Fatalf("send result on unknown broker %q", res.MessageQueue.BrokerName)
	}
	checkOffsetMsgID(t, res.OffsetMsgID, addr)
	if res.QueueOffset < 0 {
		t.Errorf("send result queue offset %d", res.QueueOffset)
	}
}

// checkOffsetMsgID checks that id is a 32-character offset message id of
// the broker at addr, and returns its CommitLog offset.
func checkOffsetMsgID(t testing.TB, id, addr string) int64 {
	t.Helper()
	if len(id) != 32 || strings.ToUpper(id) != id {
		t.Errorf("offset msg id %q: want 32 upper-case hex characters", id)
		return -1
	}
	mid, err := primitive.UnmarshalMsgID([]byte(id))
	if err != nil {
		t.Errorf("offset msg id %q: %v", id, err)
		return -1
	}
	if got := fmt.Sprintf("%s:%d", mid.Addr, mid.Port); got != addr {
		t.Errorf("offset msg id %q names %s, want the broker %s", id, got, addr)
	}
	if _, err := hex.DecodeString(id); err != nil {
		t.Errorf("offset msg id %q: %v", id, err)
	}
	return mid.Offset
}

// checkDelivered compares a consumed message with what was sent: ids,
// queue, queue offset, body, tag, keys, user properties, reconsume times.
func checkDelivered(t testing.TB, c *cluster, s sent, got *primitive.MessageExt) {
	t.Helper()
	if got.MsgId != s.res.MsgID {
		t.Errorf("MsgId %q, want %q", got.MsgId, s.res.MsgID)
	}
	if got.OffsetMsgId != s.res.OffsetMsgID {
		t.Errorf("%s: OffsetMsgId %q, want %q (from the send result)", got.MsgId, got.OffsetMsgId, s.res.OffsetMsgID)
	}
	if got.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex) != s.res.MsgID {
		t.Errorf("%s: UNIQ_KEY %q", got.MsgId, got.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
	}
	if got.Queue == nil || got.Queue.BrokerName != s.res.MessageQueue.BrokerName || got.Queue.QueueId != s.res.MessageQueue.QueueId {
		t.Errorf("%s: queue %v, want %v", got.MsgId, got.Queue, s.res.MessageQueue)
	}
	if got.QueueOffset != s.res.QueueOffset {
		t.Errorf("%s: QueueOffset %d, want %d", got.MsgId, got.QueueOffset, s.res.QueueOffset)
	}
	if got.Topic != s.msg.Topic {
		t.Errorf("%s: topic %q, want %q", got.MsgId, got.Topic, s.msg.Topic)
	}
	if string(got.Body) != string(s.msg.Body) {
		t.Errorf("%s: body %q, want %q", got.MsgId, trunc(got.Body), trunc(s.msg.Body))
	}
	if got.GetTags() != s.msg.GetTags() {
		t.Errorf("%s: tag %q, want %q", got.MsgId, got.GetTags(), s.msg.GetTags())
	}
	if got.GetKeys() != s.msg.GetKeys() {
		t.Errorf("%s: keys %q, want %q", got.MsgId, got.GetKeys(), s.msg.GetKeys())
	}
	for _, k := range userProps {
		if got.GetProperty(k) != s.msg.GetProperty(k) {
			t.Errorf("%s: property %s %q, want %q", got.MsgId, k, got.GetProperty(k), s.msg.GetProperty(k))
		}
	}
	if got.ReconsumeTimes != 0 {
		t.Errorf("%s: ReconsumeTimes %d, want 0", got.MsgId, got.ReconsumeTimes)
	}
	if addr := c.BrokerAddr(s.res.MessageQueue.BrokerName); got.StoreHost != addr {
		t.Errorf("%s: StoreHost %q, want %q", got.MsgId, got.StoreHost, addr)
	}
	if born := time.UnixMilli(got.BornTimestamp); time.Since(born) > 10*time.Minute || time.Until(born) > time.Minute {
		t.Errorf("%s: BornTimestamp %v", got.MsgId, born)
	}
	if got.StoreTimestamp < got.BornTimestamp-1000 {
		t.Errorf("%s: StoreTimestamp %d before BornTimestamp %d", got.MsgId, got.StoreTimestamp, got.BornTimestamp)
	}
}

func trunc(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// readTopic reads every message of topic with a RocketMQ pull consumer's
// PullFrom, queue by queue up to the offsets the brokers report once they
// hold at least want messages, and returns them by queue ("broker/queue")
// in offset order. (A broker answers a send once the message is in its
// CommitLog; its queues index it a moment later.)
func readTopic(t testing.TB, c *cluster, topic string, want int) map[string][]*primitive.MessageExt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		st  []client.QueueStatus
		err error
	)
	waitFor(10*time.Second, func() bool {
		st, err = c.Admin.QueueStatus(ctx, topic)
		n := 0
		for _, q := range st {
			n += int(q.MaxOffset - q.MinOffset)
		}
		return err == nil && n >= want
	})
	if err != nil {
		t.Fatalf("queue status of %s: %v", topic, err)
	}
	pc := startReader(t, c, uniq("reader"), topic)
	defer func() { _ = pc.Shutdown() }()
	out := map[string][]*primitive.MessageExt{}
	for _, q := range st {
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: q.Queue.BrokerName, QueueId: int(q.Queue.QueueID)}
		key := fmt.Sprintf("%s/%d", mq.BrokerName, mq.QueueId)
		for off := q.MinOffset; off < q.MaxOffset; {
			res, err := pc.PullFrom(ctx, mq, off, 32)
			if err != nil {
				t.Fatalf("PullFrom %s at %d: %v", key, off, err)
			}
			if res.Status != primitive.PullFound {
				t.Fatalf("PullFrom %s at %d (max %d): status %v, next %d", key, off, q.MaxOffset, res.Status, res.NextBeginOffset)
			}
			if res.NextBeginOffset <= off {
				t.Fatalf("PullFrom %s at %d: next begin offset %d does not advance", key, off, res.NextBeginOffset)
			}
			out[key] = append(out[key], res.GetMessageExts()...)
			off = res.NextBeginOffset
		}
	}
	return out
}

// flatten returns the messages of all queues.
func flatten(m map[string][]*primitive.MessageExt) []*primitive.MessageExt {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*primitive.MessageExt
	for _, k := range keys {
		out = append(out, m[k]...)
	}
	return out
}

// startPullConsumer starts a RocketMQ pull consumer of group subscribed to
// topic.
func startPullConsumer(t testing.TB, c *cluster, group, topic, expr string, opts ...consumer.Option) rocketmq.PullConsumer {
	t.Helper()
	base := []consumer.Option{
		consumer.WithNameServer([]string{c.NameSrv}),
		consumer.WithGroupName(group),
		consumer.WithInstance(uniq("pull")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	pc, err := rocketmq.NewPullConsumer(append(base, opts...)...)
	if err != nil {
		t.Fatalf("new pull consumer: %v", err)
	}
	sel := consumer.MessageSelector{}
	if expr != "" && expr != "*" {
		sel = consumer.MessageSelector{Type: consumer.TAG, Expression: expr}
	}
	if err := pc.Subscribe(topic, sel); err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start pull consumer: %v", err)
	}
	t.Cleanup(func() { _ = pc.Shutdown() })
	return pc
}

// startReader starts a RocketMQ pull consumer of group for PullFrom and
// OffsetForTimestamp on topic: it is assigned no queues, so it pulls
// nothing in the background. A subscribed consumer would, and the client
// may then panic with "send on closed channel" when a pull answer arrives
// while Shutdown closes its process queues (its putMessage sends after
// the queue's lock is released).
func startReader(t testing.TB, c *cluster, group, topic string) rocketmq.PullConsumer {
	t.Helper()
	pc, err := rocketmq.NewPullConsumer(
		consumer.WithNameServer([]string{c.NameSrv}),
		consumer.WithGroupName(group),
		consumer.WithInstance(uniq("reader")),
	)
	if err != nil {
		t.Fatalf("new pull consumer: %v", err)
	}
	if err := pc.Assign(topic, nil); err != nil {
		t.Fatalf("assign %s: %v", topic, err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start pull consumer: %v", err)
	}
	t.Cleanup(func() { _ = pc.Shutdown() })
	return pc
}

// indexByMsgID maps the consumed messages by MsgId, failing on a
// duplicate.
func indexByMsgID(t testing.TB, msgs []*primitive.MessageExt) map[string]*primitive.MessageExt {
	t.Helper()
	m := map[string]*primitive.MessageExt{}
	for _, x := range msgs {
		if _, dup := m[x.MsgId]; dup {
			t.Errorf("message %s read twice", x.MsgId)
		}
		m[x.MsgId] = x
	}
	return m
}

// checkAllStored reads the topic back and checks every sent message is
// there exactly once, as sent.
func checkAllStored(t testing.TB, c *cluster, topic string, ss []sent) {
	t.Helper()
	got := indexByMsgID(t, flatten(readTopic(t, c, topic, len(ss))))
	if len(got) != len(ss) {
		t.Errorf("topic %s holds %d messages, want %d", topic, len(got), len(ss))
	}
	for _, s := range ss {
		m, ok := got[s.res.MsgID]
		if !ok {
			t.Errorf("message %s (%s) not stored", s.res.MsgID, s.msg.GetProperty("seq"))
			continue
		}
		checkDelivered(t, c, s, m)
	}
}
