package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestTopicListAll: system topics, which the NameServers do not route,
// are listed only with --all (and --type system), from the brokers'
// configurations, with a KIND column.
func TestTopicListAll(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Broker: func(o *broker.Options) { o.AutoCreateTopic = true }})
	c.CreateTopic("orders", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	cli := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		t.Logf("$ bolide %s\n%s", strings.Join(args, " "), out)
		return out
	}
	// Without --all: the routed topics (orders and the cluster's reply
	// topic), three columns, no system topic.
	want := "TOPIC                       TYPE    MESSAGE TYPE\n" +
		"DefaultCluster_REPLY_TOPIC  normal  MIXED\n" +
		"orders                      normal  MIXED\n"
	if out := cli("topic", "list"); out != want {
		t.Fatalf("topic list: %q", out)
	}
	if out := cli("topic", "list", "-o", "json"); out != `{"messageType":"MIXED","topic":"DefaultCluster_REPLY_TOPIC","type":"normal"}`+"\n"+
		`{"messageType":"MIXED","topic":"orders","type":"normal"}`+"\n" {
		t.Fatalf("topic list -o json: %q", out)
	}

	out := cli("topic", "list", "--all")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(lines[0]); f[len(f)-1] != "KIND" {
		t.Fatalf("topic list --all: %q", out)
	}
	// TBW102 (the brokers create topics on first send here) is one the
	// brokers keep to themselves.
	found := false
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[0] == "TBW102" && f[1] == "system" && strings.Contains(l, "route template for auto-created topics") {
			found = true
		}
	}
	if !found || !strings.Contains(out, "\norders ") {
		t.Fatalf("topic list --all: TBW102 or orders missing:\n%s", out)
	}

	seen := map[string]map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(cli("topic", "list", "--all", "-o", "json")), "\n") {
		var j map[string]string
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatal(err)
		}
		seen[j["topic"]] = j
	}
	if j := seen["TBW102"]; j["type"] != "system" || j["kind"] != "route template for auto-created topics" {
		t.Fatalf("TBW102 in JSON: %v", j)
	}
	if j := seen["orders"]; j["type"] != "normal" || j["kind"] != "" {
		t.Fatalf("orders in JSON: %v", j)
	}

	out = cli("topic", "list", "--type", "system")
	if strings.Contains(out, "orders") || !strings.Contains(out, "\nTBW102 ") || strings.Contains(out, "KIND") {
		t.Fatalf("topic list --type system:\n%s", out)
	}
}

// TestTopicUpdateRefusesUnknown: topic update of a topic that does not
// exist fails (exit 1) pointing at topic create, and creates nothing.
func TestTopicUpdateRefusesUnknown(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ns := strings.Join(c.NameServerAddrs(), ",")
	for _, args := range [][]string{
		{"topic", "update", "paymnets", "--queues", "4"},
		{"topic", "update", "paymnets", "--queues", "4", "-o", "json"},
	} {
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		checkOneLineError(t, args, code, out, stderr, exitFailed,
			`topic "paymnets" does not exist on any registered broker (create it with 'bolide topic create')`)
		t.Logf("$ bolide %s\n%s", strings.Join(args, " "), stderr)
	}
	code, out, _ := runCLI(t, "", "--namesrv", ns, "topic", "list", "--all", "-o", "json")
	if code != 0 || strings.Contains(out, "paymnets") {
		t.Fatalf("the refused topic was created: exit %d\n%s", code, out)
	}
}
