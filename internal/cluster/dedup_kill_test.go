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
	"github.com/bolide-mq/bolide/internal/faultproxy"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestDedupThroughLostAnswersAndKill: producers whose sends retry three
// times reach a broker (a real process) through a fault proxy that drops a
// fifth of what crosses it, so that answers are lost and the sends are
// retried after the broker stored them; midway the broker is killed with
// -9 and restarted. Every acknowledged message is stored exactly once, and
// no message at all is stored twice: the broker's deduplication window
// answers the retries, and after the restart its index does.
func TestDedupThroughLostAnswersAndKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	t.Parallel()
	const total = 1200
	ns := StartProc(t, "bolide-nameserver", "--listen", "127.0.0.1:0", "--gossip", "off")
	proxy, err := faultproxy.New("127.0.0.1:0", "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Start()
	t.Cleanup(func() { _ = proxy.Close() })
	// A fixed port: the address file names the advertised address (the
	// proxy's), and the restarted broker listens where the proxy points.
	listen, admin := freeAddr(t), freeAddr(t)
	b := StartProc(t, "bolide-broker", "--listen", listen, "--advertise", proxy.Addr(), "--admin-listen", admin, "--namesrv", ns.Addr,
		"--store-dir", t.TempDir(), "--segment-size", strconv.Itoa(64<<20), "--register-interval", "1s", "--gossip", "off")
	proxy.SetTarget(listen)
	createTopicOn(t, listen, "dedup", 4)
	if err := Poll(10*time.Second, func() error {
		if n := len(routedTo(t, ns.Addr, "dedup")); n != 1 {
			return fmt.Errorf("routed to %d brokers", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	p, err := client.NewProducer("dedup-producer", client.WithNameServers(ns.Addr),
		client.WithSendRetries(3), client.WithSendTimeout(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	proxy.SetDropRate(0.2)

	var (
		mu     sync.Mutex
		acked  = make(map[string]string) // body → unique id
		failed atomic.Int64
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				body := fmt.Sprintf("m-%d", i)
				res, err := p.Send(ctx, &client.Message{Topic: "dedup", Body: []byte(body)})
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				acked[body] = res.MsgID
				mu.Unlock()
			}
		}()
	}
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	if err := Poll(60*time.Second, func() error {
		if n := ackedCount(); n < total/3 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.Kill()
	b.Restart()
	proxy.Cut()
	t.Logf("broker killed and restarted after %d acknowledged sends", ackedCount())
	wg.Wait()
	proxy.SetDropRate(0)

	copies := storedCopies(t, listen, "dedup", 4)
	hits, _ := scrapeMetric(admin, "bolide_dedup_hits_total") // since the restart
	lost, twice := 0, 0
	mu.Lock()
	defer mu.Unlock()
	for body, id := range acked {
		switch n := copies[body]; {
		case n == 0:
			lost++
		case copies[body] > 1:
			t.Errorf("%s (id %s) stored %d times", body, id, n)
		}
	}
	for body, n := range copies {
		if n > 1 {
			twice++
			if _, ok := acked[body]; !ok {
				t.Errorf("%s, never acknowledged, stored %d times", body, n)
			}
		}
	}
	t.Logf("%d sends: %d acknowledged, %d failed for good; %d distinct messages stored, %d lost, %d stored twice; "+
		"%.0f retries answered from the window since the restart", total, len(acked), failed.Load(), len(copies), lost, twice, hits)
	if lost > 0 {
		t.Fatalf("%d acknowledged messages are not stored", lost)
	}
	if hits == 0 {
		t.Fatal("no retry reached the broker after its answer was lost: the faults did not exercise deduplication")
	}
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d sends were acknowledged: the faults left too little to check", len(acked), total)
	}
}

// storedCopies reads every queue of topic from the start, straight from
// the broker, and counts the copies of each body.
func storedCopies(t *testing.T, addr, topic string, queues int32) map[string]int {
	t.Helper()
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewBrokerClient(conn)
	ctx := context.Background()
	out := make(map[string]int)
	for q := range queues {
		var maxOff int64
		if err := Poll(10*time.Second, func() error {
			r, err := c.GetQueueOffsets(ctx, &pb.GetQueueOffsetsRequest{Topic: topic, QueueId: q})
			if err != nil {
				return err
			}
			maxOff = r.MaxOffset
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < maxOff; {
			resp, err := c.Pull(ctx, &pb.PullRequest{Topic: topic, QueueId: q, Offset: off, MaxMessages: 256, CommitOffset: -1})
			if err != nil || wire.FromStatus(resp.Status) != nil || len(resp.Records) == 0 {
				t.Fatalf("pull %s/%d at %d: %v %v (%d records)", topic, q, off, err, resp.GetStatus(), len(resp.GetRecords()))
			}
			for _, rec := range resp.Records {
				m, err := message.Decode(rec)
				if err != nil {
					t.Fatal(err)
				}
				out[string(m.Body)]++
			}
			off = resp.NextOffset
		}
	}
	return out
}
