package rocketmqv5

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/bolide-mq/bolide/client"
)

// config is the v5 client configuration for c: the access point is the
// NameServer.
func config(c *cluster, group string) *rmq.Config {
	return &rmq.Config{Endpoint: c.NameSrv, ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{}}
}

// startClient runs start (a client's Start, which blocks until the
// broker's Settings arrive on the Telemetry stream) and fails the test
// when it fails or does not return in 30 s.
//
// One failure is retried: the client's own race, which changes its
// TelemetryCommand while gRPC marshals it ("error while marshaling ...
// size mismatch", golang/protobuf#1609), before anything reaches the
// broker.
func startClient(t testing.TB, what string, start func() error) {
	t.Helper()
	err := startWithin30s(t, what, start)
	if err != nil && strings.Contains(err.Error(), "error while marshaling") && strings.Contains(err.Error(), "size mismatch") {
		t.Logf("start %s: the client's marshaling race, starting again: %v", what, err)
		err = startWithin30s(t, what, start)
	}
	if err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
}

// startWithin30s returns what start returns, failing the test when it does
// not return in 30 s.
func startWithin30s(t testing.TB, what string, start func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- start() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("start %s: not returned in 30 s (no Settings on the Telemetry stream?)", what)
		return nil
	}
}

// newProducer starts a v5 producer on topics, stopped at the end of the
// test.
func newProducer(t testing.TB, c *cluster, opts ...rmq.ProducerOption) rmq.Producer {
	t.Helper()
	needRPCs(t, c, "QueryRoute", "Telemetry", "SendMessage")
	p, err := rmq.NewProducer(config(c, ""), opts...)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	startClient(t, "producer", p.Start)
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

// newSimpleConsumer starts a v5 simple consumer of group on topic with the
// tag expression filter ("*": all).
func newSimpleConsumer(t testing.TB, c *cluster, group, topic, filter string, await time.Duration) rmq.SimpleConsumer {
	t.Helper()
	needRPCs(t, c, "QueryRoute", "Telemetry", "ReceiveMessage", "AckMessage")
	sc, err := rmq.NewSimpleConsumer(config(c, group), rmq.WithSimpleAwaitDuration(await),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.NewFilterExpression(filter)}))
	if err != nil {
		t.Fatalf("new simple consumer: %v", err)
	}
	startClient(t, "simple consumer", sc.Start)
	t.Cleanup(func() { _ = sc.GracefulStop() })
	return sc
}

// newPushConsumer starts a v5 push consumer of group on topic (all tags)
// with listener.
func newPushConsumer(t testing.TB, c *cluster, group, topic string, listener func(*rmq.MessageView) rmq.ConsumerResult, opts ...rmq.PushConsumerOption) rmq.PushConsumer {
	t.Helper()
	needRPCs(t, c, "QueryRoute", "QueryAssignment", "Telemetry", "ReceiveMessage", "AckMessage", "ChangeInvisibleDuration")
	pc, err := rmq.NewPushConsumer(config(c, group), append([]rmq.PushConsumerOption{
		rmq.WithPushAwaitDuration(5 * time.Second),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: listener})}, opts...)...)
	if err != nil {
		t.Fatalf("new push consumer: %v", err)
	}
	startClient(t, "push consumer", pc.Start)
	t.Cleanup(func() { _ = pc.GracefulStop() })
	return pc
}

// cli runs the bolide CLI against c's NameServer.
func cli(c *cluster, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "bolide"), append([]string{"-n", c.NameSrv}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("bolide %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// cliMissing reports whether a CLI failure says the flag or command does
// not exist yet.
func cliMissing(out string) bool {
	for _, s := range []string{"unknown flag", "unknown command", "unknown shorthand"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// newTopic creates a fresh topic with queues queues per broker group and
// the message type typ ("" for none: MIXED) with the CLI (bolide topic
// create --type), or with the SDK's admin calls while the CLI lacks the
// flag.
func newTopic(t testing.TB, c *cluster, prefix, typ string, queues int) string {
	t.Helper()
	topic := uniq(prefix)
	if typ == "" {
		c.CreateTopic(t, topic, queues)
		return topic
	}
	out, err := cli(c, "topic", "create", topic, "--queues", fmt.Sprint(queues), "--type", typ)
	if err != nil {
		if !cliMissing(out) {
			t.Fatal(err)
		}
		t.Logf("bolide topic create has no --type: %s created with the SDK", topic)
		c.CreateTopicSpec(t, client.TopicSpec{Name: topic, Queues: queues, MessageType: typ})
		return topic
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitRouted(ctx, topic); err != nil {
		t.Fatal(err)
	}
	return topic
}

// newGroup creates a fresh subscription group with the CLI's group create
// flags (--fifo, --max-delivery-attempts N, --retry-backoff d,d,...), or
// with the SDK's admin calls while the CLI lacks them.
func newGroup(t testing.TB, c *cluster, prefix string, flags ...string) string {
	t.Helper()
	group := uniq(prefix)
	if len(flags) == 0 {
		return group
	}
	out, err := cli(c, append([]string{"group", "create", group}, flags...)...)
	if err == nil {
		return group
	}
	if !cliMissing(out) {
		t.Fatal(err)
	}
	t.Logf("bolide group create lacks %s: %s created with the SDK", strings.Join(flags, " "), group)
	spec := client.SubscriptionGroupSpec{Name: group}
	for i := 0; i < len(flags); i++ {
		switch flags[i] {
		case "--fifo":
			spec.FIFO = true
		case "--max-delivery-attempts":
			i++
			spec.MaxDeliveryAttempts, _ = strconv.Atoi(flags[i])
		case "--retry-backoff":
			i++
			for _, d := range strings.Split(flags[i], ",") {
				v, err := time.ParseDuration(d)
				if err != nil {
					t.Fatalf("--retry-backoff %s: %v", flags[i], err)
				}
				spec.RetryBackoff = append(spec.RetryBackoff, v)
			}
		default:
			t.Fatalf("newGroup: flag %s", flags[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Admin.CreateSubscriptionGroup(ctx, spec); err != nil {
		t.Fatalf("create group %s: %v", group, err)
	}
	return group
}

// needRPCs skips the test when the cluster answers one of the RPCs with
// UNIMPLEMENTED (the server side lands in pieces), naming them.
func needRPCs(t testing.TB, c *cluster, rpcs ...string) {
	t.Helper()
	missing := c.V5Unimplemented()
	var lack []string
	for _, r := range rpcs {
		if missing[r] {
			lack = append(lack, r)
		}
	}
	if len(lack) > 0 {
		t.Skipf("missing on the server: %s (UNIMPLEMENTED)", strings.Join(lack, ", "))
	}
}

// v5msg is a message of the tests with what identifies it.
type v5msg struct {
	topic, tag, group string
	keys              []string
	props             map[string]string
	body              string
}

func (m v5msg) build() *rmq.Message {
	msg := &rmq.Message{Topic: m.topic, Body: []byte(m.body)}
	if m.tag != "" {
		msg.SetTag(m.tag)
	}
	if len(m.keys) > 0 {
		msg.SetKeys(m.keys...)
	}
	for k, v := range m.props {
		msg.AddProperty(k, v)
	}
	if m.group != "" {
		msg.SetMessageGroup(m.group)
	}
	return msg
}

// testMsg is message i of a test: tag, two keys, two properties.
func testMsg(topic string, i int, tag string) v5msg {
	return v5msg{topic: topic, tag: tag, keys: []string{fmt.Sprintf("k%d", i), fmt.Sprintf("key-%d", i)},
		props: map[string]string{"idx": fmt.Sprint(i), "origin": "v5"}, body: fmt.Sprintf("body-%d-%s", i, topic)}
}

// checkView compares a received message with what was sent.
func checkView(t testing.TB, id string, want v5msg, mv *rmq.MessageView) {
	t.Helper()
	if mv.GetMessageId() != id {
		t.Errorf("message id %s, want %s", mv.GetMessageId(), id)
	}
	if string(mv.GetBody()) != want.body {
		t.Errorf("%s: body %q, want %q", id, mv.GetBody(), want.body)
	}
	if tag := mv.GetTag(); (tag == nil && want.tag != "") || (tag != nil && *tag != want.tag) {
		t.Errorf("%s: tag %v, want %q", id, deref(tag), want.tag)
	}
	if got := slices.Sorted(slices.Values(mv.GetKeys())); !slices.Equal(got, slices.Sorted(slices.Values(want.keys))) {
		t.Errorf("%s: keys %v, want %v", id, mv.GetKeys(), want.keys)
	}
	for k, v := range want.props {
		if got := mv.GetProperties()[k]; got != v {
			t.Errorf("%s: property %s = %q, want %q (all: %v)", id, k, got, v, mv.GetProperties())
		}
	}
	if g := mv.GetMessageGroup(); want.group != "" && (g == nil || *g != want.group) {
		t.Errorf("%s: message group %v, want %q", id, deref(g), want.group)
	}
	if mv.GetTopic() != want.topic {
		t.Errorf("%s: topic %s, want %s", id, mv.GetTopic(), want.topic)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// sendAll sends msgs synchronously and returns the message ids in order.
func sendAll(t testing.TB, p rmq.Producer, msgs []v5msg) []string {
	t.Helper()
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		r, err := p.Send(context.Background(), m.build())
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if len(r) != 1 || r[0].MessageID == "" {
			t.Fatalf("send %d: receipts %+v", i, r)
		}
		ids[i] = r[0].MessageID
	}
	return ids
}

// receiveAll receives with sc until every id of want has come (acking
// each when ack), or d passes; it returns the views by id (the last
// delivery) and how often each came.
func receiveAll(t testing.TB, sc rmq.SimpleConsumer, want map[string]v5msg, invisible, d time.Duration, ack bool) (map[string]*rmq.MessageView, map[string]int) {
	t.Helper()
	got := map[string]*rmq.MessageView{}
	count := map[string]int{}
	deadline := time.Now().Add(d)
	for len(got) < len(want) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		mvs, err := sc.Receive(ctx, 16, invisible)
		cancel()
		if err != nil {
			if !isNotFound(err) {
				t.Logf("receive: %v", err)
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		for _, mv := range mvs {
			id := mv.GetMessageId()
			if _, ok := want[id]; !ok {
				t.Errorf("received a message not sent here: %s (%s)", id, mv.GetBody())
				continue
			}
			got[id] = mv
			count[id]++
			if ack {
				if err := sc.Ack(context.Background(), mv); err != nil {
					t.Errorf("ack %s: %v", id, err)
				}
			}
		}
	}
	if len(got) < len(want) {
		var lack []string
		for id := range maps.Keys(want) {
			if got[id] == nil {
				lack = append(lack, id)
			}
		}
		t.Fatalf("received %d of %d messages in %v; missing %v", len(got), len(want), d, lack)
	}
	return got, count
}

// isNotFound reports whether a Receive error is MESSAGE_NOT_FOUND (no
// message after the long poll).
func isNotFound(err error) bool {
	var e *rmq.ErrRpcStatus
	if errors.As(err, &e) {
		return e.Code == int32(v2.Code_MESSAGE_NOT_FOUND)
	}
	return strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") || strings.Contains(err.Error(), "no new message")
}

// expectNothing receives once more with await and fails if a message of
// want comes.
func expectNothing(t testing.TB, sc rmq.SimpleConsumer, want map[string]v5msg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mvs, err := sc.Receive(ctx, 16, 20*time.Second)
	if err != nil && !isNotFound(err) {
		t.Errorf("receive: %v", err)
	}
	for _, mv := range mvs {
		if _, ok := want[mv.GetMessageId()]; ok {
			t.Errorf("message %s delivered again (attempt %d) after its ack", mv.GetMessageId(), mv.GetDeliveryAttempt())
		}
	}
}

// waitAcked waits until the group's committed offsets of topic reach the
// end of every queue (POP's acked low watermark, as ConsumeStats reports
// it): the server's view that every message was acknowledged.
func waitAcked(t testing.TB, c *cluster, group, topic string, d time.Duration) {
	t.Helper()
	var last string
	if !waitFor(d, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := c.Admin.ConsumeStats(ctx, group, topic)
		if err != nil {
			last = err.Error()
			return false
		}
		var lag []string
		for _, q := range st.Queues {
			if q.ConsumerOffset < q.BrokerOffset {
				lag = append(lag, fmt.Sprintf("%s/%d at %d of %d", q.Queue.BrokerName, q.Queue.QueueID, q.ConsumerOffset, q.BrokerOffset))
			}
		}
		last = strings.Join(lag, ", ")
		return len(lag) == 0
	}) {
		t.Errorf("group %s on %s: committed offsets behind the queues' ends after %v: %s", group, topic, d, last)
	}
}
