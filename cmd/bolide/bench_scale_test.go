package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

func TestSpreadTopics(t *testing.T) {
	for _, c := range []struct{ n, p int }{{1, 1}, {10, 3}, {3, 10}, {10000, 1000}, {7, 7}, {1, 5}} {
		got := spreadTopics("s", c.n, c.p)
		if len(got) != c.p {
			t.Fatalf("n=%d p=%d: %d producers", c.n, c.p, len(got))
		}
		perTopic := map[string]int{}
		lo, hi := c.n, 0
		for _, ts := range got {
			if len(ts) == 0 {
				t.Fatalf("n=%d p=%d: a producer has no topic", c.n, c.p)
			}
			lo, hi = min(lo, len(ts)), max(hi, len(ts))
			for _, x := range ts {
				perTopic[x]++
			}
		}
		if len(perTopic) != c.n {
			t.Errorf("n=%d p=%d: %d distinct topics", c.n, c.p, len(perTopic))
		}
		for i := range c.n {
			if perTopic[benchName("s", i)] == 0 {
				t.Errorf("n=%d p=%d: s-%d has no producer", c.n, c.p, i)
			}
		}
		if c.n >= c.p {
			if hi-lo > 1 {
				t.Errorf("n=%d p=%d: producers have %d to %d topics", c.n, c.p, lo, hi)
			}
			for x, k := range perTopic {
				if k != 1 {
					t.Errorf("n=%d p=%d: %s has %d producers", c.n, c.p, x, k)
				}
			}
		} else {
			plo, phi := c.p, 0
			for _, k := range perTopic {
				plo, phi = min(plo, k), max(phi, k)
			}
			if phi-plo > 1 {
				t.Errorf("n=%d p=%d: topics have %d to %d producers", c.n, c.p, plo, phi)
			}
		}
	}
}

func TestTenths(t *testing.T) {
	if got := tenths(nil); len(got) != 0 {
		t.Errorf("no completions: %+v", got)
	}
	s := time.Second
	got := tenths([]time.Duration{s, 2 * s, 3 * s})
	if len(got) != 3 || got[2].Done != 3 || got[0].TopicsPerSec != 1 {
		t.Errorf("three completions: %+v", got)
	}
	// 100 completions, the last 10 taking 10 s, the first 90 taking 9 s.
	var at []time.Duration
	for i := 1; i <= 90; i++ {
		at = append(at, time.Duration(i)*100*time.Millisecond)
	}
	for i := 1; i <= 10; i++ {
		at = append(at, 9*s+time.Duration(i)*s)
	}
	got = tenths(at)
	if len(got) != 10 || got[9].Done != 100 || got[0].Done != 10 {
		t.Fatalf("100 completions: %+v", got)
	}
	if got[0].TopicsPerSec != 10 || got[9].TopicsPerSec != 1 {
		t.Errorf("rates of the first and last tenth: %v and %v, want 10 and 1", got[0].TopicsPerSec, got[9].TopicsPerSec)
	}
}

func TestBenchScaleUsageErrors(t *testing.T) {
	long := strings.Repeat("x", 125)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "create-topics", "--topics", "3"}, "--topic is required"},
		{[]string{"bench", "create-topics", "--topic", "s"}, "--topics must be positive"},
		{[]string{"bench", "create-topics", "--topic", "s", "--topics", "3", "--queues", "0"}, "--queues must be in 1..1024"},
		{[]string{"bench", "create-topics", "--topic", "s", "--topics", "3", "--concurrency", "0"}, "--concurrency must be positive"},
		{[]string{"bench", "create-topics", "--topic", long, "--topics", "100"}, "--topic"},
		{[]string{"bench", "create-topics", "--topic", "a b", "--topics", "2"}, "--topic"},
		{[]string{"bench", "produce", "--topic", "t", "--topics", "-1"}, "--topics must not be negative"},
		{[]string{"bench", "produce", "--topic", long, "--topics", "1000"}, "--topic"},
		{[]string{"bench", "produce", "--topic", "t", "--delay", "-1s"}, "--delay and --delay-level must not be negative"},
		{[]string{"bench", "produce", "--topic", "t", "--delay-level", "-2"}, "--delay and --delay-level must not be negative"},
		{[]string{"bench", "produce", "--topic", "t", "--delay", "1s", "--delay-level", "2"}, "not both"},
		{[]string{"bench", "consume", "--topic", "t", "--groups", "0"}, "--groups must be positive"},
		{[]string{"bench", "consume", "--topic", "t", "--groups", "1000", "--group", strings.Repeat("g", 253)}, "--group"},
	} {
		for _, extra := range [][]string{nil, {"-o", "json"}} {
			args := append(append([]string{}, c.args...), extra...)
			code, out, errb := runCLI(t, "", args...)
			checkOneLineError(t, args, code, out, errb, exitUsage, c.want)
		}
	}
}

func TestBenchGroupNames(t *testing.T) {
	now := time.UnixMilli(1700000000123)
	f := &benchConsumeFlags{groups: 1}
	if got := f.groupNames(now); len(got) != 1 || got[0] != "bolide-bench-1700000000123" {
		t.Errorf("fresh single group: %q", got)
	}
	f = &benchConsumeFlags{groups: 3, group: "g"}
	if got := f.groupNames(now); strings.Join(got, ",") != "g-0,g-1,g-2" {
		t.Errorf("three groups: %q", got)
	}
	f = &benchConsumeFlags{groups: 1, group: "g"}
	if got := f.groupNames(now); len(got) != 1 || got[0] != "g" {
		t.Errorf("one named group: %q", got)
	}
}

// queueCounts returns the messages in each queue of topic.
func queueCounts(t *testing.T, adm *client.Admin, topic string) []int64 {
	t.Helper()
	qs, err := adm.QueueStatus(context.Background(), topic)
	if err != nil {
		t.Fatalf("queue status of %s: %v", topic, err)
	}
	out := make([]int64, len(qs))
	for i, q := range qs {
		out[i] = q.MaxOffset - q.MinOffset
	}
	return out
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// waitMessages waits until topic holds n messages.
func waitMessages(t *testing.T, adm *client.Admin, topic string, n int64) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%d messages in %s", n, topic), func() error {
		qs, err := adm.QueueStatus(context.Background(), topic)
		if err != nil {
			return err
		}
		var got int64
		for _, q := range qs {
			got += q.MaxOffset - q.MinOffset
		}
		if got != n {
			return fmt.Errorf("%d messages", got)
		}
		return nil
	})
}

// TestBenchManyTopics: bench create-topics makes PREFIX-0 … PREFIX-N-1
// with the queues asked for, counts those that exist on a second run, and
// bench produce --topics spreads its messages over all of them.
func TestBenchManyTopics(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ns := strings.Join(c.NameServerAddrs(), ",")
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	code, out, errb := runCLI(t, "", "bench", "create-topics", "--topic", "many", "--topics", "12", "--queues", "2",
		"--concurrency", "4", "--namesrv", ns, "-o", "json")
	if code != 0 || errb != "" {
		t.Fatalf("create-topics: exit %d, stderr %q", code, errb)
	}
	var ct createTopicsJSON
	if err := json.Unmarshal([]byte(out), &ct); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if ct.Bench != "create-topics" || ct.Created != 12 || ct.Existing != 0 || ct.Errors != 0 || ct.Queues != 2 ||
		ct.Latency.Count != 12 || len(ct.Tenths) != 10 || ct.Tenths[9].Done != 12 || ct.TopicsPerSec <= 0 {
		t.Fatalf("create-topics: %+v", ct)
	}
	for i := range 12 {
		r, err := adm.Route(context.Background(), benchName("many", i))
		if err != nil {
			t.Fatalf("route of many-%d: %v", i, err)
		}
		if len(r.Queues) != 1 || r.Queues[0].WriteQueues != 2 || r.Queues[0].ReadQueues != 2 {
			t.Errorf("many-%d: queues %+v", i, r.Queues)
		}
	}
	code, out, errb = runCLI(t, "", "bench", "create-topics", "--topic", "many", "--topics", "13", "--queues", "2", "--namesrv", ns)
	if code != 0 || !strings.Contains(out, "Created 1 topics of 2 queues (many-0 … many-12)") ||
		!strings.Contains(out, "Existing:") || !strings.Contains(out, "12") {
		t.Fatalf("create-topics again: exit %d, stdout %q, stderr %q", code, out, errb)
	}

	// More topics than producers: each producer takes its share of the
	// topics, and every queue of every topic gets messages.
	p := runBench(t, ns, "bench", "produce", "--topic", "many", "--topics", "13", "--producers", "3", "--count", "520", "--size", "64")
	if p.Messages != 520 || p.Errors != 0 || p.Topics != 13 || p.Topic != "many" {
		t.Fatalf("produce --topics 13: %+v", p)
	}
	// Acknowledged is not yet dispatched: wait for the queues to hold them.
	testutil.WaitFor(t, 30*time.Second, "520 messages in the 13 topics", func() error {
		var total int64
		for i := range 13 {
			total += sum(queueCounts(t, adm, benchName("many", i)))
		}
		if total != 520 {
			return fmt.Errorf("the topics hold %d messages in all", total)
		}
		return nil
	})
	var firstRun [3]int64 // what the first three topics hold now
	for i := range 13 {
		counts := queueCounts(t, adm, benchName("many", i))
		for q, n := range counts {
			if n == 0 {
				t.Errorf("many-%d queue %d got no message: %v", i, q, counts)
			}
		}
		if i < 3 {
			firstRun[i] = sum(counts)
		}
	}
	// Fewer topics than producers, batched and asynchronous: all three
	// topics are used.
	p = runBench(t, ns, "bench", "produce", "--topic", "many", "--topics", "3", "--producers", "5", "--count", "300",
		"--batch", "5", "--async", "--inflight", "2", "--size", "64")
	if p.Messages != 300 || p.Errors != 0 {
		t.Fatalf("produce --topics 3 --producers 5: %+v", p)
	}
	testutil.WaitFor(t, 30*time.Second, "the second run's 300 messages in the first 3 topics", func() error {
		var total int64
		for i := range 3 {
			total += sum(queueCounts(t, adm, benchName("many", i)))
		}
		if total != firstRun[0]+firstRun[1]+firstRun[2]+300 {
			return fmt.Errorf("they hold %d messages in all", total)
		}
		return nil
	})
	for i := range 3 {
		if sum(queueCounts(t, adm, benchName("many", i))) <= firstRun[i] {
			t.Errorf("many-%d got no message of the second run", i)
		}
	}
	// A topic of the range that does not exist is named.
	code, out, errb = runCLI(t, "", "bench", "produce", "--topic", "many", "--topics", "14", "--namesrv", ns)
	if code == 0 || out != "" || !strings.Contains(errb, "many-13") {
		t.Errorf("produce --topics 14: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// TestBenchConsumeGroups: bench consume --groups N reads the backlog once
// per group, and each group reads all of it.
func TestBenchConsumeGroups(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("groups", 4)
	ns := strings.Join(c.NameServerAddrs(), ",")
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if p := runBench(t, ns, "bench", "produce", "--topic", "groups", "--count", "300", "--batch", "10", "--size", "100"); p.Messages != 300 {
		t.Fatalf("produce: %+v", p)
	}
	waitMessages(t, adm, "groups", 300)

	delivered := func() int64 {
		rt, err := adm.BrokerRuntime(context.Background(), c.Broker(0).Addr())
		if err != nil {
			t.Fatal(err)
		}
		return rt.GetMessagesTotal
	}
	before := delivered()
	cs := runBench(t, ns, "bench", "consume", "--topic", "groups", "--groups", "6", "--group", "gb", "--pull-batch", "16")
	g := cs.PerGroup
	if cs.Messages != 6*300 || cs.Bytes != 6*300*100 || cs.Groups != 6 || cs.Group != "gb" || cs.Clients != 6 ||
		cs.Latency.Count != 6*300 || g == nil {
		t.Fatalf("consume --groups 6: %+v", cs)
	}
	if g.MinMessages != 300 || g.MaxMessages != 300 || g.Complete != 6 || g.MinMsgsPerSec <= 0 ||
		g.MinMsgsPerSec > g.MedianMsgsPerSec || g.MedianMsgsPerSec > g.MaxMsgsPerSec {
		t.Errorf("consume --groups 6, per group: %+v", g)
	}
	// The broker delivered the backlog six times.
	if d := delivered() - before; d < 6*300 {
		t.Errorf("the broker delivered %d messages, want at least %d", d, 6*300)
	}
	// Two consumers a group, --count each.
	cs = runBench(t, ns, "bench", "consume", "--topic", "groups", "--groups", "3", "--consumers", "2", "--count", "100")
	if cs.Groups != 3 || cs.Clients != 6 || cs.PerGroup == nil || cs.PerGroup.MinMessages < 100 || cs.PerGroup.Complete != 3 {
		t.Errorf("consume --groups 3 --consumers 2 --count 100: %+v %+v", cs, cs.PerGroup)
	}
	code, out, errb := runCLI(t, "", "bench", "consume", "--topic", "groups", "--groups", "2", "--group", "tb", "--namesrv", ns)
	if code != 0 || !strings.Contains(out, "Consumed 600 messages") || !strings.Contains(out, "2 groups (tb-0 … tb-1) of 1 consumer(s)") ||
		!strings.Contains(out, "2 of 2 groups read all") {
		t.Fatalf("consume --groups table: exit %d %q %q", code, out, errb)
	}
}

// TestBenchProduceDelayed: bench produce --delay and --delay-level send
// messages that reach the topic when due, not before.
func TestBenchProduceDelayed(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("later", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	p := runBench(t, ns, "bench", "produce", "--topic", "later", "--delay", "1s", "--count", "40", "--batch", "10", "--size", "32")
	if p.Messages != 40 || p.Errors != 0 || p.Delay != "1s" {
		t.Fatalf("produce --delay 1s: %+v", p)
	}
	l := runBench(t, ns, "bench", "produce", "--topic", "later", "--delay-level", "1", "--count", "20", "--size", "32")
	if l.Messages != 20 || l.Errors != 0 || l.DelayLevel != 1 {
		t.Fatalf("produce --delay-level 1: %+v", l)
	}
	waitMessages(t, adm, "later", 60)

	cons, err := client.NewPullConsumer("later-check", client.WithNameServers(c.NameServerAddrs()...),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithAutoCommit(false))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if err := cons.Subscribe("later", "*"); err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	timers, levels := 0, 0
	for timers+levels < 60 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msgs, err := cons.Poll(ctx)
		cancel()
		if err != nil {
			t.Fatalf("poll after %d timer and %d level messages: %v", timers, levels, err)
		}
		for _, m := range msgs {
			// Delivered copies are stored when due: a second after the
			// producer made them (both ms, one clock), never sooner.
			if early := m.BornTimestamp.Add(time.Second).Sub(m.StoreTimestamp); early > 0 {
				t.Errorf("%s delivered %v early: born %v, stored %v", m.MsgID, early, m.BornTimestamp, m.StoreTimestamp)
			}
			if _, ok := m.Properties[message.PropertyTimerOutMS]; ok {
				timers++
			} else {
				levels++
			}
		}
	}
	if timers != 40 || levels != 20 {
		t.Errorf("delivered %d timer messages and %d of delay level 1, want 40 and 20", timers, levels)
	}
}
