package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// reservedSends are sends no client may make: to topics of the system, to
// a dead-letter topic, and to a retry topic other than as a consumer's
// send-back.
var reservedSends = []struct {
	name  string
	msgs  []*pb.Message
	wantC pb.Code
}{
	{"replay mark", []*pb.Message{{Topic: retry.ReplayMarkTopic, Body: []byte(`{"dlqCommitLogOffset":0}`)}}, pb.Code_NO_PERMISSION},
	{"pop log", []*pb.Message{{Topic: message.PopLogTopic, Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"any rmq_sys_", []*pb.Message{{Topic: "rmq_sys_anything", Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"half", []*pb.Message{{Topic: message.TransHalfTopic, Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"any RMQ_SYS_", []*pb.Message{{Topic: "RMQ_SYS_TRACE_TOPIC", Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"schedule", []*pb.Message{{Topic: message.ScheduleTopic, Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"TBW102", []*pb.Message{{Topic: message.AutoCreateTopic, Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"dead letter", []*pb.Message{{Topic: "%DLQ%g", Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"retry without RETRY_TOPIC", []*pb.Message{{Topic: "%RETRY%g", Body: []byte("x")}}, pb.Code_NO_PERMISSION},
	{"retry batch", []*pb.Message{
		{Topic: "%RETRY%g", Body: []byte("x"), Properties: map[string]string{message.PropertyRetryTopic: "work"}},
		{Topic: "%RETRY%g", Body: []byte("y"), Properties: map[string]string{message.PropertyRetryTopic: "work"}}}, pb.Code_NO_PERMISSION},
}

// reservedBroker is a broker with the group g's retry and dead-letter
// topics, so that a refusal is the rule's and not a missing topic's.
func reservedBroker(t *testing.T) (*server.Server, pb.BrokerClient) {
	t.Helper()
	b, c := testBroker(t)
	createTopic(t, c, "work", 1)
	createTopic(t, c, "%RETRY%g", 1)
	createTopic(t, c, "%DLQ%g", 1)
	return b, c
}

// TestReservedSendsRefused: over Bolide's gRPC and framed front ends, each
// send of reservedSends is refused with its code and nothing is written.
func TestReservedSendsRefused(t *testing.T) {
	b, gc := reservedBroker(t)
	fc := frameClient(t, b.Addr())
	for _, front := range []struct {
		name string
		send func(msgs []*pb.Message) *pb.SendResponse
	}{
		{"grpc", func(msgs []*pb.Message) *pb.SendResponse {
			resp, err := gc.Send(context.Background(), &pb.SendRequest{Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}},
		{"framed", func(msgs []*pb.Message) *pb.SendResponse { return frameSend(t, fc, msgs...) }},
	} {
		for _, tc := range reservedSends {
			t.Run(front.name+"/"+tc.name, func(t *testing.T) {
				before := b.Store().CommitLog().MaxOffset()
				resp := front.send(tc.msgs)
				if resp.Status.GetCode() != tc.wantC || !strings.Contains(resp.Status.GetMessage(), "forbidden") {
					t.Fatalf("%v %q, want %v", resp.Status.GetCode(), resp.Status.GetMessage(), tc.wantC)
				}
				if after := b.Store().CommitLog().MaxOffset(); after != before {
					t.Fatalf("CommitLog grew from %d to %d", before, after)
				}
			})
		}
	}
}

// TestReservedTopicsCannotChange: a client can neither create, change nor
// delete a topic of the system (ILLEGAL_TOPIC), while a group's retry and
// dead-letter topics stay its own; the broker's own topics stay.
func TestReservedTopicsCannotChange(t *testing.T) {
	_, c := reservedBroker(t)
	ctx := context.Background()
	for _, name := range []string{retry.ReplayMarkTopic, message.PopLogTopic, "rmq_sys_x", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_x",
		message.AutoCreateTopic, message.ScheduleTopic, message.TransCheckMaxTopic} {
		for _, update := range []bool{false, true} {
			resp, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: name, ReadQueueNums: 1, WriteQueueNums: 1}, Update: update})
			if err != nil || resp.Status.GetCode() != pb.Code_ILLEGAL_TOPIC || !strings.Contains(resp.Status.GetMessage(), "system topic") {
				t.Errorf("create %s (update %v): %v %v", name, update, err, resp.GetStatus())
			}
		}
		resp, err := c.DeleteTopic(ctx, &pb.BrokerDeleteTopicRequest{Topic: name})
		if err != nil || resp.Status.GetCode() != pb.Code_ILLEGAL_TOPIC {
			t.Errorf("delete %s: %v %v", name, err, resp.GetStatus())
		}
	}
	for _, name := range []string{"%RETRY%g", "%DLQ%g"} {
		resp, err := c.DeleteTopic(ctx, &pb.BrokerDeleteTopicRequest{Topic: name})
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Errorf("delete %s: %v %v", name, err, resp.GetStatus())
		}
	}
}

// TestRetrySendRule: a message a consumer sends to its retry topic itself
// (RETRY_TOPIC set) is taken, and the core dead-letters it once its count
// passes the limit; the %DLQ% write is the broker's.
func TestRetrySendRule(t *testing.T) {
	b, c := reservedBroker(t)
	ctx := context.Background()
	retryMsg := func(times int32) *message.Ext {
		return &message.Ext{Message: message.Message{Topic: "%RETRY%g", Body: []byte("again"),
			Properties: map[string]string{message.PropertyRetryTopic: "work", message.PropertyDelayLevel: "1"}}, ReconsumeTimes: times}
	}
	if _, err := b.Send(ctx, []*message.Ext{retryMsg(1)}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	m := retryMsg(17) // past the broker's 16
	if _, err := b.Send(ctx, []*message.Ext{m}); err != nil {
		t.Fatalf("retry past the limit: %v", err)
	}
	if m.Topic != "%DLQ%g" || m.Properties[message.PropertyDLQOriginTopic] != "work" || m.Properties[message.PropertyDelayLevel] != "" {
		t.Fatalf("dead letter %+v", m)
	}
	waitQueue(t, c, "%DLQ%g", 0, 1)
	// The consumer's own limit.
	m = retryMsg(3)
	if _, err := b.SendRetry(ctx, m, 2); err != nil || m.Topic != "%DLQ%g" {
		t.Fatalf("retry past the consumer's limit: %v %s", err, m.Topic)
	}
	if _, err := b.SendRetry(ctx, &message.Ext{Message: message.Message{Topic: "work", Body: []byte("x")}}, 2); errcode.Of(err) != errcode.InvalidParameter {
		t.Fatalf("SendRetry to a normal topic: %v", err)
	}
}

// TestAutoCreateTopicKey: a broker that creates topics on first send has
// TBW102, RocketMQ's producers' route for topics that have none yet.
func TestAutoCreateTopicKey(t *testing.T) {
	b, _ := testBroker(t, func(o *broker.Options) { o.AutoCreateTopic = true })
	found := false
	for _, tc := range b.TopicConfigs() {
		if tc.Name == message.AutoCreateTopic {
			found = tc.Writable() && tc.WriteQueueNums == int32(b.Options().DefaultQueueNums)
		}
	}
	if !found {
		t.Fatalf("no writable TBW102 in %+v", b.TopicConfigs())
	}
	b2, _ := testBroker(t)
	for _, tc := range b2.TopicConfigs() {
		if tc.Name == message.AutoCreateTopic {
			t.Fatal("TBW102 without auto-creation")
		}
	}
}
