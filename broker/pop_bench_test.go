package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/message"
)

// BenchmarkPopAck: receive batches of 32 and acknowledge each message, on
// one broker (async flush): the cost of a message through POP.
func BenchmarkPopAck(b *testing.B) {
	ctx := context.Background()
	s, err := newBroker(testOptions(b.TempDir()), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic(broker.TopicConfig{Name: "bench", ReadQueueNums: 4, WriteQueueNums: 4, Perm: broker.PermReadWrite}, false); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		m := &message.Ext{Message: message.Message{Topic: "bench", Body: make([]byte, 1024)}, QueueID: int32(i % 4), BornTimestamp: time.Now().UnixMilli()}
		if _, err := s.Send(ctx, []*message.Ext{m}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Store().WaitDispatched(ctx, s.Store().CommitLog().MaxOffset()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		got, err := s.Pop(ctx, broker.PopRequest{Group: "g", Topic: "bench", QueueID: -1, MaxMessages: 32, Invisible: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range got {
			if err := s.PopAck(ctx, "g", "bench", p.Handle); err != nil {
				b.Fatal(err)
			}
		}
		done += len(got)
	}
}
