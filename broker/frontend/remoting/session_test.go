package remoting_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// brokerCalls collects the requests the broker sends a test client.
type brokerCalls chan *rmq.Command

func (c brokerCalls) ServeRemoting(_ context.Context, _ *rmq.Conn, req *rmq.Command) *rmq.Command {
	c <- req
	return nil
}

// next waits for the broker's next request of code.
func (c brokerCalls) next(t *testing.T, code int32, within time.Duration) *rmq.Command {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case req := <-c:
			if req.Code == code {
				return req
			}
		case <-deadline:
			t.Fatalf("no request %d from the broker within %v", code, within)
		}
	}
}

// none checks that no request of code arrives within d.
func (c brokerCalls) none(t *testing.T, code int32, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case req := <-c:
			if req.Code == code {
				t.Fatalf("unexpected request %d: %v", code, req.Ext)
			}
		case <-deadline:
			return
		}
	}
}

// goHeartbeat is a HEART_BEAT body as the Go client writes it: codeSet as
// strings, subVersion in nanoseconds.
func goHeartbeat(clientID, producer, consumer, topic string) []byte {
	return fmt.Appendf(nil, `{"clientID":%q,"producerDataSet":[{"groupName":%q}],"consumerDataSet":[{"groupName":%q,`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",`+
		`"subscriptionDataSet":[{"classFilterMode":false,"topic":%q,"subString":"TagA || TagB","tagsSet":["TagA","TagB"],`+
		`"codeSet":["2598919","2598920"],"subVersion":1795993978200681467,"expressionType":"TAG"},`+
		`{"classFilterMode":false,"topic":"%%RETRY%%%s","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1795993978197633119,"expressionType":"TAG"}],`+
		`"unitMode":false}]}`, clientID, producer, consumer, topic, consumer)
}

// javaHeartbeat is one as the Java client (fastjson) writes it: codeSet as
// numbers, a fingerprint, alphabetical keys.
func javaHeartbeat(clientID, consumer, topic string) []byte {
	return fmt.Appendf(nil, `{"clientID":%q,"consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"consumeType":"CONSUME_PASSIVELY","groupName":%q,"messageModel":"CLUSTERING","subscriptionDataSet":[`+
		`{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1733050000000,`+
		`"tagsSet":["TagA"],"topic":%q}],"unitMode":false}],"heartbeatFingerprint":0,`+
		`"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}`, clientID, consumer, topic)
}

func waitMembers(t *testing.T, b *server.Server, group string, want ...string) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("members %v of %s", want, group), func() error {
		ids, _ := b.ConsumerList(group)
		if !slices.Equal(ids, want) {
			return fmt.Errorf("members %v", ids)
		}
		return nil
	})
}

// TestHeartbeatRegistersAndNotifies: heartbeats from the Go and the Java
// client register their consumer groups; a member joining, unregistering
// or disconnecting makes the broker send NOTIFY_CONSUMER_IDS_CHANGED to
// the others.
func TestHeartbeatRegistersAndNotifies(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "orders", 4)
	callsA := make(brokerCalls, 64)
	a := dialBroker(t, b.Addr(), callsA)
	if resp := invoke(t, a, rmq.HeartBeat, nil, goHeartbeat("10.0.0.1@1", "PG", "CG", "orders")); resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %q", resp.Code, resp.Remark)
	}
	waitMembers(t, b, "CG", "10.0.0.1@1")
	callsA.next(t, rmq.NotifyConsumerIDsChanged, 5*time.Second) // its own joining
	// The clustering group's retry topic exists (Java creates it on the
	// heartbeat) and the subscription is registered.
	if _, err := b.QueueState("%RETRY%CG", 0); err != nil {
		t.Fatalf("retry topic: %v", err)
	}
	var subs string
	for _, g := range b.ConsumerGroups() {
		if g.Group == "CG" {
			subs = fmt.Sprint(g.Subscriptions)
		}
	}
	if subs != "[{%RETRY%CG * } {orders TagA || TagB }]" { // Topic, Expression, Type ("" is TAG)
		t.Fatalf("subscriptions %s", subs)
	}

	// A Java client joins the same group on another connection.
	callsB := make(brokerCalls, 64)
	bc := dialBroker(t, b.Addr(), callsB)
	if resp := invoke(t, bc, rmq.HeartBeat, nil, javaHeartbeat("10.0.0.2@2", "CG", "orders")); resp.Code != rmq.Success {
		t.Fatalf("java heartbeat: %d %q", resp.Code, resp.Remark)
	}
	waitMembers(t, b, "CG", "10.0.0.1@1", "10.0.0.2@2")
	n := callsA.next(t, rmq.NotifyConsumerIDsChanged, 5*time.Second)
	if n.String("consumerGroup") != "CG" || !n.IsOneway() {
		t.Fatalf("notify: %+v", n)
	}
	// A later heartbeat that changes nothing notifies no one.
	invoke(t, a, rmq.HeartBeat, nil, goHeartbeat("10.0.0.1@1", "PG", "CG", "orders"))
	callsB.next(t, rmq.NotifyConsumerIDsChanged, 5*time.Second) // B's own joining
	callsB.none(t, rmq.NotifyConsumerIDsChanged, 300*time.Millisecond)

	// The Java client unregisters its group at shutdown.
	if resp := invoke(t, bc, rmq.UnregisterClient, map[string]string{"clientID": "10.0.0.2@2", "consumerGroup": "CG"}, nil); resp.Code != rmq.Success {
		t.Fatalf("unregister: %d %q", resp.Code, resp.Remark)
	}
	waitMembers(t, b, "CG", "10.0.0.1@1")
	callsA.next(t, rmq.NotifyConsumerIDsChanged, 5*time.Second)

	// The Go client never unregisters: its connection's close is how the
	// broker learns it left.
	if resp := invoke(t, bc, rmq.HeartBeat, nil, javaHeartbeat("10.0.0.2@2", "CG", "orders")); resp.Code != rmq.Success {
		t.Fatalf("heartbeat again: %d %q", resp.Code, resp.Remark)
	}
	waitMembers(t, b, "CG", "10.0.0.1@1", "10.0.0.2@2")
	callsA.next(t, rmq.NotifyConsumerIDsChanged, 5*time.Second)
	_ = bc.Close()
	waitMembers(t, b, "CG", "10.0.0.1@1")
	callsA.next(t, rmq.NotifyConsumerIDsChanged, 5*time.Second)
}

func TestHeartbeatErrors(t *testing.T) {
	b := startBroker(t)
	c := dialBroker(t, b.Addr(), nil)
	for _, tc := range []struct {
		body string
		code int32
	}{
		{`{"clientID":`, rmq.InvalidParameter},
		{`{"clientID":""}`, rmq.InvalidParameter},
		{`{"clientID":"x@1","consumerDataSet":[{"groupName":"bad group!","subscriptionDataSet":[]}]}`, rmq.InvalidParameter},
		{`{"clientID":"x@1","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subString":"a ||| b"}]}]}`, rmq.SubscriptionParseFailed},
		{`{"clientID":"x@1","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subString":"a || || b ||"}]}]}`, rmq.Success},
		{`{"clientID":"x@1","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subString":"a > 1","expressionType":"SQL92"}]}]}`, rmq.Success},
		// An SQL92 condition that does not parse: the rest of the heartbeat registers.
		{`{"clientID":"x@1","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subString":"a >","expressionType":"SQL92"}]}]}`, rmq.SubscriptionParseFailed},
	} {
		if resp := invoke(t, c, rmq.HeartBeat, nil, []byte(tc.body)); resp.Code != tc.code {
			t.Errorf("%s: code %d %q, want %d", tc.body, resp.Code, resp.Remark, tc.code)
		}
	}
	waitMembers(t, b, "g", "x@1")
}

// TestSessionGoroutinesEnd: the goroutines a session starts (the notice
// forwarder) end with its connection, and those of connections still open
// end with the broker.
func TestSessionGoroutinesEnd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := startBroker(t)
	newTopic(t, b, "pay", 1)
	calls := make(brokerCalls, 16)
	for i := range 3 {
		c := dialBroker(t, b.Addr(), calls)
		invoke(t, c, rmq.HeartBeat, nil, goHeartbeat(fmt.Sprintf("10.0.0.1@%d", i), "PG", "CG", "pay"))
		invoke(t, c, rmq.SendMessage, sendExt("PG2", "pay", 0, 0, ""), []byte("x")) // a second producer group
		if i == 0 {
			_ = c.Close()
			<-c.Done()
		}
	}
	waitMembers(t, b, "CG", "10.0.0.1@1", "10.0.0.1@2")
	// A provisional session too.
	c := dialBroker(t, b.Addr(), nil)
	invoke(t, c, rmq.SendMessage, sendExt("PG3", "pay", 0, 0, ""), []byte("x"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
