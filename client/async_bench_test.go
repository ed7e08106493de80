package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// BenchmarkSendAsync measures one goroutine calling SendAsync with 1 KiB
// messages, up to 1 024 in flight, against one in-process broker (async
// flush): each SendAsync a request of its own (batch=1, as before
// coalescing) against coalesced requests (batch=256, the default). The
// broker runs in the same process, so ns/op is the CPU of both sides when
// the machine is otherwise idle; cpu-ns/msg is the process's CPU time
// (both sides) per message, the steadier figure on a shared machine.
func BenchmarkSendAsync(b *testing.B) {
	body := make([]byte, 1024)
	for _, batch := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c := cluster.Start(b, cluster.Options{BrokerGroups: 1, FlushMode: commitlog.FlushAsync})
			c.CreateTopic("bench", 8)
			p, err := NewProducer("bench-pg", WithNameServers(c.NameServerAddrs()...),
				WithAsyncSendLimit(1024), WithAsyncBatch(batch, 1<<20))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close() })
			ctx := context.Background()
			if err := p.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := p.Send(ctx, &Message{Topic: "bench", Body: body}); err != nil {
				b.Fatal(err) // the route and the connection, before the clock
			}
			var requests atomic.Int64
			p.testBeforeBatch = func(int) { requests.Add(1) }
			var wg sync.WaitGroup
			var failed atomic.Int64
			b.SetBytes(int64(len(body)))
			cpu0 := testutil.ProcessCPU(b)
			b.ResetTimer()
			for range b.N {
				wg.Add(1)
				p.SendAsync(ctx, &Message{Topic: "bench", Body: body}, func(_ *SendResult, err error) {
					if err != nil {
						failed.Add(1)
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/msg")
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d sends failed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if batch > 1 {
				b.ReportMetric(float64(b.N)/float64(max(requests.Load(), 1)), "msgs/request")
			}
		})
	}
}
