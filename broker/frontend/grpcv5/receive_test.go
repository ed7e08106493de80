package grpcv5_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/frontend/grpcv5"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// consumeEnv is a broker on 127.0.0.1:0 (its port serves
// apache.rocketmq.v2) and a plaintext gRPC client of that port.
type consumeEnv struct {
	srv *server.Server
	svc *grpcv5.Service // for calls made without the wire
	cli v2.MessagingServiceClient
	ids *message.UniqueIDGenerator
}

// consumeClientID is the x-mq-client-id the tests' calls carry.
const consumeClientID = "test-host@1@0@consume"

// startConsumeEnv starts a broker (startBroker) and dials its port.
func startConsumeEnv(t *testing.T) *consumeEnv {
	t.Helper()
	srv := startBroker(t)
	return &consumeEnv{srv: srv, svc: grpcv5.New(srv.Broker, nil), cli: dial(t, srv),
		ids: message.NewUniqueIDGenerator(netip.MustParseAddr("127.0.0.1"))}
}

func (e *consumeEnv) createTopic(t *testing.T, name string, queues int32) {
	t.Helper()
	err := e.srv.CreateTopic(broker.TopicConfig{Name: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: broker.PermRead | broker.PermWrite}, false)
	if err != nil {
		t.Fatal(err)
	}
}

// sent is what the tests know of a message they stored.
type sent struct {
	id, tag string
	body    []byte
}

// send stores a message through the core, as any front end would.
func (e *consumeEnv) send(t *testing.T, topic string, queue int32, tag string, props map[string]string) sent {
	t.Helper()
	id := e.ids.Next()
	m := &message.Ext{QueueID: queue, BornTimestamp: time.Now().UnixMilli(),
		BornHost: netip.MustParseAddrPort("127.0.0.1:4242")}
	m.Topic = topic
	m.Body = []byte("body of " + id)
	m.Properties = map[string]string{message.PropertyUniqueKey: id}
	if tag != "" {
		m.Properties[message.PropertyTags] = tag
	}
	for k, v := range props {
		m.Properties[k] = v
	}
	if _, err := e.srv.Send(context.Background(), []*message.Ext{m}); err != nil {
		t.Fatal(err)
	}
	return sent{id: id, tag: tag, body: m.Body}
}

// callCtx is a call context carrying the client id, with a deadline.
func callCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", consumeClientID)
}

// received is one ReceiveMessage answer, checked for the protocol's shape.
type received struct {
	status *v2.Status
	msgs   []*v2.Message
}

// receiveReq is a simple consumer's receive of a topic for a group.
func receiveReq(group, topic string, batch int32, invisible time.Duration) *v2.ReceiveMessageRequest {
	return &v2.ReceiveMessageRequest{
		Group:             &v2.Resource{Name: group},
		MessageQueue:      &v2.MessageQueue{Topic: &v2.Resource{Name: topic}, Id: 0, Broker: &v2.Broker{Name: "broker-a"}},
		FilterExpression:  &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		BatchSize:         batch,
		InvisibleDuration: durationpb.New(invisible),
	}
}

// receive runs a ReceiveMessage and checks the stream: exactly one status
// first, messages only after an OK status, and a delivery timestamp last.
func (e *consumeEnv) receive(t *testing.T, ctx context.Context, req *v2.ReceiveMessageRequest) received {
	t.Helper()
	r, err := receiveStream(ctx, e.cli, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func receiveStream(ctx context.Context, cli v2.MessagingServiceClient, req *v2.ReceiveMessageRequest) (received, error) {
	stream, err := cli.ReceiveMessage(ctx, req)
	if err != nil {
		return received{}, err
	}
	var out received
	var frames []*v2.ReceiveMessageResponse
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return received{}, fmt.Errorf("receive stream: %w", err)
		}
		frames = append(frames, f)
	}
	if len(frames) < 2 {
		return received{}, fmt.Errorf("stream of %d frames, want a status and a delivery timestamp at least", len(frames))
	}
	st, ok := frames[0].Content.(*v2.ReceiveMessageResponse_Status)
	if !ok {
		return received{}, fmt.Errorf("first frame is %T, want the status", frames[0].Content)
	}
	out.status = st.Status
	if _, ok := frames[len(frames)-1].Content.(*v2.ReceiveMessageResponse_DeliveryTimestamp); !ok {
		return received{}, fmt.Errorf("last frame is %T, want the delivery timestamp", frames[len(frames)-1].Content)
	}
	for _, f := range frames[1 : len(frames)-1] {
		m, ok := f.Content.(*v2.ReceiveMessageResponse_Message)
		if !ok {
			return received{}, fmt.Errorf("middle frame is %T, want a message", f.Content)
		}
		out.msgs = append(out.msgs, m.Message)
	}
	if len(out.msgs) > 0 && out.status.GetCode() != v2.Code_OK {
		return received{}, fmt.Errorf("%d messages after status %v", len(out.msgs), out.status)
	}
	return out, nil
}

// receiveUntil receives until n messages have come (each receive long
// polls up to 5 s), within 60 s.
func (e *consumeEnv) receiveUntil(t *testing.T, req *v2.ReceiveMessageRequest, n int) []*v2.Message {
	t.Helper()
	var got []*v2.Message
	end := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(end) {
		req.LongPollingTimeout = durationpb.New(5 * time.Second)
		r := e.receive(t, callCtx(t, 10*time.Second), req)
		switch r.status.GetCode() {
		case v2.Code_OK:
			got = append(got, r.msgs...)
		case v2.Code_MESSAGE_NOT_FOUND:
		default:
			t.Fatalf("receive: %v", r.status)
		}
	}
	if len(got) < n {
		t.Fatalf("received %d messages in 60 s, want %d", len(got), n)
	}
	return got
}

func (e *consumeEnv) ack(t *testing.T, group, topic string, msgs ...*v2.Message) *v2.AckMessageResponse {
	t.Helper()
	req := &v2.AckMessageRequest{Group: &v2.Resource{Name: group}, Topic: &v2.Resource{Name: topic}}
	for _, m := range msgs {
		req.Entries = append(req.Entries, &v2.AckMessageEntry{
			MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()})
	}
	resp, err := e.cli.AckMessage(callCtx(t, 5*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestReceiveAndAck(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "orders", 4)
	var want []sent
	for i := range 3 {
		want = append(want, e.send(t, "orders", int32(i), "paid", map[string]string{
			message.PropertyKeys: "k1 k2", "color": "blue"}))
	}
	msgs := e.receiveUntil(t, receiveReq("billing", "orders", 32, 30*time.Second), 3)
	if len(msgs) != 3 {
		t.Fatalf("received %d messages, want 3", len(msgs))
	}
	byID := map[string]sent{}
	for _, s := range want {
		byID[s.id] = s
	}
	for _, m := range msgs {
		sp := m.GetSystemProperties()
		s, ok := byID[sp.GetMessageId()]
		if !ok {
			t.Fatalf("message id %q is none of the sent ones", sp.GetMessageId())
		}
		delete(byID, sp.GetMessageId())
		if string(m.GetBody()) != string(s.body) || sp.GetTag() != "paid" || m.GetTopic().GetName() != "orders" {
			t.Errorf("message %s: body %q tag %q topic %q", s.id, m.GetBody(), sp.GetTag(), m.GetTopic().GetName())
		}
		if sp.GetDeliveryAttempt() != 1 || sp.GetReceiptHandle() == "" || sp.QueueOffset == nil {
			t.Errorf("message %s: attempt %d handle %q offset %v", s.id, sp.GetDeliveryAttempt(), sp.GetReceiptHandle(), sp.QueueOffset)
		}
		if len(sp.GetKeys()) != 2 || m.GetUserProperties()["color"] != "blue" || len(m.GetUserProperties()) != 1 {
			t.Errorf("message %s: keys %q user properties %v", s.id, sp.GetKeys(), m.GetUserProperties())
		}
	}
	resp := e.ack(t, "billing", "orders", msgs...)
	wantCode(t, "ack", resp.GetStatus(), v2.Code_OK)
	if len(resp.GetEntries()) != 3 {
		t.Fatalf("ack answered %d entries, want 3", len(resp.GetEntries()))
	}
	for i, en := range resp.GetEntries() {
		if en.GetMessageId() != msgs[i].GetSystemProperties().GetMessageId() || en.GetStatus().GetCode() != v2.Code_OK {
			t.Errorf("ack entry %d: %v", i, en)
		}
	}
	// Acknowledged: nothing left, and the handles are spent.
	req := receiveReq("billing", "orders", 32, 30*time.Second)
	req.LongPollingTimeout = durationpb.New(500 * time.Millisecond)
	r := e.receive(t, callCtx(t, 5*time.Second), req)
	wantCode(t, "receive after ack", r.status, v2.Code_MESSAGE_NOT_FOUND)
	resp = e.ack(t, "billing", "orders", msgs[0])
	wantCode(t, "second ack", resp.GetStatus(), v2.Code_INVALID_RECEIPT_HANDLE)
}

// TestReceiveLongPollWakes: a receive parked on an empty topic answers the
// message sent while it waits.
func TestReceiveLongPollWakes(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "events", 2)
	req := receiveReq("g", "events", 8, 30*time.Second)
	req.LongPollingTimeout = durationpb.New(20 * time.Second)
	type result struct {
		r   received
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := receiveStream(callCtx(t, 25*time.Second), e.cli, req)
		done <- result{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // let the receive park first (the test holds either way)
	s := e.send(t, "events", 1, "", nil)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantCode(t, "long poll", res.r.status, v2.Code_OK)
	if len(res.r.msgs) != 1 || res.r.msgs[0].GetSystemProperties().GetMessageId() != s.id {
		t.Fatalf("long poll got %d messages, want the one sent", len(res.r.msgs))
	}
}

// TestReceiveNotFoundAfterPoll: an empty topic is MESSAGE_NOT_FOUND, and
// only once the requested poll has passed.
func TestReceiveNotFoundAfterPoll(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "quiet", 1)
	for _, tc := range []struct {
		name     string
		lpt      *durationpb.Duration
		deadline time.Duration
		atLeast  time.Duration
	}{
		{"requested", durationpb.New(1500 * time.Millisecond), 10 * time.Second, 1500 * time.Millisecond},
		// A simple consumer sends no polling time: the deadline decides
		// (deadline less a margin), even when it is short.
		{"from the deadline", nil, 3 * time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := receiveReq("g", "quiet", 8, 30*time.Second)
			req.LongPollingTimeout = tc.lpt
			start := time.Now()
			r := e.receive(t, callCtx(t, tc.deadline), req)
			wantCode(t, "empty topic", r.status, v2.Code_MESSAGE_NOT_FOUND)
			if el := time.Since(start); el < tc.atLeast {
				t.Fatalf("MESSAGE_NOT_FOUND after %v, before the poll of %v ended", el, tc.atLeast)
			}
		})
	}
}

func TestReceiveTagFilter(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "tagged", 1)
	a := e.send(t, "tagged", 0, "a", nil)
	e.send(t, "tagged", 0, "b", nil)
	c := e.send(t, "tagged", 0, "c", nil)
	req := receiveReq("g", "tagged", 32, 30*time.Second)
	req.FilterExpression = &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "a || c"}
	msgs := e.receiveUntil(t, req, 2)
	got := map[string]bool{}
	for _, m := range msgs {
		got[m.GetSystemProperties().GetMessageId()] = true
		if tag := m.GetSystemProperties().GetTag(); tag != "a" && tag != "c" {
			t.Errorf("filter a||c delivered tag %q", tag)
		}
	}
	if !got[a.id] || !got[c.id] || len(msgs) != 2 {
		t.Fatalf("filter a||c delivered %d messages %v", len(msgs), got)
	}
}

// TestReceiveSQLFilter: an SQL92 filter delivers exactly the messages
// whose properties (and tag) match it.
func TestReceiveSQLFilter(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "sqlf", 1)
	e.send(t, "sqlf", 0, "paid", map[string]string{"region": "us", "amount": "500"})
	want := e.send(t, "sqlf", 0, "paid", map[string]string{"region": "eu", "amount": "500"})
	e.send(t, "sqlf", 0, "refund", map[string]string{"region": "eu", "amount": "500"})
	e.send(t, "sqlf", 0, "paid", map[string]string{"region": "eu", "amount": "50"})
	e.send(t, "sqlf", 0, "paid", map[string]string{"region": "eu"})
	req := receiveReq("g", "sqlf", 32, 30*time.Second)
	req.FilterExpression = &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "region = 'eu' AND amount > 100 AND TAGS = 'paid'"}
	msgs := e.receiveUntil(t, req, 1)
	if len(msgs) != 1 || msgs[0].GetSystemProperties().GetMessageId() != want.id {
		t.Fatalf("SQL filter delivered %d messages, want only %s", len(msgs), want.id)
	}
	req.FilterExpression.Expression = "region = 'eu' AND"
	if st := e.receive(t, context.Background(), req).status; st.GetCode() != v2.Code_ILLEGAL_FILTER_EXPRESSION {
		t.Fatalf("a broken SQL filter: %v", st)
	}
}

// TestReceiveTagHashCollision: a message whose tag only shares its hash
// code with the subscribed tag ("Aa" and "BB" do, in Java's String
// hashCode) is not delivered.
func TestReceiveTagHashCollision(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "collide", 1)
	e.send(t, "collide", 0, "BB", nil)
	want := e.send(t, "collide", 0, "Aa", nil)
	req := receiveReq("g", "collide", 32, 30*time.Second)
	req.FilterExpression = &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "Aa"}
	msgs := e.receiveUntil(t, req, 1)
	if len(msgs) != 1 || msgs[0].GetSystemProperties().GetMessageId() != want.id {
		t.Fatalf("filter Aa delivered %d messages, first tag %q", len(msgs), msgs[0].GetSystemProperties().GetTag())
	}
	req.LongPollingTimeout = durationpb.New(0)
	if r := e.receive(t, callCtx(t, 5*time.Second), req); r.status.GetCode() != v2.Code_MESSAGE_NOT_FOUND {
		t.Fatalf("after the match: %v with %d messages", r.status, len(r.msgs))
	}
}

// TestReceiveAutoRenew: a push consumer's receive (auto_renew, no
// invisible duration) is served and its messages acknowledged.
func TestReceiveAutoRenew(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "pushed", 1)
	s := e.send(t, "pushed", 0, "", nil)
	req := receiveReq("push-group", "pushed", 32, 0)
	req.InvisibleDuration = nil
	req.AutoRenew = true
	attempt := "attempt-1"
	req.AttemptId = &attempt
	msgs := e.receiveUntil(t, req, 1)
	if msgs[0].GetSystemProperties().GetMessageId() != s.id {
		t.Fatalf("got %s, want %s", msgs[0].GetSystemProperties().GetMessageId(), s.id)
	}
	wantCode(t, "ack", e.ack(t, "push-group", "pushed", msgs...).GetStatus(), v2.Code_OK)
}

// TestReceiveExpiryRedelivers: a message not acknowledged within its
// invisible duration is delivered again with attempt 2, and the first
// handle is no longer accepted.
func TestReceiveExpiryRedelivers(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 10 s minimum invisible duration")
	}
	e := startConsumeEnv(t)
	e.createTopic(t, "slow", 1)
	s := e.send(t, "slow", 0, "", nil)
	req := receiveReq("g", "slow", 1, 10*time.Second)
	first := e.receiveUntil(t, req, 1)[0]
	again := e.receiveUntil(t, req, 1)[0]
	sp := again.GetSystemProperties()
	if sp.GetMessageId() != s.id || sp.GetDeliveryAttempt() != 2 {
		t.Fatalf("redelivery: id %s attempt %d, want %s attempt 2", sp.GetMessageId(), sp.GetDeliveryAttempt(), s.id)
	}
	if sp.GetReceiptHandle() == first.GetSystemProperties().GetReceiptHandle() {
		t.Fatal("redelivery reused the first receipt handle")
	}
	wantCode(t, "ack with the expired handle", e.ack(t, "g", "slow", first).GetStatus(), v2.Code_INVALID_RECEIPT_HANDLE)
	wantCode(t, "ack with the new handle", e.ack(t, "g", "slow", again).GetStatus(), v2.Code_OK)
}

// brokenStream is a ReceiveMessage stream whose Send fails after ok
// writes, as a client that went away mid-answer.
type brokenStream struct {
	grpc.ServerStream
	ctx  context.Context
	ok   int
	msgs []*v2.Message
}

func (s *brokenStream) Context() context.Context { return s.ctx }

func (s *brokenStream) Send(r *v2.ReceiveMessageResponse) error {
	if s.ok == 0 {
		return errors.New("connection reset")
	}
	s.ok--
	if m, ok := r.Content.(*v2.ReceiveMessageResponse_Message); ok {
		s.msgs = append(s.msgs, m.Message)
	}
	return nil
}

// TestReceiveBrokenStreamGivesBack: messages popped but not written
// because the stream broke become visible again soon, not after their
// invisible duration.
func TestReceiveBrokenStreamGivesBack(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "fragile", 1)
	for range 3 {
		e.send(t, "fragile", 0, "", nil)
	}
	// All three indexed, so that one receive takes them all.
	testutil.WaitFor(t, 10*time.Second, "3 messages dispatched", func() error {
		if st, err := e.srv.QueueState("fragile", 0); err != nil || st.MaxOffset < 3 {
			return fmt.Errorf("queue state %+v, %v", st, err)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := &brokenStream{ctx: ctx, ok: 2} // the status and one message
	req := receiveReq("g", "fragile", 3, 12*time.Hour)
	req.LongPollingTimeout = durationpb.New(5 * time.Second)
	if err := e.svc.ReceiveMessage(req, stream); err != nil {
		t.Fatal(err)
	}
	if len(stream.msgs) != 1 {
		t.Fatalf("the broken stream took %d messages, want 1", len(stream.msgs))
	}
	// The two unsent come back (attempt 2); the written one stays
	// invisible for its 12 h.
	back := e.receiveUntil(t, receiveReq("g", "fragile", 3, 30*time.Second), 2)
	for _, m := range back {
		if m.GetSystemProperties().GetMessageId() == stream.msgs[0].GetSystemProperties().GetMessageId() {
			t.Fatal("the message written before the break was handed out again")
		}
		if a := m.GetSystemProperties().GetDeliveryAttempt(); a != 2 {
			t.Fatalf("an unsent message came back with attempt %d, want 2", a)
		}
	}
	wantCode(t, "ack of the written one", e.ack(t, "g", "fragile", stream.msgs[0]).GetStatus(), v2.Code_OK)
}
