package store

import (
	"context"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// BenchmarkGetMessagesHot measures GetMessages of 32 messages of 1 KiB
// from a store whose records are in memory (a consumer near the tail, the
// common case), walking eight queues of 8 192 messages each.
func BenchmarkGetMessagesHot(b *testing.B) {
	opts := DefaultOptions(b.TempDir())
	opts.IndexEnabled = false
	s, err := Open(opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const queues, perQueue, pull = 8, 8192, 32
	body := make([]byte, 1024)
	batch := make([]*message.Ext, 64)
	ctx := context.Background()
	for i := 0; i < queues*perQueue; i += len(batch) {
		for k := range batch {
			batch[k] = &message.Ext{Message: message.Message{Topic: "bench", Body: body}, QueueID: int32((i + k) % queues)}
		}
		if _, err := s.PutBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.WaitDispatched(ctx, s.CommitLog().MaxOffset()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(pull * 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := int32(i % queues)
		off := int64(i/queues*pull) % (perQueue - pull)
		res, err := s.GetMessages("bench", q, off, pull, 1<<20, nil)
		if err != nil || len(res.Records) != pull {
			b.Fatalf("get %d at %d: %v %v", q, off, res.Status, err)
		}
	}
}
