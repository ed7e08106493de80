package client

import (
	"context"
	"testing"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// BenchmarkSendParallel measures Producer.Send from many goroutines to an
// in-process cluster of two brokers (sends are multiplexed over one stream
// per broker).
func BenchmarkSendParallel(b *testing.B) {
	c := cluster.Start(b, cluster.Options{BrokerGroups: 2})
	b.Cleanup(c.Stop)
	c.CreateTopic("bench", 8)
	p, err := NewProducer("bench-pg", WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 256)
	b.SetParallelism(64)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Send(ctx, &Message{Topic: "bench", Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
