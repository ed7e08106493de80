package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// popBroker starts a broker with a topic of n queues.
func popBroker(t *testing.T, topic string, queues int32, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	b, _ := testBroker(t, mutate...)
	if err := b.CreateTopic(broker.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	return b
}

// sendN sends n messages round robin over the queues, bodies prefix0...,
// and waits until they are dispatched.
func sendN(t *testing.T, b *server.Server, topic string, queues int32, prefix string, n int, tag string) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(fmt.Sprint(prefix, i)),
			Properties: map[string]string{message.PropertyTags: tag, message.PropertyUniqueKey: fmt.Sprint("U", prefix, i)}},
			QueueID: int32(i) % queues, BornTimestamp: time.Now().UnixMilli()}
		if _, err := b.Send(ctx, []*message.Ext{m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Store().WaitDispatched(ctx, b.Store().CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
}

func body(t *testing.T, p broker.PoppedMessage) string {
	t.Helper()
	m, err := message.Decode(p.Record)
	if err != nil {
		t.Fatal(err)
	}
	return string(m.Body)
}

func wantErrCode(t *testing.T, what string, err error, code errcode.Code) {
	t.Helper()
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
}

func pop(t *testing.T, b *server.Server, req broker.PopRequest) []broker.PoppedMessage {
	t.Helper()
	out, err := b.Pop(context.Background(), req)
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	return out
}

// TestPopReceiveAck: messages handed out are invisible to the group until
// acknowledged; acks move the low watermark and the committed offset.
func TestPopReceiveAck(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "pa", 2)
	sendN(t, b, "pa", 2, "m", 10, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "pa", QueueID: -1, MaxMessages: 32, Invisible: time.Minute})
	if len(got) != 10 {
		t.Fatalf("popped %d messages, want 10", len(got))
	}
	seen := map[string]bool{}
	for _, p := range got {
		if p.Attempt != 1 || p.Handle == "" || !p.VisibleAt.After(time.Now()) {
			t.Fatalf("popped %+v", p)
		}
		seen[body(t, p)] = true
	}
	if len(seen) != 10 {
		t.Fatalf("bodies %v", seen)
	}
	// Nothing more for the group; another group gets them all.
	if again := pop(t, b, broker.PopRequest{Group: "g", Topic: "pa", QueueID: -1, Invisible: time.Minute}); len(again) != 0 {
		t.Fatalf("popped %d in-flight messages again", len(again))
	}
	if other := pop(t, b, broker.PopRequest{Group: "g2", Topic: "pa", QueueID: -1, Invisible: time.Minute}); len(other) != 10 {
		t.Fatalf("other group popped %d", len(other))
	}
	for _, p := range got {
		if err := b.PopAck(ctx, "g", "pa", p.Handle); err != nil {
			t.Fatal(err)
		}
	}
	wantErrCode(t, "second ack", b.PopAck(ctx, "g", "pa", got[0].Handle), errcode.InvalidReceiptHandle)
	for _, st := range b.PopStats("g", "pa") {
		if st.AckedOffset != 5 || st.NextOffset != 5 || st.InFlight != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}
