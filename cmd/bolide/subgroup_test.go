package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestGroupDeclarationsTopicTypesAndPopConsume: group create, update, get
// and delete against two broker groups; topic create --type and the
// message types in topic list; consume --pop receives, prints and
// acknowledges.
func TestGroupDeclarationsTopicTypesAndPopConsume(t *testing.T) {
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2})
	ns := strings.Join(c.NameServerAddrs(), ",")
	cli := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		if code != 0 {
			t.Fatalf("bolide %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		t.Logf("$ bolide %s\n%s", strings.Join(args, " "), out)
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		checkOneLineError(t, args, code, out, stderr, exitFailed, want)
	}

	// Topics with a message type.
	out := cli("topic", "create", "payments", "--queues", "2", "--type", "fifo")
	if out != "created topic payments: 2 queues on broker-a, broker-b (perm rw, type FIFO)\n" {
		t.Fatalf("topic create --type: %q", out)
	}
	out = cli("topic", "update", "payments", "--queues", "4", "-o", "json")
	if out != `{"topic":"payments","queues":4,"perm":"rw","order":false,"messageType":"FIFO","brokers":["broker-a","broker-b"]}`+"\n" {
		t.Fatalf("topic update keeps the type: %q", out)
	}
	cli("topic", "create", "orders", "--queues", "2")
	out = cli("topic", "list", "-o", "json")
	for _, want := range []string{`{"messageType":"FIFO","topic":"payments","type":"normal"}`, `{"messageType":"MIXED","topic":"orders","type":"normal"}`} {
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("topic list -o json lacks %s:\n%s", want, out)
		}
	}
	out = cli("topic", "list")
	if !strings.Contains(out, "MESSAGE TYPE") || !strings.Contains(out, "FIFO") {
		t.Fatalf("topic list:\n%s", out)
	}

	// Subscription groups.
	out = cli("group", "create", "ledger", "--fifo", "--max-delivery-attempts", "5", "--retry-backoff", "1s,5s,10s")
	if out != "created group ledger on broker-a, broker-b (FIFO, 5 delivery attempts, backoff 1s 5s 10s)\n" {
		t.Fatalf("group create: %q", out)
	}
	fails(`group "ledger" already exists (change it with 'bolide group update')`, "group", "create", "ledger")
	out = cli("group", "update", "ledger", "--max-delivery-attempts", "8", "-o", "json")
	if out != `{"group":"ledger","brokers":["broker-a","broker-b"],"fifo":true,"maxDeliveryAttempts":8,"retryPolicy":"CUSTOMIZED","retryBackoff":["1s","5s","10s"],"consumeEnable":true}`+"\n" {
		t.Fatalf("group update keeps what it is not given: %q", out)
	}
	out = cli("group", "update", "plain", "--broker", "broker-b")
	if out != "updated group plain on broker-b (17 delivery attempts, backoff 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h)\n" {
		t.Fatalf("group update of a new group: %q", out)
	}
	out = cli("group", "get", "ledger")
	if !strings.HasPrefix(out, "GROUP") || strings.Count(out, "\n") != 3 || !strings.Contains(out, "broker-b") ||
		!strings.Contains(out, "1s 5s 10s") || !strings.Contains(out, "enabled") {
		t.Fatalf("group get:\n%s", out)
	}
	out = cli("group", "get", "ledger", "-o", "json")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		lines[0] != `{"group":"ledger","broker":"broker-a","fifo":true,"maxDeliveryAttempts":8,"retryPolicy":"CUSTOMIZED","retryBackoff":["1s","5s","10s"],"consumeEnable":true}` {
		t.Fatalf("group get -o json:\n%s", out)
	}

	// consume --pop as the FIFO group: receive, print, acknowledge.
	for i := 0; i < 3; i++ {
		cli("send", "--topic", "payments", "--tag", "paid", "--keys", fmt.Sprint("pay-", i), fmt.Sprint("payment ", i))
	}
	out = cli("consume", "--topic", "payments", "--group", "ledger", "--pop", "--invisible", "1m", "--count", "3", "--timeout", "30s", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("consume --pop: %d messages:\n%s", len(lines), out)
	}
	bodies := map[string]bool{}
	for _, l := range lines {
		var m struct {
			Body            string `json:"body"`
			Tags            string `json:"tags"`
			DeliveryAttempt int32  `json:"deliveryAttempt"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m.Tags != "paid" || m.DeliveryAttempt != 1 {
			t.Fatalf("consume --pop printed %s", l)
		}
		bodies[m.Body] = true
	}
	if len(bodies) != 3 {
		t.Fatalf("consume --pop printed %v", bodies)
	}
	// All acknowledged: nothing comes again. --timeout also bounds each
	// receive request, so it leaves room for a slow one on a busy machine.
	code, out, stderr := runCLI(t, "", "--namesrv", ns, "consume", "--topic", "payments", "--group", "ledger", "--pop", "--timeout", "3s")
	if code != 0 || out != "" || !strings.Contains(stderr, "consumed and acknowledged 0 messages") {
		t.Fatalf("second consume --pop: exit %d, %q, %q", code, out, stderr)
	}
	cli("send", "--topic", "payments", "--tag", "late", "late one")
	out = cli("consume", "--topic", "payments", "--group", "ledger", "--pop", "--count", "1", "--timeout", "30s")
	if !strings.HasPrefix(out, "BROKER") || !strings.Contains(out, "ATTEMPT") || !strings.Contains(out, "late one") {
		t.Fatalf("consume --pop table:\n%s", out)
	}

	// POP progress shows in group lag.
	c.WaitFor(10*time.Second, func() error {
		out := cli("group", "lag", "ledger", "--topic", "payments", "-o", "json")
		var lag struct {
			TotalLag int64 `json:"totalLag"`
			Queues   []struct {
				ConsumerOffset int64 `json:"consumerOffset"`
			} `json:"queues"`
		}
		if err := json.Unmarshal([]byte(out), &lag); err != nil {
			return err
		}
		var consumed int64
		for _, q := range lag.Queues {
			consumed += max(q.ConsumerOffset, 0)
		}
		if lag.TotalLag != 0 || consumed != 4 {
			return fmt.Errorf("group lag: %s", out)
		}
		return nil
	})

	out = cli("group", "delete", "ledger")
	if out != "deleted group ledger\n" {
		t.Fatalf("group delete: %q", out)
	}
	out = cli("group", "delete", "plain", "--clean-offsets", "-o", "json")
	if out != `{"deleted":true,"group":"plain","offsetsCleaned":true}`+"\n" {
		t.Fatalf("group delete -o json: %q", out)
	}
	fails(`group "ledger" is not declared on any broker`, "group", "get", "ledger")
	fails(`group "ledger" is not declared on any broker`, "group", "delete", "ledger")
}

func TestGroupAndPopUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"group", "create"}, "needs a GROUP"},
		{[]string{"group", "create", "bad/name"}, "illegal"},
		{[]string{"group", "create", "g", "--max-delivery-attempts", "0"}, "--max-delivery-attempts must be in 1..1000"},
		{[]string{"group", "update", "g", "--retry-backoff", "1s,soon"}, "--retry-backoff"},
		{[]string{"group", "update", "g", "--retry-backoff", ""}, "--retry-backoff: give at least one duration"},
		{[]string{"group", "get"}, "needs a GROUP"},
		{[]string{"group", "delete", "a", "b"}, "needs a GROUP"},
		{[]string{"topic", "create", "t", "--type", "LOUD"}, "--type must be one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED"},
		{[]string{"consume", "--topic", "t", "--group", "g", "--pop", "--from", "last"}, "do not apply to --pop"},
		{[]string{"consume", "--topic", "t", "--group", "g", "--pop", "--broadcast"}, "do not apply to --pop"},
		{[]string{"consume", "--topic", "t", "--group", "g", "--pop", "--invisible", "13h"}, "--invisible must be in"},
		{[]string{"consume", "--topic", "t", "--group", "g", "--invisible", "1m"}, "--invisible needs --pop"},
	}
	for _, c := range cases {
		for _, extra := range [][]string{nil, {"-o", "json"}} {
			args := append(append([]string{}, c.args...), extra...)
			code, out, errb := runCLI(t, "", args...)
			checkOneLineError(t, args, code, out, errb, exitUsage, c.want)
		}
	}
}
