package rocketmqv5

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/proccluster"
)

// TestInteropV5ToSDK: messages a v5 producer sends are consumed by
// Bolide's SDK with the same id (the v5 message id is UNIQ_KEY), keys,
// tag and properties, and the message group as sharding key.
func TestInteropV5ToSDK(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "v5tosdk", "", 2)
		p := newProducer(t, c, rmq.WithTopics(topic))
		col := startSDKConsumer(t, c, topic)
		var msgs []v5msg
		for i := range 10 {
			m := testMsg(topic, i, "interop")
			if i%2 == 1 {
				m.group = fmt.Sprintf("mg-%d", i%3)
			}
			msgs = append(msgs, m)
		}
		ids := sendAll(t, p, msgs)
		col.waitIDs(t, ids, 30*time.Second)
		for i, id := range ids {
			checkSDK(t, id, msgs[i], col.get(id)[0].msg)
		}
	})
}

// TestInteropSDKToV5: messages Bolide's SDK sends are received by a v5
// simple consumer with the SDK's MsgID as message id, and the same keys,
// tag and properties.
func TestInteropSDKToV5(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "sdktov5", "", 2)
		group := uniq("sdktov5g")
		sc := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		sp := newSDKProducer(t, c)
		want := map[string]v5msg{}
		for i := range 10 {
			m := testMsg(topic, i, "fromsdk")
			m.props["origin"] = "sdk"
			res, err := sp.Send(context.Background(), &client.Message{Topic: topic, Tag: m.tag, Keys: m.keys,
				Body: []byte(m.body), Properties: m.props})
			if err != nil {
				t.Fatalf("SDK send: %v", err)
			}
			want[res.MsgID] = m
		}
		got, _ := receiveAll(t, sc, want, 30*time.Second, 60*time.Second, true)
		for id, mv := range got {
			checkView(t, id, want[id], mv)
		}
		waitAcked(t, c, group, topic, 30*time.Second)
	})
}

// TestPlaintext: the client with TLS off (rocketmq.client.enableSsl=false,
// read when the client package initialises) works against the same port:
// the test runs again in a child process with that environment.
func TestPlaintext(t *testing.T) {
	if os.Getenv(envChild) == "plaintext" {
		if rmq.EnableSsl {
			t.Fatal("rocketmq.client.enableSsl=false did not turn TLS off")
		}
		c := harness.Private(t, proccluster.OneGroup)
		topic := newTopic(t, c, "plain", "", 2)
		group := uniq("plaing")
		p := newProducer(t, c, rmq.WithTopics(topic))
		sc := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		want, _ := sendBatch(t, p, topic, 5, "plain")
		got, _ := receiveAll(t, sc, want, 30*time.Second, 60*time.Second, true)
		for id, mv := range got {
			checkView(t, id, want[id], mv)
		}
		return
	}
	t.Parallel()
	if !rmq.EnableSsl {
		t.Fatal("the client's default is TLS, yet EnableSsl is false in the parent")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPlaintext$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=plaintext", "rocketmq.client.enableSsl=false", "BOLIDE_BIN="+binDir)
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("the plaintext child failed: %v", err)
	}
	if i := strings.Index(string(out), "missing"); strings.Contains(string(out), "--- SKIP") && i >= 0 {
		line, _, _ := strings.Cut(string(out)[i:], "\n")
		t.Skipf("the plaintext child skipped: %s", line)
	}
}

// TestInteropPOPShared: a v5 simple consumer and a Bolide SDK simple
// consumer in one group share its POP state: every message goes to one of
// them once, the same message (id, tag, keys, properties) whichever front
// end hands it out, and one left to run out of invisibility by the v5
// consumer comes again (attempt 2) to either.
func TestInteropPOPShared(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "popshared", "NORMAL", 2)
		group := uniq("popsharedg")
		p := newProducer(t, c, rmq.WithTopics(topic))
		v5c := newSimpleConsumer(t, c, group, topic, "*", time.Second)
		sdkc, err := client.NewSimpleConsumer(group, map[string]string{topic: "*"}, time.Second, sdkOpts(c)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := sdkc.Start(context.Background()); err != nil {
			t.Fatalf("start the SDK simple consumer: %v", err)
		}
		t.Cleanup(func() { _ = sdkc.Close() })
		want, ids := sendBatch(t, p, topic, 20, "shared")
		type delivery struct {
			by      string
			attempt int32
		}
		got := map[string][]delivery{}
		acked := map[string]bool{}
		expire := ""
		deadline := time.Now().Add(90 * time.Second)
		for len(acked) < len(ids) && time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			mvs, err := v5c.Receive(ctx, 4, 10*time.Second)
			cancel()
			if err != nil && !isNotFound(err) {
				t.Logf("v5 receive: %v", err)
			}
			for _, mv := range mvs {
				id := mv.GetMessageId()
				got[id] = append(got[id], delivery{"v5", mv.GetDeliveryAttempt()})
				checkView(t, id, want[id], mv)
				if expire == "" {
					expire = id // left to run out of invisibility
					continue
				}
				if err := v5c.Ack(context.Background(), mv); err != nil {
					t.Errorf("v5 ack: %v", err)
				}
				acked[id] = true
			}
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			sms, err := sdkc.Receive(ctx, 4, 10*time.Second)
			cancel()
			if err != nil {
				t.Logf("SDK receive: %v", err)
			}
			for _, m := range sms {
				got[m.MsgID] = append(got[m.MsgID], delivery{"sdk", m.DeliveryAttempt})
				checkSDK(t, m.MsgID, want[m.MsgID], &m.MessageExt)
				if err := sdkc.Ack(context.Background(), m); err != nil {
					t.Errorf("SDK ack: %v", err)
				}
				acked[m.MsgID] = true
			}
		}
		by := map[string]int{}
		for _, id := range ids {
			ds := got[id]
			if len(ds) > 0 {
				by[ds[0].by]++
			}
			switch {
			case id == expire && (len(ds) != 2 || ds[1].attempt != 2):
				t.Errorf("%s, left to expire: deliveries %v, want a second with attempt 2", id, ds)
			case id != expire && (len(ds) != 1 || ds[0].attempt != 1):
				t.Errorf("%s: deliveries %v, want one with attempt 1", id, ds)
			}
		}
		t.Logf("first deliveries by front end: %v; the expired one went again to %v", by, got[expire])
		if by["v5"] == 0 || by["sdk"] == 0 {
			t.Errorf("one front end got nothing: %v", by)
		}
		waitAcked(t, c, group, topic, 30*time.Second)
	})
}
