package grpcv5_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

func (e *consumeEnv) changeInvisible(t *testing.T, group, topic string, m *v2.Message, d *durationpb.Duration) *v2.ChangeInvisibleDurationResponse {
	t.Helper()
	resp, err := e.cli.ChangeInvisibleDuration(callCtx(t, 5*time.Second), &v2.ChangeInvisibleDurationRequest{
		Group: &v2.Resource{Name: group}, Topic: &v2.Resource{Name: topic},
		ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), InvisibleDuration: d,
		MessageId: m.GetSystemProperties().GetMessageId(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// withHandle is a copy of m carrying another receipt handle.
func withHandle(m *v2.Message, handle string) *v2.Message {
	sp := &v2.SystemProperties{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: &handle}
	return &v2.Message{Topic: m.GetTopic(), SystemProperties: sp}
}

// TestChangeInvisibleDuration: the answer is a new handle, the old one is
// spent, and the message comes back after the new duration with attempt 2.
func TestChangeInvisibleDuration(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "retry-me", 1)
	s := e.send(t, "retry-me", 0, "", nil)
	m := e.receiveUntil(t, receiveReq("g", "retry-me", 1, 30*time.Second), 1)[0]
	old := m.GetSystemProperties().GetReceiptHandle()

	resp := e.changeInvisible(t, "g", "retry-me", m, durationpb.New(time.Second))
	wantCode(t, "change invisible", resp.GetStatus(), v2.Code_OK)
	if resp.GetReceiptHandle() == "" || resp.GetReceiptHandle() == old {
		t.Fatalf("change invisible answered handle %q (old %q), want a new one", resp.GetReceiptHandle(), old)
	}
	wantCode(t, "ack with the old handle", e.ack(t, "g", "retry-me", m).GetStatus(), v2.Code_INVALID_RECEIPT_HANDLE)

	again := e.receiveUntil(t, receiveReq("g", "retry-me", 1, 30*time.Second), 1)[0]
	sp := again.GetSystemProperties()
	if sp.GetMessageId() != s.id || sp.GetDeliveryAttempt() != 2 {
		t.Fatalf("after the change: id %s attempt %d, want %s attempt 2", sp.GetMessageId(), sp.GetDeliveryAttempt(), s.id)
	}
	// A longer invisibility keeps it hidden; the new handle acknowledges it.
	resp = e.changeInvisible(t, "g", "retry-me", again, durationpb.New(time.Hour))
	wantCode(t, "change invisible to 1h", resp.GetStatus(), v2.Code_OK)
	wantCode(t, "ack with the new handle", e.ack(t, "g", "retry-me", withHandle(again, resp.GetReceiptHandle())).GetStatus(), v2.Code_OK)
}

// TestForwardToDeadLetterQueue: the message moves to %DLQ%<group> with its
// id and origin, and is acknowledged in its topic.
func TestForwardToDeadLetterQueue(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "poison", 1)
	s := e.send(t, "poison", 0, "bad", map[string]string{"k": "v"})
	m := e.receiveUntil(t, receiveReq("g", "poison", 1, 30*time.Second), 1)[0]
	resp, err := e.cli.ForwardMessageToDeadLetterQueue(callCtx(t, 5*time.Second), &v2.ForwardMessageToDeadLetterQueueRequest{
		Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "poison"},
		ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), MessageId: s.id,
		DeliveryAttempt: 1, MaxDeliveryAttempts: 16,
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "forward", resp.GetStatus(), v2.Code_OK)
	wantCode(t, "ack after forward", e.ack(t, "g", "poison", m).GetStatus(), v2.Code_INVALID_RECEIPT_HANDLE)

	dead := e.receiveUntil(t, receiveReq("dlq-reader", "%DLQ%g", 1, 30*time.Second), 1)[0]
	sp := dead.GetSystemProperties()
	if sp.GetMessageId() != s.id || string(dead.GetBody()) != string(s.body) || sp.GetTag() != "bad" || dead.GetUserProperties()["k"] != "v" {
		t.Fatalf("dead letter: id %s body %q tag %q props %v", sp.GetMessageId(), dead.GetBody(), sp.GetTag(), dead.GetUserProperties())
	}
	if dlq := sp.GetDeadLetterQueue(); dlq.GetTopic() != "poison" || dlq.GetMessageId() != s.id {
		t.Fatalf("dead letter queue info %v, want topic poison, id %s", dlq, s.id)
	}
}

// TestConsumeBadInput: each bad request gets the reference's status code
// in the response, never a gRPC error or a crash.
func TestConsumeBadInput(t *testing.T) {
	e := startConsumeEnv(t)
	e.createTopic(t, "t", 2)
	e.send(t, "t", 0, "", nil)
	e.send(t, "t", 1, "", nil)
	msgs := e.receiveUntil(t, receiveReq("g", "t", 2, time.Hour), 2)

	t.Run("receive", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			mutate func(*v2.ReceiveMessageRequest)
			ctx    func() context.Context
			want   v2.Code
		}{
			{"invisible below 10s", func(r *v2.ReceiveMessageRequest) { r.InvisibleDuration = durationpb.New(5 * time.Second) }, nil, v2.Code_ILLEGAL_INVISIBLE_TIME},
			{"invisible above 12h", func(r *v2.ReceiveMessageRequest) { r.InvisibleDuration = durationpb.New(13 * time.Hour) }, nil, v2.Code_ILLEGAL_INVISIBLE_TIME},
			{"invisible missing", func(r *v2.ReceiveMessageRequest) { r.InvisibleDuration = nil }, nil, v2.Code_ILLEGAL_INVISIBLE_TIME},
			{"unknown topic", func(r *v2.ReceiveMessageRequest) { r.MessageQueue.Topic.Name = "nope" }, nil, v2.Code_TOPIC_NOT_FOUND},
			{"illegal topic", func(r *v2.ReceiveMessageRequest) { r.MessageQueue.Topic.Name = "no way" }, nil, v2.Code_ILLEGAL_TOPIC},
			{"no message queue", func(r *v2.ReceiveMessageRequest) { r.MessageQueue = nil }, nil, v2.Code_ILLEGAL_TOPIC},
			{"illegal group", func(r *v2.ReceiveMessageRequest) { r.Group.Name = "bad group!" }, nil, v2.Code_ILLEGAL_CONSUMER_GROUP},
			{"no group", func(r *v2.ReceiveMessageRequest) { r.Group = nil }, nil, v2.Code_ILLEGAL_CONSUMER_GROUP},
			{"bad tag expression", func(r *v2.ReceiveMessageRequest) { r.FilterExpression.Expression = "a || " }, nil, v2.Code_ILLEGAL_FILTER_EXPRESSION},
			{"sql filter that does not parse", func(r *v2.ReceiveMessageRequest) {
				r.FilterExpression = &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a > "}
			}, nil, v2.Code_ILLEGAL_FILTER_EXPRESSION},
			{"deadline too near", nil, func() context.Context { return callCtx(t, 800*time.Millisecond) }, v2.Code_ILLEGAL_POLLING_TIME},
			{"auto renew without client id", func(r *v2.ReceiveMessageRequest) { r.AutoRenew = true }, func() context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t.Cleanup(cancel)
				return ctx
			}, v2.Code_CLIENT_ID_REQUIRED},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := receiveReq("g", "t", 1, 30*time.Second)
				req.LongPollingTimeout = durationpb.New(0)
				if tc.mutate != nil {
					tc.mutate(req)
				}
				ctx := callCtx(t, 10*time.Second)
				if tc.ctx != nil {
					ctx = tc.ctx()
				}
				wantCode(t, tc.name, e.receive(t, ctx, req).status, tc.want)
			})
		}
	})

	t.Run("ack", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			group   string
			entries []*v2.Message
			want    v2.Code
			each    []v2.Code
		}{
			{"malformed handle", "g", []*v2.Message{withHandle(msgs[0], "not-a-handle")}, v2.Code_INVALID_RECEIPT_HANDLE, nil},
			{"empty handle", "g", []*v2.Message{withHandle(msgs[0], "")}, v2.Code_INVALID_RECEIPT_HANDLE, nil},
			{"other group", "other", []*v2.Message{msgs[0]}, v2.Code_INVALID_RECEIPT_HANDLE, nil},
			{"illegal group", "bad group!", []*v2.Message{msgs[0]}, v2.Code_ILLEGAL_CONSUMER_GROUP, nil},
			{"no entries", "g", nil, v2.Code_BAD_REQUEST, nil},
			// Last: it acknowledges msgs[1].
			{"mixed", "g", []*v2.Message{withHandle(msgs[0], "garbage"), msgs[1]}, v2.Code_MULTIPLE_RESULTS,
				[]v2.Code{v2.Code_INVALID_RECEIPT_HANDLE, v2.Code_OK}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := e.ack(t, tc.group, "t", tc.entries...)
				wantCode(t, tc.name, resp.GetStatus(), tc.want)
				for i, c := range tc.each {
					wantCode(t, tc.name, resp.GetEntries()[i].GetStatus(), c)
				}
			})
		}
	})

	t.Run("change invisible", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			m    *v2.Message
			d    *durationpb.Duration
			want v2.Code
		}{
			{"negative", msgs[0], durationpb.New(-time.Second), v2.Code_ILLEGAL_INVISIBLE_TIME},
			{"above 12h", msgs[0], durationpb.New(13 * time.Hour), v2.Code_ILLEGAL_INVISIBLE_TIME},
			{"malformed handle", withHandle(msgs[0], "x|y|z"), durationpb.New(time.Minute), v2.Code_INVALID_RECEIPT_HANDLE},
			{"spent handle", msgs[1], durationpb.New(time.Minute), v2.Code_INVALID_RECEIPT_HANDLE},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantCode(t, tc.name, e.changeInvisible(t, "g", "t", tc.m, tc.d).GetStatus(), tc.want)
			})
		}
	})

	t.Run("forward to DLQ", func(t *testing.T) {
		resp, err := e.cli.ForwardMessageToDeadLetterQueue(callCtx(t, 5*time.Second), &v2.ForwardMessageToDeadLetterQueueRequest{
			Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "t"}, ReceiptHandle: "junk"})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "forward with a malformed handle", resp.GetStatus(), v2.Code_INVALID_RECEIPT_HANDLE)
	})

	// The bad calls left msgs[0] in flight under its handle: still good,
	// once.
	resp := e.ack(t, "g", "t", msgs[0], msgs[0])
	wantCode(t, "ack after the bad calls, twice in one request", resp.GetStatus(), v2.Code_MULTIPLE_RESULTS)
	wantCode(t, "first of the two", resp.GetEntries()[0].GetStatus(), v2.Code_OK)
	wantCode(t, "second of the two", resp.GetEntries()[1].GetStatus(), v2.Code_INVALID_RECEIPT_HANDLE)
}
