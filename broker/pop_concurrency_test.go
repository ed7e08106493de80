package broker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// TestPopConcurrentConsumers: consumers popping, acknowledging and giving
// back messages at once; every message is acknowledged exactly once, and
// only messages given back or left to expire are handed out again.
func TestPopConcurrentConsumers(t *testing.T) {
	const n, queues = 400, 4
	b := popBroker(t, "cc", queues)
	sendN(t, b, "cc", queues, "m", n, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu       sync.Mutex
		acked    = map[string]int{}
		total    atomic.Int64
		gaveBack atomic.Int64
		wg       sync.WaitGroup
	)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := 0
			for total.Load() < n && ctx.Err() == nil {
				got, err := b.Pop(ctx, broker.PopRequest{Group: "g", Topic: "cc", QueueID: -1, MaxMessages: 8,
					Invisible: 2 * time.Second, PollTimeout: 200 * time.Millisecond, ClientID: "c"})
				if err != nil {
					t.Error(err)
					return
				}
				for _, p := range got {
					i++
					if (i+c)%10 == 0 {
						// Give one back in 10.
						if _, err := b.ChangeInvisible(ctx, "g", "cc", p.Handle, 0); err != nil {
							t.Error(err)
						}
						gaveBack.Add(1)
						continue
					}
					m, err := message.Decode(p.Record)
					if err != nil {
						t.Error(err)
						return
					}
					err = b.PopAck(ctx, "g", "cc", p.Handle)
					if errcode.Of(err) == errcode.InvalidReceiptHandle {
						continue // expired under load: it comes again
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked[string(m.Body)]++
					mu.Unlock()
					total.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if len(acked) != n || total.Load() != n {
		t.Fatalf("%d distinct messages acknowledged, %d acks, want %d", len(acked), total.Load(), n)
	}
	var redelivered int64
	for _, st := range b.PopStats("g", "cc") {
		if st.InFlight != 0 || st.AckedOffset != n/queues {
			t.Fatalf("stats %+v", st)
		}
		redelivered += st.Redelivered
	}
	if redelivered < gaveBack.Load() {
		t.Fatalf("%d redeliveries, %d given back", redelivered, gaveBack.Load())
	}
}

// TestPopAutoRenew: messages popped with auto-renewal stay invisible while
// the client is alive, the original handle acknowledges them, and a
// released client's messages come back.
func TestPopAutoRenew(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "ar", 1)
	sendN(t, b, "ar", 1, "m", 2, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "ar", QueueID: 0, MaxMessages: 2, Invisible: 1500 * time.Millisecond,
		ClientID: "push-1", AutoRenew: true})
	if len(got) != 2 {
		t.Fatalf("popped %d", len(got))
	}
	// Well past the first invisible time: still in flight, renewed.
	time.Sleep(4 * time.Second)
	for _, st := range b.PopStats("g", "ar") {
		if st.InFlight != 2 || st.Redelivered != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
	if err := b.PopAck(ctx, "g", "ar", got[0].Handle); err != nil {
		t.Fatalf("ack with the original handle after renewals: %v", err)
	}
	b.ReleaseClient("push-1")
	again := pop(t, b, broker.PopRequest{Group: "g", Topic: "ar", QueueID: 0, Invisible: time.Minute, PollTimeout: 20 * time.Second})
	if len(again) != 1 || again[0].QueueOffset != got[1].QueueOffset || again[0].Attempt != 2 {
		t.Fatalf("after the release: %+v", again)
	}
}
