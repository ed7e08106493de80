package rocketmqgo_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// Interop with RocketMQ 5's gRPC protocol: the official v5 Go client
// (rocketmq-clients/golang/v5, whose suite is test/rocketmq-v5) and
// rocketmq-client-go in one test binary, on one topic.

// needV5 skips the test while the cluster answers one of the RPCs with
// UNIMPLEMENTED.
func needV5(t testing.TB, c *cluster, rpcs ...string) {
	t.Helper()
	var lack []string
	for _, r := range rpcs {
		if c.V5Unimplemented()[r] {
			lack = append(lack, r)
		}
	}
	if len(lack) > 0 {
		t.Skipf("missing on the server: %s (UNIMPLEMENTED)", strings.Join(lack, ", "))
	}
}

func v5Config(c *cluster, group string) *rmq.Config {
	return &rmq.Config{Endpoint: c.NameSrv, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// v5Start runs a v5 client's Start (which waits for the broker's Settings)
// with a bound.
func v5Start(t testing.TB, what string, start func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- start() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("start v5 %s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("start v5 %s: not returned in 30 s", what)
	}
}

// TestInteropV5ToRemoting: messages a v5 producer sends are consumed by a
// rocketmq-client-go push consumer with the v5 message id as MsgId, and
// the same tag, keys and properties.
func TestInteropV5ToRemoting(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		needV5(t, c, "QueryRoute", "Telemetry", "SendMessage")
		topic := c.NewTopic(t, "v5tormq", 2)
		col := &collector{}
		startPushConsumer(t, c, uniq("v5tormqg"), topic, "*", col.listener("push"))
		p, err := rmq.NewProducer(v5Config(c, ""), rmq.WithTopics(topic))
		if err != nil {
			t.Fatal(err)
		}
		v5Start(t, "producer", p.Start)
		t.Cleanup(func() { _ = p.GracefulStop() })
		want := map[string]int{}
		for i := range 10 {
			m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("v5-body-%d", i))}
			m.SetTag("fromv5")
			m.SetKeys(fmt.Sprintf("key-%d", i), "shared-key")
			m.AddProperty("seq", fmt.Sprint(i))
			m.AddProperty("color", "bleu-ü-✓")
			r, err := p.Send(context.Background(), m)
			if err != nil {
				t.Fatalf("v5 send: %v", err)
			}
			want[r[0].MessageID] = i
		}
		col.waitDistinct(t, len(want), 30*time.Second)
		for id, ds := range col.byMsgID() {
			i, ok := want[id]
			if !ok {
				t.Errorf("consumed %s, not sent by the v5 producer", id)
				continue
			}
			m := ds[0].msg
			if string(m.Body) != fmt.Sprintf("v5-body-%d", i) || m.GetTags() != "fromv5" ||
				m.GetKeys() != fmt.Sprintf("key-%d shared-key", i) ||
				m.GetProperty("seq") != fmt.Sprint(i) || m.GetProperty("color") != "bleu-ü-✓" {
				t.Errorf("%s arrived as body %q tags %q keys %q properties %v", id, m.Body, m.GetTags(), m.GetKeys(), m.GetProperties())
			}
		}
	})
}

// TestInteropRemotingToV5: messages rocketmq-client-go sends are received
// by a v5 simple consumer with the MsgId as message id, and the same tag,
// keys and properties.
func TestInteropRemotingToV5(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		needV5(t, c, "QueryRoute", "Telemetry", "ReceiveMessage", "AckMessage")
		topic := c.NewTopic(t, "rmqtov5", 2)
		sc, err := rmq.NewSimpleConsumer(v5Config(c, uniq("rmqtov5g")), rmq.WithSimpleAwaitDuration(2*time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
		if err != nil {
			t.Fatal(err)
		}
		v5Start(t, "simple consumer", sc.Start)
		t.Cleanup(func() { _ = sc.GracefulStop() })
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 10 {
			msgs = append(msgs, testMessage(topic, i, "fromrmq"))
		}
		ss := sendAll(t, c, p, msgs)
		want := map[string]*primitive.Message{}
		for _, s := range ss {
			want[s.res.MsgID] = s.msg
		}
		got := map[string]*rmq.MessageView{}
		deadline := time.Now().Add(60 * time.Second)
		for len(got) < len(want) && time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			mvs, err := sc.Receive(ctx, 16, 20*time.Second)
			cancel()
			if err != nil {
				continue
			}
			for _, mv := range mvs {
				got[mv.GetMessageId()] = mv
				_ = sc.Ack(context.Background(), mv)
			}
		}
		for id, m := range want {
			mv := got[id]
			if mv == nil {
				t.Errorf("%s not received by the v5 consumer", id)
				continue
			}
			keys := slices.Clone(mv.GetKeys())
			slices.Sort(keys)
			wantKeys := strings.Fields(m.GetKeys())
			slices.Sort(wantKeys)
			if string(mv.GetBody()) != string(m.Body) || mv.GetTag() == nil || *mv.GetTag() != m.GetTags() ||
				!slices.Equal(keys, wantKeys) {
				t.Errorf("%s arrived as body %q tag %v keys %v", id, mv.GetBody(), mv.GetTag(), mv.GetKeys())
			}
			for _, k := range userProps {
				if mv.GetProperties()[k] != m.GetProperty(k) {
					t.Errorf("%s: property %s = %q, want %q", id, k, mv.GetProperties()[k], m.GetProperty(k))
				}
			}
		}
		for id := range got {
			if want[id] == nil {
				t.Errorf("received %s, not sent here", id)
			}
		}
	})
}
