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
)

// undecided never decides: every local transaction stays unknown.
type undecided struct{}

func (undecided) ExecuteLocalTransaction(context.Context, *client.Message, any) client.LocalTransactionState {
	return client.Unknown
}

func (undecided) CheckLocalTransaction(context.Context, *client.MessageExt) client.LocalTransactionState {
	return client.Unknown
}

// TestTxnListShowsDiscarded: a half message nobody decides is discarded
// after the maximum number of check-backs and `bolide txn list` shows it.
func TestTxnListShowsDiscarded(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Broker: cluster.TransactionTimings(200*time.Millisecond, 200*time.Millisecond, 2)})
	c.CreateTopic("txn-cli", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	p, err := client.NewTransactionProducer("txn-cli-pg", undecided{}, client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p.SendInTransaction(ctx, &client.Message{Topic: "txn-cli", Tag: "t1", Keys: []string{"order-7"}, Body: []byte("pay 7")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var got discardedJSON
	c.WaitFor(30*time.Second, func() error {
		code, out, stderr := runCLI(t, "", "--namesrv", ns, "txn", "list", "-o", "json")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if out == "" || len(lines) != 1 {
			return fmt.Errorf("%d entries: %q", len(lines), out)
		}
		return json.Unmarshal([]byte(lines[0]), &got)
	})
	if got.TransactionID != res.TransactionID || got.Group != "txn-cli-pg" || got.Topic != "txn-cli" ||
		got.Body != "pay 7" || got.Tags != "t1" || len(got.Keys) != 1 || got.Keys[0] != "order-7" || got.CheckTimes != 2 {
		t.Fatalf("txn list: %+v (transaction %s)", got, res.TransactionID)
	}
	code, out, _ := runCLI(t, "", "--namesrv", ns, "txn", "list")
	if code != 0 || !strings.Contains(out, res.TransactionID) || !strings.Contains(out, "TRANSACTION ID") {
		t.Fatalf("table output (exit %d):\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "txn", "list", "--group", "someone-else", "-o", "json")
	if code != 0 || out != "" {
		t.Fatalf("group filter: exit %d, %q", code, out)
	}
}

// TestTxnPendingAndResolve: `bolide txn pending` lists transactions a
// producer left undecided; `txn commit` and `txn rollback` decide them
// by the BROKER and OFFSET it prints; deciding again the other way fails.
func TestTxnPendingAndResolve(t *testing.T) {
	// Checked often, discarded only after 1000 checks: they stay pending.
	c := cluster.Start(t, cluster.Options{Broker: cluster.TransactionTimings(200*time.Millisecond, 200*time.Millisecond, 1000)})
	c.CreateTopic("txn-ops", 1)
	ns := strings.Join(c.NameServerAddrs(), ",")
	p, err := client.NewTransactionProducer("txn-ops-pg", undecided{}, client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ids []string
	for _, body := range []string{"pay 1", "pay 2"} {
		res, err := p.SendInTransaction(ctx, &client.Message{Topic: "txn-ops", Body: []byte(body)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.TransactionID)
	}
	pending := func() []pendingJSON {
		t.Helper()
		code, out, stderr := runCLI(t, "", "--namesrv", ns, "txn", "pending", "--group", "txn-ops-pg", "-o", "json")
		if code != 0 {
			t.Fatalf("txn pending: exit %d: %s", code, stderr)
		}
		t.Logf("$ bolide txn pending --group txn-ops-pg -o json\n%s", out)
		var list []pendingJSON
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" {
				continue
			}
			var j pendingJSON
			if err := json.Unmarshal([]byte(l), &j); err != nil {
				t.Fatal(err)
			}
			list = append(list, j)
		}
		return list
	}
	var list []pendingJSON
	c.WaitFor(20*time.Second, func() error {
		if list = pending(); len(list) != 2 {
			return fmt.Errorf("pending: %+v", list)
		}
		return nil
	})
	for i, j := range list {
		if j.TransactionID != ids[i] || j.Broker != "broker-a" || j.Topic != "txn-ops" || j.Group != "txn-ops-pg" ||
			j.BornTimestamp == "" || j.NextCheck == "" {
			t.Fatalf("pending %d: %+v (ids %v)", i, j, ids)
		}
	}
	code, out, _ := runCLI(t, "", "--namesrv", ns, "txn", "pending")
	t.Logf("$ bolide txn pending\n%s", out)
	if code != 0 || !strings.HasPrefix(out, "BROKER") || !strings.Contains(out, ids[0]) || !strings.Contains(out, "NEXT CHECK") {
		t.Fatalf("table (exit %d):\n%s", code, out)
	}

	code, out, _ = runCLI(t, "", "--namesrv", ns, "txn", "stats", "-o", "json")
	t.Logf("$ bolide txn stats -o json\n%s", out)
	var sj txnStatsJSON
	if code != 0 || json.Unmarshal([]byte(out), &sj) != nil || sj.Broker != "broker-a" || sj.Pending != 2 || sj.Commits != 0 {
		t.Fatalf("txn stats -o json: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "txn", "stats")
	t.Logf("$ bolide txn stats\n%s", out)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "BROKER") ||
		!strings.HasPrefix(lines[1], "broker-a") || strings.Fields(lines[1])[1] != "2" {
		t.Fatalf("txn stats: exit %d:\n%s", code, out)
	}

	off := func(j pendingJSON) string { return fmt.Sprint(j.Offset) }
	args := []string{"txn", "commit", "--broker", "broker-a", "--offset", off(list[0])}
	code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	t.Logf("$ bolide %s\n%s%s", strings.Join(args, " "), out, stderr)
	if want := fmt.Sprintf("committed transaction %s (topic txn-ops, producer group txn-ops-pg, broker-a offset %d)\n", ids[0], list[0].Offset); code != 0 || out != want {
		t.Fatalf("txn commit: exit %d, %q (stderr %q), want %q", code, out, stderr, want)
	}
	args = []string{"txn", "rollback", "--broker", "broker-a", "--offset", off(list[1]), "-o", "json"}
	code, out, stderr = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	t.Logf("$ bolide %s\n%s%s", strings.Join(args, " "), out, stderr)
	var rj resolvedJSON
	if code != 0 || json.Unmarshal([]byte(out), &rj) != nil || rj.Outcome != "rollback" || rj.TransactionID != ids[1] || rj.Offset != list[1].Offset {
		t.Fatalf("txn rollback: exit %d, %q (stderr %q)", code, out, stderr)
	}
	// The commit reached the topic; the rollback did not.
	adm, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	// The consume queue is built asynchronously, a moment after the commit.
	var st []client.QueueStatus
	c.WaitFor(20*time.Second, func() error {
		var err error
		st, err = adm.QueueStatus(ctx, "txn-ops")
		if err != nil || len(st) != 1 || st[0].MaxOffset != 1 {
			return fmt.Errorf("txn-ops after a commit and a rollback: %+v, %v", st, err)
		}
		return nil
	})
	m, err := adm.ViewMessageAt(ctx, st[0].Queue, 0)
	if err != nil || string(m.Body) != "pay 1" {
		t.Fatalf("the committed message: %+v, %v", m, err)
	}
	c.WaitFor(20*time.Second, func() error {
		if list := pending(); len(list) != 0 {
			return fmt.Errorf("still pending: %+v", list)
		}
		return nil
	})
	code, out, _ = runCLI(t, "", "--namesrv", ns, "txn", "stats", "-o", "json")
	t.Logf("$ bolide txn stats -o json\n%s", out)
	if code != 0 || json.Unmarshal([]byte(out), &sj) != nil || sj.Pending != 0 || sj.Commits != 1 || sj.Rollbacks != 1 {
		t.Fatalf("txn stats after a commit and a rollback: exit %d, %q", code, out)
	}

	// Again the same way: no error; the other way: a conflict; an offset
	// that holds no half message: not found; flags missing: usage.
	code, _, stderr = runCLI(t, "", "--namesrv", ns, "txn", "commit", "--broker", "broker-a", "--offset", off(list[0]))
	if code != 0 {
		t.Fatalf("a second commit: exit %d, %s", code, stderr)
	}
	args = []string{"txn", "rollback", "--broker", "broker-a", "--offset", off(list[0])}
	code, out, stderr = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	t.Logf("$ bolide %s\n%s", strings.Join(args, " "), stderr)
	checkOneLineError(t, args, code, out, stderr, exitFailed, "TRANSACTION_STATE_CONFLICT")
	args = []string{"txn", "commit", "--broker", "broker-a", "--offset", fmt.Sprint(m.CommitLogOffset)}
	code, out, stderr = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	t.Logf("$ bolide %s\n%s", strings.Join(args, " "), stderr)
	checkOneLineError(t, args, code, out, stderr, exitFailed, "is not a half message")
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "txn", "commit", "--offset", "0")
	checkOneLineError(t, []string{"txn", "commit", "--offset", "0"}, code, out, stderr, exitUsage, "--broker and --offset are required")
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "txn", "rollback", "--broker", "broker-z", "--offset", "0")
	checkOneLineError(t, []string{"txn", "rollback", "--broker", "broker-z"}, code, out, stderr, exitFailed, `broker "broker-z" is not registered`)
}
