package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestBenchConsumePop: bench consume --pop reads a backlog spread over two
// broker groups with simple consumers, acknowledging every message; a
// second run of the same group finds nothing left.
func TestBenchConsumePop(t *testing.T) {
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2})
	c.CreateTopic("bench-pop", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	p := runBench(t, ns, "bench", "produce", "--topic", "bench-pop", "--count", "300", "--producers", "2", "--size", "100")
	if p.Messages != 300 || p.Errors != 0 {
		t.Fatalf("produce: %+v", p)
	}
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	testutil.WaitFor(t, 10*time.Second, "300 messages in the queues", func() error {
		qs, err := adm.QueueStatus(context.Background(), "bench-pop")
		if err != nil {
			return err
		}
		n := int64(0)
		for _, q := range qs {
			n += q.MaxOffset - q.MinOffset
		}
		if n != 300 {
			return fmt.Errorf("%d messages", n)
		}
		return nil
	})
	b := runBench(t, ns, "bench", "consume", "--topic", "bench-pop", "--group", "bench-pop-g", "--pop", "--consumers", "2",
		"--pull-batch", "16", "--idle", "2s")
	if b.Bench != "consume" || !b.Pop || b.Messages != 300 || b.Errors != 0 || b.Bytes != 300*100 || b.Latency.Count != 300 || b.Clients != 2 {
		t.Fatalf("consume --pop: %+v", b)
	}
	code, out, stderr := runCLI(t, "", "--namesrv", ns, "bench", "consume", "--topic", "bench-pop", "--group", "bench-pop-g",
		"--pop", "--count", "1", "--idle", "1s")
	checkOneLineError(t, []string{"bench", "consume", "--pop"}, code, out, stderr, exitFailed, "no message received from bench-pop")
	code, _, stderr = runCLI(t, "", "--namesrv", ns, "bench", "consume", "--topic", "bench-pop", "--pop", "--invisible", "0s")
	if code != exitUsage || !strings.Contains(stderr, "--invisible must be in") {
		t.Fatalf("--invisible 0s: exit %d, %q", code, stderr)
	}
}
