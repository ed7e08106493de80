package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// runBench runs one bench command with -o json and decodes its one line.
func runBench(t *testing.T, ns string, args ...string) benchJSON {
	t.Helper()
	args = append(args, "--namesrv", ns, "-o", "json")
	code, out, errb := runCLI(t, "", args...)
	if code != 0 || errb != "" {
		t.Fatalf("%q: exit %d, stderr %q", args, code, errb)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("%q: want one JSON line, got %q", args, out)
	}
	var b benchJSON
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("%q: %v in %q", args, err, out)
	}
	// The keys docs/CLI.md lists are there, zeros included; e2e's only
	// for e2e.
	var keys map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"msgsPerSec", "mibPerSec", "messages", "errors", "seconds", "latencyMs"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("%q: no %q in %s", args, k, out)
		}
	}
	for _, k := range []string{"targetRate", "sent", "missing", "ackLatencyMs", "sendLagMs"} {
		if _, ok := keys[k]; ok != (b.Bench == "e2e") {
			t.Errorf("%q: %q present: %v in a %s report: %s", args, k, ok, b.Bench, out)
		}
	}
	return b
}

// TestBenchAgainstCluster runs every bench mode against a real in-process
// cluster with small counts and checks what each one counted.
func TestBenchAgainstCluster(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("bench-cli", 4)
	ns := strings.Join(c.NameServerAddrs(), ",")

	p := runBench(t, ns, "bench", "produce", "--topic", "bench-cli", "--count", "200", "--producers", "2", "--size", "100")
	if p.Bench != "produce" || p.Messages != 200 || p.Bytes != 200*100 || p.Errors != 0 || p.Clients != 2 ||
		p.LatencyKind != "ack" || p.Latency.Count != 200 {
		t.Errorf("produce: %+v", p)
	}
	produceProfile := filepath.Join(t.TempDir(), "produce.pprof")
	b := runBench(t, ns, "bench", "produce", "--topic", "bench-cli", "--count", "256", "--batch", "8", "--async", "--inflight", "4",
		"--cpu-profile", produceProfile)
	if b.Messages != 256 || b.Errors != 0 || !b.Async || b.Batch != 8 || b.Latency.Count != 256/8 {
		t.Errorf("produce --batch --async: %+v", b)
	}
	if st, err := os.Stat(produceProfile); err != nil || st.Size() == 0 {
		t.Errorf("produce --cpu-profile: %v, %v", st, err)
	}
	// --rate paces all producers together: the 100th message is due 0.495 s
	// after the start, so the run cannot end sooner.
	r := runBench(t, ns, "bench", "produce", "--topic", "bench-cli", "--count", "100", "--producers", "2", "--rate", "200")
	if r.Messages != 100 || r.Errors != 0 || r.Seconds < 0.49 {
		t.Errorf("produce --rate 200: %+v", r)
	}
	// bench consume reads the backlog its start finds: wait until the
	// queues hold every message sent (acknowledged is not yet dispatched).
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	testutil.WaitFor(t, 10*time.Second, "556 messages in the queues", func() error {
		qs, err := adm.QueueStatus(context.Background(), "bench-cli")
		if err != nil {
			return err
		}
		n := int64(0)
		for _, q := range qs {
			n += q.MaxOffset - q.MinOffset
		}
		if n != 556 {
			return fmt.Errorf("%d messages", n)
		}
		return nil
	})
	cs := runBench(t, ns, "bench", "consume", "--topic", "bench-cli", "--pull-batch", "16")
	if cs.Bench != "consume" || cs.Messages != 556 || cs.LatencyKind != "end-to-end" || cs.Latency.Count != 556 {
		t.Errorf("consume: %+v", cs)
	}

	// Messages already in the topic (and the other run's) are not read:
	// each run reads only its own.
	e := runBench(t, ns, "bench", "e2e", "--topic", "bench-cli", "--rate", "200", "--duration", "1s", "--warmup", "0")
	if e.Bench != "e2e" || e.Sent != 200 || e.Messages != 200 || e.Missing != 0 || e.Errors != 0 ||
		e.LatencyKind != "end-to-end" || e.Latency.Count != 200 || e.TargetRate != 200 || e.Size != 1024 ||
		e.AckLatency.Count != 200 || e.SendLag.Count != 200 {
		t.Errorf("e2e: %+v", e)
	}
	// Messages scheduled in the warm-up (the first 100 of 200 here) are
	// received but not timed.
	// --cpu-profile writes a profile of the run.
	profile := filepath.Join(t.TempDir(), "cpu.pprof")
	w := runBench(t, ns, "bench", "e2e", "--topic", "bench-cli", "--rate", "200", "--duration", "1s", "--warmup", "500ms", "--size", "64",
		"--cpu-profile", profile)
	if w.Sent != 200 || w.Messages != 200 || w.Latency.Count != 100 || w.Bytes != 200*64 ||
		w.AckLatency.Count != 100 || w.SendLag.Count != 100 {
		t.Errorf("e2e --warmup: %+v", w)
	}
	if st, err := os.Stat(profile); err != nil || st.Size() == 0 {
		t.Errorf("e2e --cpu-profile: %v, %v", st, err)
	}

	code, out, errb := runCLI(t, "", "bench", "e2e", "--topic", "bench-cli", "--rate", "50", "--duration", "200ms",
		"--warmup", "0", "--namesrv", ns)
	if code != 0 || errb != "" {
		t.Fatalf("e2e table: exit %d, stderr %q", code, errb)
	}
	for _, want := range []string{"Sent 10 messages of 1024 bytes to bench-cli at 50 msgs/s", "Received:", "10 (0 missing)",
		"End-to-end latency:", "Sends started late:", "10 samples"} {
		if !strings.Contains(out, want) {
			t.Errorf("e2e table output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "e2e"}, "--topic is required"},
		{[]string{"bench", "e2e", "--topic", "t", "--rate", "0"}, "--rate must be positive"},
		{[]string{"bench", "e2e", "--topic", "t", "--size", "0"}, "--size"},
		{[]string{"bench", "e2e", "--topic", "t", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"bench", "e2e", "--topic", "t", "--duration", "1s", "--warmup", "1s"}, "--warmup"},
		{[]string{"bench", "e2e", "--topic", "t", "--inflight", "0"}, "--inflight"},
		{[]string{"bench", "consume", "--topic", "t", "--pull-batch", "0"}, "--pull-batch must be positive"},
		{[]string{"bench", "produce", "--topic", "t", "--rate", "-1"}, "--rate must not be negative"},
	} {
		for _, extra := range [][]string{nil, {"-o", "json"}} {
			args := append(append([]string{}, c.args...), extra...)
			code, out, errb := runCLI(t, "", args...)
			checkOneLineError(t, args, code, out, errb, exitUsage, c.want)
		}
	}
}

// TestPullBatchHelpNamesBrokerCap: the help of --pull-batch names the
// broker's real default cap on a pull.
func TestPullBatchHelpNamesBrokerCap(t *testing.T) {
	root := newRootCmd(newApp(context.Background(), nil, nil, nil))
	c, _, err := root.Find([]string{"bench", "consume"})
	if err != nil {
		t.Fatal(err)
	}
	usage := c.Flags().Lookup("pull-batch").Usage
	if want := fmt.Sprintf("caps it: %d unless configured", broker.DefaultOptions("").PullMaxMessages); !strings.Contains(usage, want) {
		t.Errorf("--pull-batch: %q, want %q", usage, want)
	}
}

// TestBenchSQLFilter: bench produce --buckets numbers the messages' bucket
// property; bench consume --sql reads the matching share through the
// broker's filter and reports the backlog it went through.
func TestBenchSQLFilter(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("bench-sql", 4)
	ns := strings.Join(c.NameServerAddrs(), ",")
	p := runBench(t, ns, "bench", "produce", "--topic", "bench-sql", "--count", "1000", "--batch", "10", "--producers", "2", "--buckets", "100", "--size", "64")
	if p.Messages != 1000 || p.Errors != 0 {
		t.Fatalf("produce --buckets: %+v", p)
	}
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	testutil.WaitFor(t, 10*time.Second, "1000 messages in the queues", func() error {
		qs, err := adm.QueueStatus(context.Background(), "bench-sql")
		if err != nil {
			return err
		}
		n := int64(0)
		for _, q := range qs {
			n += q.MaxOffset - q.MinOffset
		}
		if n != 1000 {
			return fmt.Errorf("%d messages", n)
		}
		return nil
	})
	cs := runBench(t, ns, "bench", "consume", "--topic", "bench-sql", "--sql", "bucket = 7", "--count", "10")
	if cs.Messages != 10 || cs.Bytes != 10*64 || cs.SQL == nil || cs.SQL.Scanned != 1000 || cs.SQL.Condition != "bucket = 7" {
		t.Fatalf("consume --sql: %+v %+v", cs, cs.SQL)
	}
	// Without --count: until idle; 10 % of the stream.
	cs = runBench(t, ns, "bench", "consume", "--topic", "bench-sql", "--sql", "bucket < 10", "--idle", "1s")
	if cs.Messages != 100 || cs.SQL == nil || cs.SQL.Scanned != 1000 {
		t.Fatalf("consume --sql until idle: %+v %+v", cs, cs.SQL)
	}
	code, out, stderr := runCLI(t, "", "bench", "consume", "--topic", "bench-sql", "--sql", "bucket = 7", "--count", "10", "--namesrv", ns)
	if code != 0 || !strings.Contains(out, "SQL92 filter:        bucket = 7: backlog of 1000 scanned at ") {
		t.Fatalf("consume --sql table: exit %d %q %q", code, out, stderr)
	}
	t.Logf("$ bolide bench consume --topic bench-sql --sql \"bucket = 7\" --count 10\n%s%s", stderr, out)
	code, out, stderr = runCLI(t, "", "bench", "consume", "--topic", "bench-sql", "--sql", "bucket = ", "--namesrv", ns)
	if code != exitUsage || !strings.Contains(stderr, "offset 9") {
		t.Fatalf("bad --sql: exit %d %q %q", code, out, stderr)
	}
}
