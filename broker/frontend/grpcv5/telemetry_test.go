package grpcv5_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/subgroup"
)

// producerSettings are the Settings a Go producer sends.
func producerSettings(topics ...string) *v2.Settings {
	ct := v2.ClientType_PRODUCER
	p := &v2.Publishing{}
	for _, t := range topics {
		p.Topics = append(p.Topics, &v2.Resource{Name: t})
	}
	return &v2.Settings{ClientType: &ct, RequestTimeout: durationpb.New(3 * time.Second),
		BackoffPolicy: &v2.RetryPolicy{MaxAttempts: 3, Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
			Initial: durationpb.New(0), Max: durationpb.New(0), Multiplier: 1}}},
		PubSub:    &v2.Settings_Publishing{Publishing: p},
		UserAgent: &v2.UA{Language: v2.Language_GOLANG, Version: "5.1.4", Platform: "linux", Hostname: "testhost"}}
}

// consumerSettings are the Settings a Go consumer sends.
func consumerSettings(ct v2.ClientType, group, topic, expr string) *v2.Settings {
	return &v2.Settings{ClientType: &ct, RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{
			Group: &v2.Resource{Name: group},
			Subscriptions: []*v2.SubscriptionEntry{{Topic: &v2.Resource{Name: topic},
				Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: expr}}},
			LongPollingTimeout: durationpb.New(30 * time.Second)}},
		UserAgent: &v2.UA{Language: v2.Language_GOLANG, Version: "5.1.4"}}
}

// handshake opens a Telemetry stream, sends s and returns the stream and
// the server's reply.
func handshake(t *testing.T, c v2.MessagingServiceClient, clientID string, s *v2.Settings) (v2.MessagingService_TelemetryClient, *v2.Settings) {
	t.Helper()
	stream, err := c.Telemetry(asClient(t, clientID))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: s}}); err != nil {
		t.Fatal(err)
	}
	reply, err := stream.Recv()
	if err != nil {
		t.Fatalf("no Settings reply: %v", err)
	}
	wantCode(t, "settings reply", reply.GetStatus(), v2.Code_OK)
	got := reply.GetSettings()
	if got == nil {
		t.Fatalf("reply is not Settings: %v", reply)
	}
	return stream, got
}

func TestTelemetryProducerSettings(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", "")
	c := dial(t, b)
	id := newClientID()
	stream, got := handshake(t, c, id, producerSettings("orders"))
	defer stream.CloseSend()

	pub := got.GetPublishing()
	if pub == nil {
		t.Fatalf("reply is not publishing: %v", got)
	}
	if !pub.GetValidateMessageType() || pub.GetMaxBodySize() != 1<<20 {
		t.Errorf("publishing = %v, want validate_message_type and max_body_size %d", pub, 1<<20)
	}
	if len(pub.GetTopics()) != 1 || pub.Topics[0].GetName() != "orders" {
		t.Errorf("topics = %v, want the client's", pub.GetTopics())
	}
	bp := got.GetBackoffPolicy()
	eb := bp.GetExponentialBackoff()
	if bp.GetMaxAttempts() != 3 || eb == nil || eb.GetInitial().AsDuration() != 10*time.Millisecond || eb.GetMax().AsDuration() != time.Second || eb.GetMultiplier() != 2 {
		t.Errorf("backoff = %v, want 3 attempts, exponential 10ms..1s ×2", bp)
	}
	if got.GetMetric() == nil || got.GetMetric().GetOn() {
		t.Errorf("metric = %v, want off", got.GetMetric())
	}
	if got.GetClientType() != v2.ClientType_PRODUCER || got.GetUserAgent().GetHostname() != "testhost" {
		t.Errorf("the client's own fields were not kept: %v", got)
	}
	// The producer is a producer of its topic for the core (check-backs).
	waitFor(t, "the producer registered", func() bool {
		ids := b.ProducerClients("orders")
		return len(ids) == 1 && ids[0] == id
	})
	// A heartbeat is answered OK; a later Settings sync is answered again.
	hb, err := c.Heartbeat(asClient(t, id), &v2.HeartbeatRequest{ClientType: v2.ClientType_PRODUCER})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "heartbeat", hb.GetStatus(), v2.Code_OK)
	if err := stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: producerSettings("orders")}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetSettings().GetPublishing() == nil {
		t.Fatalf("second settings: %v, %v", r, err)
	}
	// Answers to commands the broker never sent are tolerated.
	if err := stream.Send(&v2.TelemetryCommand{Status: &v2.Status{Code: v2.Code_NOT_IMPLEMENTED},
		Command: &v2.TelemetryCommand_VerifyMessageResult{VerifyMessageResult: &v2.VerifyMessageResult{Nonce: "n"}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&v2.TelemetryCommand{Status: &v2.Status{Code: v2.Code_OK},
		Command: &v2.TelemetryCommand_ThreadStackTrace{ThreadStackTrace: &v2.ThreadStackTrace{Nonce: "n", ThreadStackTrace: ptr("goroutine 1")}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: producerSettings("orders")}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetSettings() == nil {
		t.Fatalf("settings after the answers: %v, %v", r, err)
	}

	// Termination forgets the producer and ends its stream.
	nt, err := c.NotifyClientTermination(asClient(t, id), &v2.NotifyClientTerminationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "terminate", nt.GetStatus(), v2.Code_OK)
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream after termination: %v, want EOF", err)
	}
	if ids := b.ProducerClients("orders"); len(ids) != 0 {
		t.Errorf("producers after termination: %v", ids)
	}
}

func ptr[T any](v T) *T { return &v }

func TestTelemetryConsumerSettings(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", "")
	cfg := subgroup.Default("billing")
	cfg.ConsumeMessageOrderly = true
	cfg.RetryMaxTimes = 4
	cfg.GroupRetryPolicy = subgroup.Customized([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second})
	if err := b.UpdateSubscriptionGroup(cfg); err != nil {
		t.Fatal(err)
	}
	c := dial(t, b)

	for _, tc := range []struct {
		group     string
		ct        v2.ClientType
		fifo      bool
		attempts  int32
		firstNext time.Duration
	}{
		{"billing", v2.ClientType_PUSH_CONSUMER, true, 5, 3 * time.Second},         // declared: Backoff(0) = next[2]
		{"undeclared", v2.ClientType_SIMPLE_CONSUMER, false, 17, 10 * time.Second}, // RocketMQ's defaults
	} {
		t.Run(tc.group, func(t *testing.T) {
			id := newClientID()
			stream, got := handshake(t, c, id, consumerSettings(tc.ct, tc.group, "orders", "a || b"))
			defer stream.CloseSend()
			sub := got.GetSubscription()
			if sub == nil {
				t.Fatalf("reply is not subscription: %v", got)
			}
			if sub.GetFifo() != tc.fifo || sub.GetReceiveBatchSize() != 32 || sub.GetLongPollingTimeout().AsDuration() != 20*time.Second {
				t.Errorf("subscription = fifo %v batch %d polling %v, want fifo %v, 32, 20s", sub.GetFifo(),
					sub.GetReceiveBatchSize(), sub.GetLongPollingTimeout().AsDuration(), tc.fifo)
			}
			bp := got.GetBackoffPolicy()
			next := bp.GetCustomizedBackoff().GetNext()
			if bp.GetMaxAttempts() != tc.attempts || len(next) != int(tc.attempts) || next[0].AsDuration() != tc.firstNext {
				t.Errorf("backoff = %v, want %d attempts, customized from %v", bp, tc.attempts, tc.firstNext)
			}
			if got.GetMetric().GetOn() {
				t.Error("metric on")
			}
			waitFor(t, "the consumer is a member of its group", func() bool {
				ids, err := b.ConsumerList(tc.group)
				return err == nil && len(ids) == 1 && ids[0] == id
			})
		})
	}
}

func TestTelemetryBadSettings(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b)
	for name, tc := range map[string]struct {
		id string
		s  *v2.Settings
	}{
		"no client id": {"", producerSettings("orders")},
		"no pub_sub":   {newClientID(), &v2.Settings{}},
		"bad topic":    {newClientID(), producerSettings("bad topic")},
		"bad group":    {newClientID(), consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "bad group", "orders", "*")},
		"bad filter":   {newClientID(), consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "g", "orders", "a | b")},
		"bad sql": {newClientID(), func() *v2.Settings {
			s := consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "g", "orders", "a > ")
			s.GetSubscription().Subscriptions[0].Expression.Type = v2.FilterType_SQL
			return s
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			stream, err := c.Telemetry(asClient(t, tc.id))
			if err != nil {
				t.Fatal(err)
			}
			_ = stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: tc.s}})
			_, err = stream.Recv()
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("stream ended with %v, want INVALID_ARGUMENT", err)
			}
		})
	}
}

func TestHeartbeat(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b)
	// Before any Settings: OK (lenient).
	resp, err := c.Heartbeat(asClient(t, newClientID()), &v2.HeartbeatRequest{Group: &v2.Resource{Name: "g"}, ClientType: v2.ClientType_SIMPLE_CONSUMER})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "heartbeat before settings", resp.GetStatus(), v2.Code_OK)
	// The Go client's probe when its stream recovers: no headers at all.
	resp, _ = c.Heartbeat(context.Background(), &v2.HeartbeatRequest{})
	wantCode(t, "heartbeat without client id", resp.GetStatus(), v2.Code_OK)
	resp, _ = c.Heartbeat(asClient(t, newClientID()), &v2.HeartbeatRequest{Group: &v2.Resource{Name: "bad group"}})
	wantCode(t, "heartbeat of an illegal group", resp.GetStatus(), v2.Code_ILLEGAL_CONSUMER_GROUP)
	nt, _ := c.NotifyClientTermination(asClient(t, newClientID()), &v2.NotifyClientTerminationRequest{})
	wantCode(t, "termination of an unknown client", nt.GetStatus(), v2.Code_OK)
	nt, _ = c.NotifyClientTermination(asClient(t, ""), &v2.NotifyClientTerminationRequest{})
	wantCode(t, "termination without client id", nt.GetStatus(), v2.Code_CLIENT_ID_REQUIRED)
}

func TestClientExpiry(t *testing.T) {
	b := startBroker(t, func(o *broker.Options) { o.ClientExpiry = time.Second })
	createTopic(t, b, "orders", "")
	c := dial(t, b)
	id := newClientID()
	stream, _ := handshake(t, c, id, producerSettings("orders"))
	defer stream.CloseSend()
	if ids := b.ProducerClients("orders"); len(ids) != 1 {
		t.Fatalf("producers %v", ids)
	}
	// No heartbeat: the broker drops the client and ends its stream.
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream of an expired client: %v, want EOF", err)
	}
	if ids := b.ProducerClients("orders"); len(ids) != 0 {
		t.Errorf("producers after expiry: %v", ids)
	}
}

func TestTelemetrySQLSubscription(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b)
	s := consumerSettings(v2.ClientType_PUSH_CONSUMER, "sql-group", "orders", "region = 'eu' AND amount > 10")
	s.GetSubscription().Subscriptions[0].Expression.Type = v2.FilterType_SQL
	stream, got := handshake(t, c, newClientID(), s)
	defer stream.CloseSend()
	if e := got.GetSubscription().GetSubscriptions()[0].GetExpression(); e.GetType() != v2.FilterType_SQL || e.GetExpression() != "region = 'eu' AND amount > 10" {
		t.Errorf("subscription written back as %v", e)
	}
}
