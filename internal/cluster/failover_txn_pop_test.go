package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// The master is killed while a half message awaits its check-back and
// others were committed and rolled back: the new master checks the
// pending one back (its outcome decided later is delivered once), never
// checks back an ended one, and the old master, restarted as a slave,
// checks nothing back while the new master does.
func TestControllerFailoverTransactions(t *testing.T) {
	r := startCtlRig(t, 3, broker.ReplicationSync, func(o *broker.Options) {
		o.Transaction.Timeout = 500 * time.Millisecond
		o.Transaction.CheckInterval = 300 * time.Millisecond
	})
	m := r.master(0)
	r.waitSSS(m, 3)
	r.sendN(m, 2, "init")
	epoch := r.broker(m).Epoch()
	ctx := context.Background()
	shared := client.WithOptions(client.WithNameServers(r.ns.Addr()), client.WithRouteRefreshInterval(300*time.Millisecond),
		client.WithHeartbeatInterval(300*time.Millisecond))
	l := &killLedger{outcome: make(map[string]client.LocalTransactionState), checks: make(map[string]int)}
	p, err := client.NewTransactionProducer("svc-tx", l, shared, client.WithSendTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	send := func(key string, st client.LocalTransactionState) {
		t.Helper()
		if err := Poll(30*time.Second, func() error {
			res, err := p.SendInTransaction(ctx, &client.Message{Topic: ctlTopic, Body: []byte(key)}, st)
			if err != nil {
				return err
			}
			if st != client.Unknown && res.EndErr != nil {
				return res.EndErr
			}
			return nil
		}); err != nil {
			t.Fatalf("send %s: %v", key, err)
		}
	}
	send("tx-committed", client.CommitMessage)
	send("tx-rolledback", client.RollbackMessage)
	send("tx-pending", client.Unknown)
	if err := Poll(20*time.Second, func() error {
		if n := l.checked("tx-pending"); n < 1 {
			return errors.New("tx-pending not checked back yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	caughtUpAll(t, r, m)
	r.kill(m)
	atKill := l.checked("tx-pending")
	n := r.master(epoch)
	if err := Poll(20*time.Second, func() error {
		if l.checked("tx-pending") <= atKill {
			return errors.New("the new master did not check tx-pending back")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The old master returns as a slave; a transaction left pending after
	// that is checked back by the new master only.
	old := r.start(m)
	r.waitSSS(n, 3)
	if old.Role() != broker.RoleSlave {
		t.Fatalf("the old master restarted as %s", old.Role())
	}
	send("tx-later", client.Unknown)
	if err := Poll(20*time.Second, func() error {
		if c := l.checked("tx-later"); c < 2 {
			return fmt.Errorf("tx-later checked %d times", c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st := old.Transactions().Stats(); st.ChecksSent != 0 || st.Checks != 0 {
		t.Fatalf("the old master checked back as a slave: %+v", st)
	}
	l.mu.Lock()
	l.outcome["tx-pending"] = client.CommitMessage
	l.outcome["tx-later"] = client.CommitMessage
	l.mu.Unlock()
	if err := Poll(20*time.Second, func() error {
		if st := r.broker(n).Transactions().Stats(); st.Pending != 0 {
			return fmt.Errorf("%d pending on the new master", st.Pending)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if c, rb := l.checked("tx-committed"), l.checked("tx-rolledback"); c != 0 || rb != 0 {
		t.Errorf("ended transactions checked back: committed %d times, rolled back %d times", c, rb)
	}
	bc := brokerClient(t, r.broker(n).Addr())
	if err := Poll(20*time.Second, func() error {
		stored := map[string]int{}
		for q := int32(0); q < 2; q++ {
			for _, m := range dpPullAll(t, bc, ctlTopic, q) {
				if strings.HasPrefix(string(m.Body), "tx-") {
					stored[string(m.Body)]++
				}
			}
		}
		if got, want := fmt.Sprint(stored), "map[tx-committed:1 tx-later:1 tx-pending:1]"; got != want {
			return fmt.Errorf("the topic holds %s, want %s", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, r.broker(n), old)
	sameCommitLog(t, r.broker(n), old)
	t.Logf("tx-pending checked %d times before the kill, %d in all; new master's stats %+v",
		atKill, l.checked("tx-pending"), r.broker(n).Transactions().Stats())
}

// The master is killed while POP consumers hold invisible messages and
// acknowledged the others: the new master hands out no acknowledged
// message again, takes the acks of held ones with the old master's
// handles, hands out again (once) the ones the consumer nacked, and the old master, restarted as a slave, serves no POP.
func TestControllerFailoverPop(t *testing.T) {
	const total = 60
	r := startCtlRig(t, 3, broker.ReplicationSync, nil)
	m := r.master(0)
	r.waitSSS(m, 3)
	r.sendN(m, total, "pop")
	epoch := r.broker(m).Epoch()
	ctx := context.Background()
	mb := r.broker(m)
	acked := map[string]int{}
	longHeld := map[string]string{} // handle → body
	shortHeld := map[string]bool{}
	for handed := 0; handed < total; {
		// Every 10th message is held for an hour, every 10th+5 nacked
		// (visible again after its backoff), the others acknowledged.
		got, err := mb.Pop(ctx, broker.PopRequest{Group: "svc-pop", Topic: ctlTopic, QueueID: -1, MaxMessages: 8,
			Invisible: time.Hour, PollTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("nothing to pop after %d of %d", handed, total)
		}
		for _, p := range got {
			handed++
			msg, err := message.Decode(p.Record)
			if err != nil {
				t.Fatal(err)
			}
			b := string(msg.Body)
			switch handed % 10 {
			case 0:
				longHeld[p.Handle] = b
			case 5:
				if _, err := mb.PopNack(ctx, "svc-pop", ctlTopic, p.Handle); err != nil {
					t.Fatal(err)
				}
				shortHeld[b] = true
			default:
				if err := mb.PopAck(ctx, "svc-pop", ctlTopic, p.Handle); err != nil {
					t.Fatal(err)
				}
				acked[b]++
			}
		}
	}
	caughtUpAll(t, r, m)
	r.kill(m)
	n := r.master(epoch)
	nb := r.broker(n)
	for h, b := range longHeld {
		if err := Poll(10*time.Second, func() error { return nb.PopAck(ctx, "svc-pop", ctlTopic, h) }); err != nil {
			t.Fatalf("ack of %s with the old master's handle: %v", b, err)
		}
		acked[b]++
	}
	// The nacked ones come back (once each); nothing acknowledged does.
	back := map[string]int{}
	if err := Poll(30*time.Second, func() error {
		got, err := nb.Pop(ctx, broker.PopRequest{Group: "svc-pop", Topic: ctlTopic, QueueID: -1, MaxMessages: 16,
			Invisible: time.Hour, PollTimeout: 500 * time.Millisecond})
		if err != nil {
			return err
		}
		for _, p := range got {
			msg, err := message.Decode(p.Record)
			if err != nil {
				return err
			}
			b := string(msg.Body)
			back[b]++
			if err := nb.PopAck(ctx, "svc-pop", ctlTopic, p.Handle); err != nil {
				return err
			}
		}
		if len(back) < len(shortHeld) {
			return fmt.Errorf("%d of %d nacked messages back", len(back), len(shortHeld))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for b, c := range back {
		if !shortHeld[b] || c != 1 {
			t.Errorf("%s handed out %d times by the new master (nacked before the kill: %v)", b, c, shortHeld[b])
		}
		acked[b]++
	}
	// Each message acknowledged once.
	if len(acked) != total {
		t.Errorf("%d messages acknowledged, want %d", len(acked), total)
	}
	for b, c := range acked {
		if c != 1 {
			t.Errorf("%s acknowledged %d times", b, c)
		}
	}

	old := r.start(m)
	r.waitSSS(n, 3)
	if old.Role() != broker.RoleSlave {
		t.Fatalf("the old master restarted as %s", old.Role())
	}
	_, err := old.Pop(ctx, broker.PopRequest{Group: "svc-pop", Topic: ctlTopic, QueueID: -1, MaxMessages: 8, Invisible: time.Hour})
	if errcode.Of(err) != errcode.NotMaster {
		t.Errorf("POP on the old master as a slave: %v", err)
	}
	caughtUp(t, nb, old)
	sameCommitLog(t, nb, old)
}
