package grpcv5_test

import (
	"bytes"
	"strings"
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
)

// TestLiveMaxMessageSize: a RocketMQ 5 send is checked against the
// broker's maxMessageSize of the moment, and the settings a client is
// given name it. Raising the limit above the start value at runtime lets a
// larger body in; lowering it refuses it again.
func TestLiveMaxMessageSize(t *testing.T) {
	b := startBroker(t, func(o *broker.Options) { o.MaxMessageSize = 4096 })
	createTopic(t, b, "big", "NORMAL")
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	body := strings.Repeat("x", 10000)

	resp := send(t, c, ctx, newMessage("big", body))
	wantCode(t, "10000 bytes under a 4096-byte limit", resp.GetStatus(), v2.Code_MESSAGE_BODY_TOO_LARGE)
	if _, err := b.UpdateConfig(map[string]string{"maxMessageSize": "65536"}); err != nil {
		t.Fatal(err)
	}
	m := newMessage("big", body)
	mustSend(t, c, ctx, m)
	if got := findStored(t, b, "big", m.SystemProperties.MessageId); !bytes.Equal(got.Body, []byte(body)) {
		t.Fatalf("stored body of %d bytes, want %d", len(got.Body), len(body))
	}
	// A client that syncs its settings now is told the new limit.
	stream, got := handshake(t, c, newClientID(), producerSettings("big"))
	defer stream.CloseSend()
	if n := got.GetPublishing().GetMaxBodySize(); n != 65536 {
		t.Errorf("settings max_body_size %d, want 65536", n)
	}

	if _, err := b.UpdateConfig(map[string]string{"maxMessageSize": "8192"}); err != nil {
		t.Fatal(err)
	}
	resp = send(t, c, ctx, newMessage("big", body))
	wantCode(t, "10000 bytes under an 8192-byte limit", resp.GetStatus(), v2.Code_MESSAGE_BODY_TOO_LARGE)
	if !strings.Contains(resp.GetStatus().GetMessage(), "8192") {
		t.Errorf("refusal %q does not name the limit", resp.GetStatus().GetMessage())
	}
}
