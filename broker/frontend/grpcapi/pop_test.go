package grpcapi_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// startBroker starts a broker on 127.0.0.1:0 without NameServers and
// returns a bolide.v1 Broker client of it.
func startBroker(t *testing.T) pb.BrokerClient {
	t.Helper()
	opts := broker.DefaultOptions(t.TempDir())
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 1000
	opts.Store.Index.SlotCount = 1000
	opts.Store.Index.MaxEntries = 4000
	opts.MaxMessageSize = 1 << 20
	b, err := server.New(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewBrokerClient(conn)
}

func code(t *testing.T, what string, st *pb.Status, err error, want pb.Code) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if st.GetCode() != want {
		t.Fatalf("%s: %v %q, want %v", what, st.GetCode(), st.GetMessage(), want)
	}
}

// TestPopBadInput: each malformed POP request gets its code; a message
// is received, acknowledged once, and its handle is no good afterwards or
// for another group.
func TestPopBadInput(t *testing.T) {
	c := startBroker(t)
	ctx := context.Background()
	r, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "pop", ReadQueueNums: 1, WriteQueueNums: 1}})
	code(t, "create topic", r.GetStatus(), err, pb.Code_OK)
	recv := func(req *pb.ReceiveRequest) *pb.ReceiveResponse {
		t.Helper()
		resp, err := c.Receive(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, tc := range []struct {
		name string
		req  *pb.ReceiveRequest
		want pb.Code
	}{
		{"unknown topic", &pb.ReceiveRequest{Group: "g", Topic: "nope", QueueId: -1, InvisibleMs: 10000}, pb.Code_TOPIC_NOT_EXIST},
		{"invisible 0", &pb.ReceiveRequest{Group: "g", Topic: "pop", QueueId: -1}, pb.Code_ILLEGAL_INVISIBLE_TIME},
		{"invisible 13h", &pb.ReceiveRequest{Group: "g", Topic: "pop", QueueId: -1, InvisibleMs: (13 * time.Hour).Milliseconds()}, pb.Code_ILLEGAL_INVISIBLE_TIME},
		{"illegal group", &pb.ReceiveRequest{Group: "bad/g", Topic: "pop", QueueId: -1, InvisibleMs: 10000}, pb.Code_ILLEGAL_GROUP},
		{"nothing yet", &pb.ReceiveRequest{Group: "g", Topic: "pop", QueueId: -1, InvisibleMs: 10000}, pb.Code_OK},
	} {
		resp := recv(tc.req)
		code(t, tc.name, resp.Status, nil, tc.want)
		if len(resp.Messages) != 0 {
			t.Fatalf("%s: %d messages", tc.name, len(resp.Messages))
		}
	}

	s, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: "pop", Body: []byte("one"),
		Properties: map[string]string{message.PropertyTags: "x"}}}})
	code(t, "send", s.GetStatus(), err, pb.Code_OK)
	resp := recv(&pb.ReceiveRequest{Group: "g", Topic: "pop", QueueId: -1, MaxMessages: 4, InvisibleMs: 60000, TagExpression: "x", PollTimeoutMs: 5000})
	code(t, "receive", resp.Status, nil, pb.Code_OK)
	if len(resp.Messages) != 1 {
		t.Fatalf("received %d messages", len(resp.Messages))
	}
	m := resp.Messages[0]
	e, err := message.Decode(m.Record)
	if err != nil || string(e.Body) != "one" || m.DeliveryAttempt != 1 || m.QueueOffset != 0 ||
		m.VisibleAtMs < time.Now().Add(50*time.Second).UnixMilli() {
		t.Fatalf("received %+v (%v)", m, err)
	}

	a, err := c.Ack(ctx, &pb.AckRequest{Group: "g", Topic: "pop"})
	code(t, "ack of nothing", a.GetStatus(), err, pb.Code_INVALID_PARAMETER)
	a, err = c.Ack(ctx, &pb.AckRequest{Group: "other", Topic: "pop", ReceiptHandles: []string{m.ReceiptHandle}})
	code(t, "ack", a.GetStatus(), err, pb.Code_OK)
	code(t, "ack for another group", a.Results[0], nil, pb.Code_INVALID_RECEIPT_HANDLE)
	ci, err := c.ChangeInvisible(ctx, &pb.ChangeInvisibleRequest{Group: "g", Topic: "pop", ReceiptHandle: m.ReceiptHandle,
		InvisibleMs: (13 * time.Hour).Milliseconds()})
	code(t, "change invisible to 13h", ci.GetStatus(), err, pb.Code_ILLEGAL_INVISIBLE_TIME)
	ci, err = c.ChangeInvisible(ctx, &pb.ChangeInvisibleRequest{Group: "g", Topic: "pop", ReceiptHandle: "garbage", InvisibleMs: 1000})
	code(t, "change invisible of garbage", ci.GetStatus(), err, pb.Code_INVALID_RECEIPT_HANDLE)
	n, err := c.Nack(ctx, &pb.NackRequest{Group: "g", Topic: "pop", ReceiptHandle: "garbage"})
	code(t, "nack of garbage", n.GetStatus(), err, pb.Code_INVALID_RECEIPT_HANDLE)

	a, err = c.Ack(ctx, &pb.AckRequest{Group: "g", Topic: "pop", ReceiptHandles: []string{"garbage", m.ReceiptHandle}})
	code(t, "ack", a.GetStatus(), err, pb.Code_OK)
	if len(a.Results) != 2 {
		t.Fatalf("ack results: %v", a.Results)
	}
	code(t, "ack of garbage", a.Results[0], nil, pb.Code_INVALID_RECEIPT_HANDLE)
	code(t, "ack", a.Results[1], nil, pb.Code_OK)
	a, err = c.Ack(ctx, &pb.AckRequest{Group: "g", Topic: "pop", ReceiptHandles: []string{m.ReceiptHandle}})
	code(t, "ack again", a.GetStatus(), err, pb.Code_OK)
	code(t, "ack again", a.Results[0], nil, pb.Code_INVALID_RECEIPT_HANDLE)
	if resp := recv(&pb.ReceiveRequest{Group: "g", Topic: "pop", QueueId: -1, InvisibleMs: 10000}); len(resp.Messages) != 0 {
		t.Fatalf("an acknowledged message came again: %+v", resp)
	}
}

// TestGroupAndTopicTypeBadInput: group declarations and topic types the
// broker refuses, and the codes of missing groups.
func TestGroupAndTopicTypeBadInput(t *testing.T) {
	c := startBroker(t)
	ctx := context.Background()
	put := func(g *pb.SubscriptionGroupConfig, create bool) *pb.Status {
		t.Helper()
		r, err := c.PutSubscriptionGroup(ctx, &pb.PutSubscriptionGroupRequest{Group: g, Create: create})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	code(t, "no group", put(nil, false), nil, pb.Code_INVALID_PARAMETER)
	code(t, "illegal name", put(&pb.SubscriptionGroupConfig{Group: "bad/g"}, false), nil, pb.Code_ILLEGAL_GROUP)
	code(t, "negative retries", put(&pb.SubscriptionGroupConfig{Group: "g", RetryMaxTimes: -1}, false), nil, pb.Code_INVALID_PARAMETER)
	code(t, "unknown policy", put(&pb.SubscriptionGroupConfig{Group: "g", RetryPolicy: &pb.RetryPolicy{Type: "SOMETIMES"}}, false), nil, pb.Code_INVALID_PARAMETER)
	code(t, "empty customized policy", put(&pb.SubscriptionGroupConfig{Group: "g", RetryPolicy: &pb.RetryPolicy{
		Customized: &pb.CustomizedRetryPolicy{}}}, false), nil, pb.Code_INVALID_PARAMETER)
	g := &pb.SubscriptionGroupConfig{Group: "g", ConsumeMessageOrderly: true, RetryMaxTimes: 3,
		RetryPolicy: &pb.RetryPolicy{Type: "EXPONENTIAL", Exponential: &pb.ExponentialRetryPolicy{InitialMs: 1000, MaxMs: 8000, Multiplier: 2}}}
	code(t, "create", put(g, true), nil, pb.Code_OK)
	code(t, "create again", put(g, true), nil, pb.Code_INVALID_PARAMETER)
	gr, err := c.GetSubscriptionGroup(ctx, &pb.GetSubscriptionGroupRequest{Group: "g"})
	code(t, "get", gr.GetStatus(), err, pb.Code_OK)
	if got := gr.Group; !got.ConsumeMessageOrderly || got.RetryMaxTimes != 3 || got.RetryPolicy.GetExponential().GetMaxMs() != 8000 {
		t.Fatalf("get: %+v", got)
	}
	lr, err := c.ListSubscriptionGroups(ctx, &pb.ListSubscriptionGroupsRequest{})
	code(t, "list", lr.GetStatus(), err, pb.Code_OK)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "g" || lr.DataVersion.GetCounter() == 0 {
		t.Fatalf("list: %+v", lr)
	}
	dr, err := c.DeleteSubscriptionGroup(ctx, &pb.DeleteSubscriptionGroupRequest{Group: "g"})
	code(t, "delete", dr.GetStatus(), err, pb.Code_OK)
	dr, err = c.DeleteSubscriptionGroup(ctx, &pb.DeleteSubscriptionGroupRequest{Group: "g"})
	code(t, "delete again", dr.GetStatus(), err, pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST)
	gr, err = c.GetSubscriptionGroup(ctx, &pb.GetSubscriptionGroupRequest{Group: "g"})
	code(t, "get after delete", gr.GetStatus(), err, pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST)
	gr, err = c.GetSubscriptionGroup(ctx, &pb.GetSubscriptionGroupRequest{Group: "bad/g"})
	code(t, "get of an illegal name", gr.GetStatus(), err, pb.Code_ILLEGAL_GROUP)
	dr, err = c.DeleteSubscriptionGroup(ctx, &pb.DeleteSubscriptionGroupRequest{Group: ""})
	code(t, "delete of no name", dr.GetStatus(), err, pb.Code_ILLEGAL_GROUP)

	tr, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "typed", ReadQueueNums: 1, WriteQueueNums: 1,
		Attributes: map[string]string{"message.type": "loud"}}})
	code(t, "unknown message type", tr.GetStatus(), err, pb.Code_INVALID_PARAMETER)
	tr, err = c.CreateTopic(ctx, &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "typed", ReadQueueNums: 1, WriteQueueNums: 1,
		Attributes: map[string]string{"message.type": "transaction"}}})
	code(t, "transaction topic", tr.GetStatus(), err, pb.Code_OK)
	tc, err := c.GetTopicConfigs(ctx, &pb.GetTopicConfigsRequest{})
	code(t, "topic configs", tc.GetStatus(), err, pb.Code_OK)
	for _, cfg := range tc.Topics {
		if cfg.Name == "typed" && cfg.Attributes["message.type"] != "TRANSACTION" {
			t.Fatalf("typed topic: %+v", cfg)
		}
	}
}
