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
