package rocketmqv5

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// The producer tests check what was stored with Bolide's SDK (a push
// consumer from the first offset), so they need nothing of the v5
// consumption side.

// TestProducerSync: synchronous sends come back with the client's message
// id, and the stored messages carry it (UNIQ_KEY) with the tag, keys and
// properties; with two broker groups both get messages.
func TestProducerSync(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "sync", "", 4)
		p := newProducer(t, c, rmq.WithTopics(topic))
		col := startSDKConsumer(t, c, topic)
		var msgs []v5msg
		for i := range 20 {
			msgs = append(msgs, testMsg(topic, i, "tagA"))
		}
		ids := sendAll(t, p, msgs)
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("message id %s returned twice", id)
			}
			seen[id] = true
		}
		col.waitIDs(t, ids, 30*time.Second)
		brokers := map[string]bool{}
		for i, id := range ids {
			ds := col.get(id)
			checkSDK(t, id, msgs[i], ds[0].msg)
			if len(ds) != 1 {
				t.Errorf("%s consumed %d times", id, len(ds))
			}
			brokers[ds[0].msg.BrokerName] = true
		}
		if len(brokers) != len(c.Brokers) {
			t.Errorf("messages stored on %v, want all %d broker groups", brokers, len(c.Brokers))
		}
	})
}

// TestProducerAsync: asynchronous sends all complete with distinct ids,
// and every message is stored once.
func TestProducerAsync(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "async", "", 4)
		p := newProducer(t, c, rmq.WithTopics(topic))
		col := startSDKConsumer(t, c, topic)
		const n = 50
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			ids  = map[string]int{}
			errs []error
		)
		for i := range n {
			wg.Add(1)
			p.SendAsync(context.Background(), testMsg(topic, i, "async").build(), func(_ context.Context, r []*rmq.SendReceipt, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				ids[r[0].MessageID] = i
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d async sends failed, first: %v", len(errs), errs[0])
		}
		if len(ids) != n {
			t.Fatalf("%d distinct message ids for %d sends", len(ids), n)
		}
		var all []string
		for id := range ids {
			all = append(all, id)
		}
		col.waitIDs(t, all, 30*time.Second)
		for id, i := range ids {
			checkSDK(t, id, testMsg(topic, i, "async"), col.get(id)[0].msg)
		}
	})
}

// TestProducerFIFO: messages of one message group go to one queue, in the
// order sent, with the group as sharding key; several groups spread.
func TestProducerFIFO(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "fifo", "FIFO", 4)
		p := newProducer(t, c, rmq.WithTopics(topic))
		col := startSDKConsumer(t, c, topic)
		groups := []string{"g-alpha", "g-beta", "g-gamma", "g-delta", "g-eps", "g-zeta"}
		var (
			msgs []v5msg
			ids  []string
		)
		for i := range 10 {
			for _, g := range groups {
				m := testMsg(topic, len(msgs), "fifo")
				m.group = g
				m.props["seq"] = fmt.Sprint(i)
				msgs = append(msgs, m)
			}
		}
		ids = sendAll(t, p, msgs)
		col.waitIDs(t, ids, 30*time.Second)
		type pos struct {
			queue  string
			offset int64
		}
		last := map[string]pos{}
		queues := map[string]bool{}
		for i, id := range ids {
			m := col.get(id)[0].msg
			checkSDK(t, id, msgs[i], m)
			q := fmt.Sprintf("%s/%d", m.BrokerName, m.QueueID)
			g := msgs[i].group
			if prev, ok := last[g]; ok {
				if prev.queue != q {
					t.Errorf("group %s: message %s in %s, earlier ones in %s", g, id, q, prev.queue)
				} else if m.QueueOffset <= prev.offset {
					t.Errorf("group %s: message %s at offset %d, not after the previous one's %d", g, id, m.QueueOffset, prev.offset)
				}
			}
			last[g] = pos{q, m.QueueOffset}
			queues[q] = true
		}
		if len(queues) < 2 {
			t.Errorf("%d message groups all in %v", len(groups), queues)
		}
	})
}

// TestProducerDelay: a message with a delivery timestamp is not consumed
// before it.
func TestProducerDelay(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "delay", "DELAY", 2)
		p := newProducer(t, c, rmq.WithTopics(topic))
		col := startSDKConsumer(t, c, topic)
		// A message due at once first (a DELAY topic takes only delayed
		// messages): the SDK consumer is consuming.
		warmMsg := testMsg(topic, 0, "warm").build()
		warmMsg.SetDelayTimestamp(time.Now())
		wr, err := p.Send(context.Background(), warmMsg)
		if err != nil {
			t.Fatalf("send a message due now: %v", err)
		}
		col.waitIDs(t, []string{wr[0].MessageID}, 30*time.Second)
		m := testMsg(topic, 1, "timer")
		msg := m.build()
		at := time.Now().Add(3 * time.Second)
		msg.SetDelayTimestamp(at)
		r, err := p.Send(context.Background(), msg)
		if err != nil {
			t.Fatalf("send a delayed message: %v", err)
		}
		id := r[0].MessageID
		col.waitIDs(t, []string{id}, 30*time.Second)
		d := col.get(id)[0]
		checkSDK(t, id, m, d.msg)
		t.Logf("delivery timestamp %s: consumed %v after it", at.Format(time.RFC3339Nano), d.at.Sub(at))
		if d.at.Before(at.Truncate(time.Millisecond)) {
			t.Errorf("consumed at %v, before its delivery timestamp %v", d.at, at)
		}
	})
}

// TestProducerTransaction: a committed transactional message is consumed,
// a rolled-back one never; the two left open are resolved through the
// broker's check-back, which reaches the producer as
// RecoverOrphanedTransactionCommand on its Telemetry stream and is answered
// by its TransactionChecker.
func TestProducerTransaction(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "txn", "TRANSACTION", 2)
		var (
			mu      sync.Mutex
			checked = map[string]int{}
		)
		checker := &rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
			mu.Lock()
			checked[string(mv.GetBody())]++
			mu.Unlock()
			if strings.HasPrefix(string(mv.GetBody()), "check-commit") {
				return rmq.COMMIT
			}
			return rmq.ROLLBACK
		}}
		p := newProducer(t, c, rmq.WithTopics(topic), rmq.WithTransactionChecker(checker))
		needRPCs(t, c, "EndTransaction")
		col := startSDKConsumer(t, c, topic)
		send := func(body string) (string, rmq.Transaction) {
			t.Helper()
			m := testMsg(topic, 0, "txn")
			m.body = body
			tx := p.BeginTransaction()
			r, err := p.SendWithTransaction(context.Background(), m.build(), tx)
			if err != nil {
				t.Fatalf("send %s: %v", body, err)
			}
			return r[0].MessageID, tx
		}
		commitID, tx := send("commit")
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		rollbackID, tx := send("rollback")
		if err := tx.RollBack(); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		checkCommitID, _ := send("check-commit")
		checkRollbackID, _ := send("check-rollback")
		col.waitIDs(t, []string{commitID, checkCommitID}, 60*time.Second)
		if !waitFor(60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return checked["check-commit"] > 0 && checked["check-rollback"] > 0
		}) {
			t.Fatalf("the checker was not asked about both open transactions: %v", checked)
		}
		// The rollback answer came back; one more check interval for a
		// wrongly committed message to show up.
		time.Sleep(txnCheckInterval + time.Second)
		for _, id := range []string{rollbackID, checkRollbackID} {
			if ds := col.get(id); len(ds) > 0 {
				t.Errorf("rolled-back message %s (%s) consumed", id, ds[0].msg.Body)
			}
		}
		for _, id := range []string{commitID, checkCommitID} {
			if n := len(col.get(id)); n != 1 {
				t.Errorf("committed message %s consumed %d times", id, n)
			}
		}
		mu.Lock()
		t.Logf("check-backs: %v", checked)
		if checked["commit"]+checked["rollback"] > 0 {
			t.Errorf("the checker was asked about a transaction already ended: %v", checked)
		}
		mu.Unlock()
	})
}

// TestTopicMessageTypes: a topic's message type is enforced: a FIFO topic
// takes no normal message, a normal topic no FIFO message, and each takes
// its own.
func TestTopicMessageTypes(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		fifo := newTopic(t, c, "typed-fifo", "FIFO", 2)
		normal := newTopic(t, c, "typed-normal", "NORMAL", 2)
		p := newProducer(t, c, rmq.WithTopics(fifo, normal), rmq.WithMaxAttempts(1))
		grouped := func(topic string) *rmq.Message {
			m := testMsg(topic, 0, "t").build()
			m.SetMessageGroup("g")
			return m
		}
		for _, tc := range []struct {
			name string
			msg  *rmq.Message
			ok   bool
		}{
			{"FIFO to FIFO", grouped(fifo), true},
			{"normal to NORMAL", testMsg(normal, 0, "t").build(), true},
			{"normal to FIFO", testMsg(fifo, 0, "t").build(), false},
			{"FIFO to NORMAL", grouped(normal), false},
		} {
			_, err := p.Send(context.Background(), tc.msg)
			if tc.ok && err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			if !tc.ok && err == nil {
				t.Errorf("%s: sent, want a refusal", tc.name)
			}
			if !tc.ok && err != nil {
				t.Logf("%s: %v", tc.name, err)
			}
		}
	})
}
