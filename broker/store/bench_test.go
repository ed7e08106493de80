package store

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// BenchmarkPut1KiB measures Store.PutBatch of 1 KiB messages (32 a batch)
// with production segment and index sizes: encode, append, and the
// dispatcher building ConsumeQueue and IndexFile entries concurrently.
func BenchmarkPut1KiB(b *testing.B) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		b.Run(flush.String(), func(b *testing.B) {
			opts := DefaultOptions(b.TempDir())
			opts.CommitLog.FlushMode = flush
			opts.IndexEnabled = os.Getenv("BOLIDE_NO_INDEX") == ""
			if wm := os.Getenv("BOLIDE_WRITE_MODE"); wm != "" {
				opts.CommitLog.WriteMode, _ = commitlog.ParseWriteMode(wm)
			}
			s, err := Open(opts, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			body := make([]byte, 1024)
			batch := make([]*message.Ext, 32)
			res := make([]PutResult, 0, 32)
			ctx := context.Background()
			b.SetBytes(1024)
			b.ResetTimer()
			for i := 0; i < b.N; i += len(batch) {
				for k := range batch {
					m := &message.Ext{Message: message.Message{Topic: "bench", Body: body}, QueueID: int32(i+k) % 8}
					m.SetProperty(message.PropertyKeys, "k"+strconv.Itoa(i+k))
					batch[k] = m
				}
				if _, err := s.PutBatch(ctx, batch, res[:0]); err != nil {
					b.Fatal(err)
				}
			}
			appendDone := b.Elapsed()
			if err := s.WaitDispatched(ctx, s.CommitLog().MaxOffset()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/appendDone.Seconds(), "appended/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
