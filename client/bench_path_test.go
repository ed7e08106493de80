package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// benchCluster starts one broker group with the given flush mode and a
// topic of 8 queues, and a started producer.
func benchCluster(b *testing.B, flush commitlog.FlushMode) (*cluster.Cluster, *Producer) {
	b.Helper()
	c := cluster.Start(b, cluster.Options{BrokerGroups: 1, FlushMode: flush})
	c.CreateTopic("bench", 8)
	p, err := NewProducer("bench-pg", WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c, p
}

// BenchmarkClientSend measures the client→broker send path with 1 KiB
// messages against one in-process broker: one producer goroutine waiting for
// each acknowledgement, 16 concurrent senders, and batches of 32; under
// async and sync flush.
func BenchmarkClientSend(b *testing.B) {
	body := make([]byte, 1024)
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		for _, senders := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/senders=%d", flush, senders), func(b *testing.B) {
				_, p := benchCluster(b, flush)
				ctx := context.Background()
				var next atomic.Int64
				lat := make([]time.Duration, b.N)
				b.SetBytes(int64(len(body)))
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := 0; w < senders; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							start := time.Now()
							if _, err := p.Send(ctx, &Message{Topic: "bench", Body: body}); err != nil {
								b.Error(err)
								return
							}
							lat[i] = time.Since(start)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
				b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
			})
		}
		b.Run(fmt.Sprintf("%s/batch=32", flush), func(b *testing.B) {
			_, p := benchCluster(b, flush)
			ctx := context.Background()
			batch := make([]*Message, 32)
			for i := range batch {
				batch[i] = &Message{Topic: "bench", Body: body}
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i += len(batch) {
				n := min(len(batch), b.N-i)
				if _, err := p.SendBatch(ctx, batch[:n]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkClientConsume measures draining a backlog with a push consumer
// (1 KiB messages, one broker, 8 queues).
func BenchmarkClientConsume(b *testing.B) {
	cl, p := benchCluster(b, commitlog.FlushAsync)
	ctx := context.Background()
	body := make([]byte, 1024)
	batch := make([]*Message, 32)
	for i := range batch {
		batch[i] = &Message{Topic: "bench", Body: body}
	}
	for i := 0; i < b.N; i += len(batch) {
		if _, err := p.SendBatch(ctx, batch[:min(len(batch), b.N-i)]); err != nil {
			b.Fatal(err)
		}
	}
	var got atomic.Int64
	done := make(chan struct{})
	c, err := NewPushConsumer(fmt.Sprintf("bench-cg-%d", b.N), WithNameServers(cl.NameServerAddrs()...),
		WithConsumeFrom(ConsumeFromFirst))
	if err != nil {
		b.Fatal(err)
	}
	err = c.Subscribe("bench", "*", ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		if got.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return ConsumeSuccess
	}))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	_ = c.Close()
}

// percentile returns the q-quantile of latencies (sorted in place).
func percentile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(float64(len(lat))*q))]
}
