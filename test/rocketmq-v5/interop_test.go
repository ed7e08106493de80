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
