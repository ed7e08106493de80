package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/freeport"
)

// killLedger is the producer's local transaction table for the kill test.
type killLedger struct {
	mu      sync.Mutex
	outcome map[string]client.LocalTransactionState
	checks  map[string]int
	// hold, when set for a key, makes ExecuteLocalTransaction record the
	// outcome, report on started and wait for release before answering.
	hold    map[string]bool
	started chan string
	release chan struct{}
}

func (l *killLedger) ExecuteLocalTransaction(_ context.Context, msg *client.Message, arg any) client.LocalTransactionState {
	key := string(msg.Body)
	st := arg.(client.LocalTransactionState)
	l.mu.Lock()
	if st != client.Unknown {
		l.outcome[key] = st
	}
	hold := l.hold[key]
	l.mu.Unlock()
	if hold {
		l.started <- key
		<-l.release
	}
	return st
}

func (l *killLedger) CheckLocalTransaction(_ context.Context, msg *client.MessageExt) client.LocalTransactionState {
	key := string(msg.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks[key]++
	if s, ok := l.outcome[key]; ok {
		return s
	}
	return client.Unknown
}

func (l *killLedger) checked(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks[key]
}

// freePort returns a free port whose successor is free too (a broker
// derives its replication port from its listen port + 1).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Pick(1)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestTransactionKillBrokerBetweenHalfAndCommit kills a broker (a real
// process, SIGKILL, sync flush) after half messages were acknowledged and
// their local transactions decided, before the producer could end them.
// After the restart the broker finds them pending and checks them back:
// the committed one is delivered once, the rolled back one never; one
// committed before the kill is not committed again; an undecided one keeps
// its check count across the restart and is delivered once decided.
func TestTransactionKillBrokerBetweenHalfAndCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ns := StartProc(t, "bolide-nameserver", "--listen", "127.0.0.1:0", "--gossip", "off")
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	br := StartProc(t, "bolide-broker", "--listen", addr, "--namesrv", ns.Addr, "--broker-name", "broker-a",
		"--store-dir", t.TempDir(), "--segment-size", strconv.Itoa(64<<20), "--flush", "sync",
		"--register-interval", "1s", "--gossip", "off",
		"--transaction-timeout", "500ms", "--transaction-check-interval", "500ms", "--transaction-check-max", "1000")
	createTopicOn(t, br.Addr, "txkill", 2)
	if err := Poll(10*time.Second, func() error {
		if n := len(routedTo(t, ns.Addr, "txkill")); n != 1 {
			return fmt.Errorf("routed to %d brokers", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shared := client.WithOptions(client.WithNameServers(ns.Addr), client.WithRouteRefreshInterval(300*time.Millisecond),
		client.WithHeartbeatInterval(300*time.Millisecond))
	admin, err := client.NewAdmin(shared)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	l := &killLedger{outcome: make(map[string]client.LocalTransactionState), checks: make(map[string]int),
		hold: map[string]bool{"B": true, "C": true}, started: make(chan string, 2), release: make(chan struct{})}
	p, err := client.NewTransactionProducer("kill-pg", l, shared, client.WithSendTimeout(2*time.Second), client.WithSendRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	send := func(key string, st client.LocalTransactionState) *client.TransactionSendResult {
		res, err := p.SendInTransaction(ctx, &client.Message{Topic: "txkill", Body: []byte(key)}, st)
		if err != nil {
			t.Errorf("send %s: %v", key, err)
			return nil
		}
		return res
	}
	// A: committed before the kill.
	if res := send("A", client.CommitMessage); res == nil || res.EndErr != nil || res.Committed == nil {
		t.Fatalf("A: %+v", res)
	}
	// D: undecided; checked back a few times before the kill.
	if res := send("D", client.Unknown); res == nil || res.State != client.Unknown {
		t.Fatalf("D: %+v", res)
	}
	if err := Poll(20*time.Second, func() error {
		if n := l.checked("D"); n < 2 {
			return fmt.Errorf("D checked %d times", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pend, err := admin.PendingTransactions(ctx, client.TransactionQuery{})
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending before the kill: %v %+v", err, pend)
	}
	checksBefore := pend[0].CheckTimes
	// B and C: half messages acknowledged, local transactions decided
	// (commit, rollback), and the broker dies before it hears of them.
	results := make(chan *client.TransactionSendResult, 2)
	go func() { results <- send("B", client.CommitMessage) }()
	go func() { results <- send("C", client.RollbackMessage) }()
	for i := 0; i < 2; i++ {
		select {
		case <-l.started:
		case <-time.After(20 * time.Second):
			t.Fatal("local transactions of B and C did not start")
		}
	}
	br.Kill()
	close(l.release)
	for i := 0; i < 2; i++ {
		if res := <-results; res == nil || res.EndErr == nil {
			t.Fatalf("end reached a dead broker: %+v", res)
		}
	}
	br.Restart()

	// After the restart: D is still pending with its check count, B and
	// C are resolved by checks.
	if err := Poll(30*time.Second, func() error {
		pend, err := admin.PendingTransactions(ctx, client.TransactionQuery{})
		if err != nil {
			return err
		}
		if len(pend) != 1 || string(pend[0].TransactionID) == "" || pend[0].CheckTimes <= checksBefore {
			return fmt.Errorf("pending %+v (D had %d checks before the kill)", pend, checksBefore)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.outcome["D"] = client.CommitMessage
	l.mu.Unlock()
	if err := Poll(30*time.Second, func() error {
		pend, err := admin.PendingTransactions(ctx, client.TransactionQuery{})
		if err != nil {
			return err
		}
		if len(pend) != 0 {
			return fmt.Errorf("%d pending", len(pend))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Consume everything from the start.
	var mu sync.Mutex
	seen := make(map[string]int)
	c, err := client.NewPushConsumer("kill-audit", shared, client.WithConsumeFrom(client.ConsumeFromFirst))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe("txkill", "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		for _, m := range msgs {
			seen[string(m.Body)]++
		}
		mu.Unlock()
		return client.ConsumeSuccess
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "map[A:1 B:1 D:1]"
	if err := Poll(30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if got := fmt.Sprint(seen); got != want {
			return fmt.Errorf("consumed %s", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	mu.Lock()
	got := fmt.Sprint(seen)
	mu.Unlock()
	qs, err := admin.QueueStatus(ctx, "txkill")
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, q := range qs {
		stored += q.MaxOffset - q.MinOffset
	}
	if got != want || stored != 3 {
		t.Fatalf("consumed %s, %d stored; want %s, 3", got, stored, want)
	}
	st, err := admin.TransactionStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: %+v; checks of B %d, C %d, D %d", st[0], l.checked("B"), l.checked("C"), l.checked("D"))
}
