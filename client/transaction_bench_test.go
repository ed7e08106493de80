package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// commitAll commits every local transaction.
type commitAll struct{}

func (commitAll) ExecuteLocalTransaction(context.Context, *Message, any) LocalTransactionState {
	return CommitMessage
}

func (commitAll) CheckLocalTransaction(context.Context, *MessageExt) LocalTransactionState {
	return CommitMessage
}

// BenchmarkTransactionSend measures the transactional send path against
// one in-process broker, 1 KiB bodies: SendInTransaction (half message,
// an empty local transaction, EndTransaction commit, which writes the real
// message and the op record in one append), with 1 and 16 concurrent
// senders, under sync and async flush. Compare BenchmarkClientSend: a
// transaction is two acknowledged round trips and three records.
func BenchmarkTransactionSend(b *testing.B) {
	body := make([]byte, 1024)
	for _, flush := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		for _, senders := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/senders=%d", flush, senders), func(b *testing.B) {
				c := cluster.Start(b, cluster.Options{BrokerGroups: 1, FlushMode: flush})
				c.CreateTopic("bench", 8)
				p, err := NewTransactionProducer("bench-txn", commitAll{}, WithNameServers(c.NameServerAddrs()...))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = p.Close() })
				ctx := context.Background()
				if err := p.Start(ctx); err != nil {
					b.Fatal(err)
				}
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
							res, err := p.SendInTransaction(ctx, &Message{Topic: "bench", Body: body}, nil)
							if err == nil {
								err = res.EndErr
							}
							if err != nil {
								b.Error(err)
								return
							}
							lat[i] = time.Since(start)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
				b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
				b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
			})
		}
	}
}
