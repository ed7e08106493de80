package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
)

// TestKillBrokerUnderSyncFlush kills a broker (a real process, SIGKILL)
// while producers write to both broker groups with sync flush. Producers
// move to the surviving group; after the killed broker restarts, every
// acknowledged message is consumed: lost = 0 (duplicates are counted and
// reported).
func TestKillBrokerUnderSyncFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ns := StartProc(t, "bolide-nameserver", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0")
	var brokers []*Proc
	for _, name := range []string{"broker-a", "broker-b"} {
		b := StartProc(t, "bolide-broker", "--listen", "127.0.0.1:0", "--namesrv", ns.Addr,
			"--broker-name", name, "--store-dir", t.TempDir(), "--segment-size", strconv.Itoa(64<<20),
			"--flush", "sync", "--register-interval", "1s", "--gossip", "127.0.0.1:0")
		createTopicOn(t, b.Addr, "failover", 4)
		brokers = append(brokers, b)
	}
	if err := Poll(10*time.Second, func() error {
		if n := len(routedTo(t, ns.Addr, "failover")); n != 2 {
			return fmt.Errorf("routed to %d brokers", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := client.NewProducer("failover-producer", client.WithNameServers(ns.Addr),
		client.WithRouteRefreshInterval(500*time.Millisecond), client.WithSendTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		acked    = make(map[string]string) // key → broker
		failures atomic.Int64
		next     atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				key := fmt.Sprintf("k-%d", next.Add(1))
				res, err := p.Send(ctx, &client.Message{Topic: "failover", Keys: []string{key}, Body: []byte(key)})
				if err != nil {
					failures.Add(1)
					continue
				}
				mu.Lock()
				acked[key] = res.BrokerName
				mu.Unlock()
			}
		}()
	}
	countOn := func(broker string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, b := range acked {
			if b == broker {
				n++
			}
		}
		return n
	}
	// Produce to both, then kill broker-b mid-stream.
	if err := Poll(20*time.Second, func() error {
		if countOn("broker-a") < 300 || countOn("broker-b") < 300 {
			return fmt.Errorf("a=%d b=%d", countOn("broker-a"), countOn("broker-b"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	brokers[1].Kill()
	killedAt := time.Now()
	onA := countOn("broker-a")
	// Producers keep going on broker-a.
	if err := Poll(20*time.Second, func() error {
		if countOn("broker-a") < onA+1000 {
			return fmt.Errorf("broker-a took %d since the kill", countOn("broker-a")-onA)
		}
		return nil
	}); err != nil {
		t.Fatalf("producers did not move to broker-a: %v", err)
	}
	t.Logf("producers moved to broker-a; %d sends failed for good", failures.Load())
	stop.Store(true)
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	brokers[1].Restart()
	if err := Poll(15*time.Second, func() error {
		if n := len(routedTo(t, ns.Addr, "failover")); n != 2 {
			return fmt.Errorf("routed to %d brokers", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Consume everything from the start with a fresh group.
	seen := make(map[string]int)
	var seenMu sync.Mutex
	c, err := client.NewPushConsumer("failover-audit", client.WithNameServers(ns.Addr),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithRouteRefreshInterval(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe("failover", "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		seenMu.Lock()
		for _, m := range msgs {
			seen[string(m.Body)]++
		}
		seenMu.Unlock()
		return client.ConsumeSuccess
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mu.Lock()
	total := len(acked)
	mu.Unlock()
	var lost int
	err = Poll(60*time.Second, func() error {
		seenMu.Lock()
		defer seenMu.Unlock()
		lost = 0
		mu.Lock()
		for k := range acked {
			if seen[k] == 0 {
				lost++
			}
		}
		mu.Unlock()
		if lost > 0 {
			return fmt.Errorf("%d of %d acknowledged messages not consumed yet", lost, total)
		}
		return nil
	})
	seenMu.Lock()
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups += n - 1
		}
	}
	seenMu.Unlock()
	t.Logf("acknowledged %d (broker-a %d, broker-b %d), consumed %d distinct, lost %d, duplicates %d; everything consumed %v after the kill",
		total, countOn("broker-a"), countOn("broker-b"), len(seen), lost, dups, time.Since(killedAt).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("lost acknowledged messages: %v", err)
	}
}
