package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// createTopicOn creates a topic on one broker address.
func createTopicOn(t *testing.T, addr, topic string, queues int32) {
	t.Helper()
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewBrokerClient(conn).CreateTopic(context.Background(), &pb.CreateTopicRequest{
		Topic: &pb.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}, Update: true})
	if err == nil {
		err = wire.FromStatus(resp.Status)
	}
	if err != nil {
		t.Fatalf("create topic on %s: %v", addr, err)
	}
}

// routedTo returns the broker names a NameServer routes topic to.
func routedTo(t *testing.T, nsAddr, topic string) []string {
	r, err := route(t, nsAddr, topic)
	if err != nil {
		return nil
	}
	var names []string
	for _, q := range r.QueueDatas {
		names = append(names, q.BrokerName)
	}
	return names
}

// killBrokerAndTimeEviction starts a NameServer and two brokers as real
// processes, kills one with SIGKILL and returns how long until the
// NameServer stopped routing to it.
func killBrokerAndTimeEviction(t *testing.T, nsArgs, brokerArgs []string, limit time.Duration) time.Duration {
	ns := StartProc(t, "bolide-nameserver", append([]string{"--listen", "127.0.0.1:0"}, nsArgs...)...)
	var brokers []*Proc
	for _, name := range []string{"broker-a", "broker-b"} {
		args := append([]string{"--listen", "127.0.0.1:0", "--namesrv", ns.Addr, "--broker-name", name,
			"--store-dir", t.TempDir(), "--segment-size", fmt.Sprint(64 << 20), "--flush", "sync",
			"--register-interval", "1s"}, brokerArgs...)
		b := StartProc(t, "bolide-broker", args...)
		createTopicOn(t, b.Addr, "evict", 2)
		brokers = append(brokers, b)
	}
	if err := Poll(10*time.Second, func() error {
		if n := len(routedTo(t, ns.Addr, "evict")); n != 2 {
			return fmt.Errorf("routed to %d brokers", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Let gossip settle so the pool knows the broker before it dies.
	time.Sleep(500 * time.Millisecond)
	brokers[1].Kill()
	killed := time.Now()
	if err := Poll(limit, func() error {
		for _, n := range routedTo(t, ns.Addr, "evict") {
			if n == "broker-b" {
				return fmt.Errorf("still routed to broker-b")
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("killed broker still in routes after %v: %v", limit, err)
	}
	took := time.Since(killed)
	// The survivor keeps its route; the killed one comes back on restart.
	if got := routedTo(t, ns.Addr, "evict"); len(got) != 1 || got[0] != "broker-a" {
		t.Fatalf("routes after eviction: %v", got)
	}
	brokers[1].Restart()
	if err := Poll(10*time.Second, func() error {
		if n := len(routedTo(t, ns.Addr, "evict")); n != 2 {
			return fmt.Errorf("routed to %d brokers", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("restarted broker did not come back: %v", err)
	}
	return took
}

// TestKilledBrokerLeavesRoutesThroughGossip: with memberlist on, a broker
// killed with SIGKILL leaves the routes within 15 s.
func TestKilledBrokerLeavesRoutesThroughGossip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	took := killBrokerAndTimeEviction(t, []string{"--gossip", "127.0.0.1:0"},
		[]string{"--gossip", "127.0.0.1:0"}, 15*time.Second)
	t.Logf("killed broker left the routes after %v (memberlist, LAN timings)", took)
}

// TestKilledBrokerLeavesRoutesBySweep: with memberlist off, the heartbeat
// sweep evicts a killed broker once its timeout passes. CI runs it with a
// 6 s timeout and a 1 s sweep; BOLIDE_SLOW_TESTS=1 runs the production
// defaults (120 s timeout, 10 s sweep: at most 130 s).
func TestKilledBrokerLeavesRoutesBySweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	nsArgs := []string{"--gossip", "off", "--broker-timeout", "6s", "--scan-interval", "1s"}
	limit := 6*time.Second + time.Second + 5*time.Second
	if os.Getenv("BOLIDE_SLOW_TESTS") != "" {
		nsArgs = []string{"--gossip", "off"}
		limit = 130 * time.Second
	}
	took := killBrokerAndTimeEviction(t, nsArgs, []string{"--gossip", "off"}, limit)
	t.Logf("killed broker left the routes after %v (sweep, limit %v)", took, limit)
}
