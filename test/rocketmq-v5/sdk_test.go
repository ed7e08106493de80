package rocketmqv5

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"go.uber.org/zap"
)

// Bolide's SDK, the other kind of client: it checks what v5 producers
// stored, and sends what v5 consumers read.

func sdkOpts(c *cluster) []client.Option {
	return []client.Option{client.WithNameServers(c.NameSrv), client.WithLogger(zap.NewNop())}
}

// newSDKProducer starts a Bolide SDK producer of a fresh group.
func newSDKProducer(t testing.TB, c *cluster) *client.Producer {
	t.Helper()
	var opts []client.ProducerOption
	for _, o := range sdkOpts(c) {
		opts = append(opts, o)
	}
	p, err := client.NewProducer(uniq("sdkpg"), opts...)
	if err != nil {
		t.Fatalf("new SDK producer: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start SDK producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// sdkDelivery is a message an SDK consumer got, and when.
type sdkDelivery struct {
	msg *client.MessageExt
	at  time.Time
}

// sdkCollector records what an SDK push consumer gets, by message id.
type sdkCollector struct {
	mu   sync.Mutex
	byID map[string][]sdkDelivery
	list []sdkDelivery
}

func (s *sdkCollector) listener(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string][]sdkDelivery{}
	}
	now := time.Now()
	for _, m := range msgs {
		d := sdkDelivery{msg: m, at: now}
		s.byID[m.MsgID] = append(s.byID[m.MsgID], d)
		s.list = append(s.list, d)
	}
	return client.ConsumeSuccess
}

func (s *sdkCollector) get(id string) []sdkDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sdkDelivery(nil), s.byID[id]...)
}

func (s *sdkCollector) all() []sdkDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sdkDelivery(nil), s.list...)
}

// waitIDs waits until every id came, and fails the test after d.
func (s *sdkCollector) waitIDs(t testing.TB, ids []string, d time.Duration) {
	t.Helper()
	missing := func() []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		var m []string
		for _, id := range ids {
			if len(s.byID[id]) == 0 {
				m = append(m, id)
			}
		}
		return m
	}
	if !waitFor(d, func() bool { return len(missing()) == 0 }) {
		t.Fatalf("the SDK consumer lacks %d of %d messages after %v: %v", len(missing()), len(ids), d, missing())
	}
}

// startSDKConsumer starts a Bolide SDK push consumer of a fresh group on
// topic, from the first offset.
func startSDKConsumer(t testing.TB, c *cluster, topic string) *sdkCollector {
	t.Helper()
	col := &sdkCollector{}
	opts := []client.ConsumerOption{client.WithConsumeFrom(client.ConsumeFromFirst)}
	for _, o := range sdkOpts(c) {
		opts = append(opts, o)
	}
	pc, err := client.NewPushConsumer(uniq("sdkcg"), opts...)
	if err != nil {
		t.Fatalf("new SDK consumer: %v", err)
	}
	if err := pc.Subscribe(topic, "*", client.ConcurrentListener(col.listener)); err != nil {
		t.Fatalf("SDK subscribe: %v", err)
	}
	if err := pc.Start(context.Background()); err != nil {
		t.Fatalf("start SDK consumer: %v", err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return col
}

// checkSDK compares a message an SDK consumer got with what a v5
// producer sent.
func checkSDK(t testing.TB, id string, want v5msg, m *client.MessageExt) {
	t.Helper()
	if m.MsgID != id {
		t.Errorf("MsgID %s, want %s", m.MsgID, id)
	}
	if string(m.Body) != want.body || m.Tag != want.tag || m.Topic != want.topic {
		t.Errorf("%s: topic %s body %q tag %q, want %s %q %q", id, m.Topic, m.Body, m.Tag, want.topic, want.body, want.tag)
	}
	if len(m.Keys) != len(want.keys) {
		t.Errorf("%s: keys %v, want %v", id, m.Keys, want.keys)
	} else {
		for i := range m.Keys {
			if m.Keys[i] != want.keys[i] {
				t.Errorf("%s: keys %v, want %v", id, m.Keys, want.keys)
				break
			}
		}
	}
	for k, v := range want.props {
		if m.Properties[k] != v {
			t.Errorf("%s: property %s = %q, want %q (all: %v)", id, k, m.Properties[k], v, m.Properties)
		}
	}
	if want.group != "" && m.ShardingKey != want.group {
		t.Errorf("%s: sharding key %q, want the message group %q", id, m.ShardingKey, want.group)
	}
}
