package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestConsumeSQL: consume --sql prints exactly the messages of a mixed
// stream whose properties satisfy the condition, and the group's lag is 0
// afterwards (its offsets passed the others); a condition the brokers
// refuse is a usage error with the position of the mistake; --sql and
// --tag are exclusive.
func TestConsumeSQL(t *testing.T) {
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2})
	ns := strings.Join(c.NameServerAddrs(), ",")
	cli := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		if code != 0 {
			t.Fatalf("bolide %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	cli("topic", "create", "orders", "--queues", "2")

	// The table output, as docs/CLI.md shows it.
	for _, m := range [][]string{
		{"--tag", "paid", "--property", "region=eu", "--property", "amount=120", "order 1"},
		{"--tag", "paid", "--property", "region=us", "--property", "amount=300", "order 2"},
		{"--tag", "void", "--property", "region=eu", "--property", "amount=500", "order 3"},
		{"--tag", "paid", "--property", "region=eu", "--property", "amount=80", "order 4"},
		{"--tag", "paid", "--property", "region=eu", "order 5"},
		{"--tag", "paid", "--property", "region=eu", "--property", "amount=999", "order 6"},
	} {
		cli(append([]string{"send", "--topic", "orders"}, m...)...)
	}
	code, out, stderr := runCLI(t, "", "--namesrv", ns, "consume", "--topic", "orders", "--group", "eu-large",
		"--sql", "region = 'eu' AND amount > 100 AND TAGS = 'paid'", "--timeout", "2s")
	t.Logf("$ bolide consume --topic orders --group eu-large --sql \"region = 'eu' AND amount > 100 AND TAGS = 'paid'\" --timeout 2s\n%s%s", out, stderr)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "order 1\n") || !strings.Contains(out, "order 6\n") ||
		!strings.Contains(stderr, "consumed 2 messages from orders as group eu-large") {
		t.Fatalf("consume --sql: exit %d\n%s%s", code, out, stderr)
	}
	// Over POP too: the same two, received and acknowledged.
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "consume", "--topic", "orders", "--group", "eu-large-pop", "--pop",
		"--sql", "region = 'eu' AND amount > 100 AND TAGS = 'paid'", "--count", "2", "--timeout", "10s", "-o", "json")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `order 1`) || !strings.Contains(out, `order 6`) {
		t.Fatalf("consume --pop --sql: exit %d\n%s%s", code, out, stderr)
	}

	// A mixed stream: exactly the matching messages, then lag 0.
	p, err := client.NewProducer("pg", client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 2000
	for i := 0; i < n; i += 100 {
		var batch []*client.Message
		for j := i; j < i+100; j++ {
			kind := []string{"a", "b", "c", "d", "e"}[j%5]
			batch = append(batch, &client.Message{Topic: "orders", Body: []byte("m" + strconv.Itoa(j)),
				Properties: map[string]string{"kind": kind, "n": strconv.Itoa(j)}})
		}
		if _, err := p.SendBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	out = cli("consume", "--topic", "orders", "--group", "mixed2", "--sql", "kind IN ('a', 'c') AND n IS NOT NULL", "-o", "json", "--timeout", "3s")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct {
			Body       string            `json:"body"`
			Properties map[string]string `json:"properties"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[m.Body]++
		if k := m.Properties["kind"]; k != "a" && k != "c" {
			t.Fatalf("message %s of kind %q", m.Body, k)
		}
	}
	if len(got) != n*2/5 {
		t.Fatalf("consumed %d distinct messages, want %d", len(got), n*2/5)
	}
	for b, k := range got {
		if k != 1 {
			t.Fatalf("%s printed %d times", b, k)
		}
	}
	var lag struct {
		TotalLag int64 `json:"totalLag"`
	}
	if err := json.Unmarshal([]byte(cli("group", "lag", "mixed2", "--topic", "orders", "-o", "json")), &lag); err != nil || lag.TotalLag != 0 {
		t.Fatalf("group lag after consume --sql: %+v %v", lag, err)
	}

	// Refusals.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sql", "region = 'eu' AND"}, "offset 17"},
		{[]string{"--sql", "region = 'eu'", "--tag", "paid"}, "--sql and --tag are exclusive"},
		{[]string{"--sql", " "}, "--sql: empty condition"},
	} {
		args := append([]string{"--namesrv", ns, "consume", "--topic", "orders", "--group", "bad"}, tc.args...)
		code, out, stderr := runCLI(t, "", args...)
		t.Logf("%v: %s", tc.args, stderr)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want usage error with %q", tc.args, code, out, stderr, tc.want)
		}
	}
}
