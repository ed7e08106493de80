package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/message"
)

// startTxnEnv starts a cluster whose brokers check transactions back
// after timeout, every interval, at most checkMax times.
func startTxnEnv(t *testing.T, brokers int, timeout, interval time.Duration, checkMax int) *env {
	t.Helper()
	return startEnvWith(t, cluster.Options{BrokerGroups: brokers, Broker: cluster.TransactionTimings(timeout, interval, checkMax)})
}

// ledger is the local side of the tests' transactions: a decision table
// shared by every producer of a group, as a database would be, keyed by
// the message body.
type ledger struct {
	mu       sync.Mutex
	outcome  map[string]LocalTransactionState // absent: undecided
	checks   map[string]int
	executed map[string]int
	// reply is what ExecuteLocalTransaction answers (default: the outcome
	// it records, see execute).
	execute func(key string) LocalTransactionState
}

func newLedger(execute func(l *ledger, key string) LocalTransactionState) *ledger {
	l := &ledger{outcome: make(map[string]LocalTransactionState), checks: make(map[string]int), executed: make(map[string]int)}
	l.execute = func(key string) LocalTransactionState { return execute(l, key) }
	return l
}

func (l *ledger) set(key string, s LocalTransactionState) {
	l.mu.Lock()
	l.outcome[key] = s
	l.mu.Unlock()
}

func (l *ledger) get(key string) (LocalTransactionState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.outcome[key]
	return s, ok
}

func (l *ledger) checked(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks[key]
}

func (l *ledger) ExecuteLocalTransaction(_ context.Context, msg *Message, _ any) LocalTransactionState {
	key := string(msg.Body)
	l.mu.Lock()
	l.executed[key]++
	l.mu.Unlock()
	return l.execute(key)
}

// CheckLocalTransaction answers from the table: undecided is Unknown.
func (l *ledger) CheckLocalTransaction(_ context.Context, msg *MessageExt) LocalTransactionState {
	key := string(msg.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks[key]++
	if s, ok := l.outcome[key]; ok {
		return s
	}
	return Unknown
}

func (e *env) txnProducer(group string, l TransactionListener, extra ...ProducerOption) *TransactionProducer {
	e.t.Helper()
	p, err := NewTransactionProducer(group, l, e.popts(extra...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	return p
}

// written is how many messages the brokers hold in topic's queues.
func (e *env) written(topic string) int64 {
	e.t.Helper()
	qs, err := e.admin.QueueStatus(context.Background(), topic)
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for _, q := range qs {
		n += q.MaxOffset - q.MinOffset
	}
	return n
}

func (e *env) txnStats() TransactionStats {
	e.t.Helper()
	st, err := e.admin.TransactionStats(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var sum TransactionStats
	for _, s := range st {
		sum.Pending += s.Pending
		sum.Checks += s.Checks
		sum.ChecksSent += s.ChecksSent
		sum.ChecksWithoutProducer += s.ChecksWithoutProducer
		sum.Commits += s.Commits
		sum.Rollbacks += s.Rollbacks
		sum.Discards += s.Discards
		sum.DuplicateEnds += s.DuplicateEnds
		sum.ConflictingEnds += s.ConflictingEnds
		sum.UnknownAnswers += s.UnknownAnswers
	}
	return sum
}

func (e *env) waitNoPending() {
	e.t.Helper()
	e.waitFor(20*time.Second, "no pending transaction", func() error {
		if st := e.txnStats(); st.Pending != 0 {
			return fmt.Errorf("%d pending", st.Pending)
		}
		return nil
	})
}

func (c *collector) deliveries(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total[id]
}

// TestTransactionCommit: a committed transaction is consumed once.
func TestTransactionCommit(t *testing.T) {
	e := startTxnEnv(t, 1, 300*time.Millisecond, 300*time.Millisecond, 15)
	topic := e.topic(4)
	col := newCollector()
	e.push("txn-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	l := newLedger(func(l *ledger, key string) LocalTransactionState { l.set(key, CommitMessage); return CommitMessage })
	p := e.txnProducer("txn-pg", l)
	res, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Tag: "t", Keys: []string{"k1"}, Body: []byte("order-1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != CommitMessage || res.EndErr != nil || res.Committed == nil || res.TransactionID == "" || res.MsgID != res.TransactionID {
		t.Fatalf("result: %+v", res)
	}
	e.waitFor(10*time.Second, "consumed", func() error {
		if n := col.deliveries(res.TransactionID); n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	col.mu.Lock()
	m := col.msgs[0]
	col.mu.Unlock()
	if m.Topic != topic || m.Tag != "t" || m.Keys[0] != "k1" || m.QueueID != res.QueueID || m.QueueOffset != res.Committed.QueueOffset {
		t.Fatalf("consumed %+v, committed at %+v", m, res.Committed)
	}
	// Longer than a timeout and a check interval: no check, nothing more.
	time.Sleep(time.Second)
	if n := col.deliveries(res.TransactionID); n != 1 || e.written(topic) != 1 || l.checked("order-1") != 0 {
		t.Fatalf("deliveries %d, written %d, checks %d", n, e.written(topic), l.checked("order-1"))
	}
	if st := e.txnStats(); st.Commits != 1 || st.Pending != 0 || st.Checks != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTransactionRollback: a rolled back transaction is never consumed.
func TestTransactionRollback(t *testing.T) {
	e := startTxnEnv(t, 1, 300*time.Millisecond, 300*time.Millisecond, 15)
	topic := e.topic(1)
	col := newCollector()
	e.push("txn-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	l := newLedger(func(l *ledger, key string) LocalTransactionState { l.set(key, RollbackMessage); return RollbackMessage })
	p := e.txnProducer("txn-pg", l)
	res, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte("order-1")}, nil)
	if err != nil || res.State != RollbackMessage || res.EndErr != nil || res.Committed != nil {
		t.Fatalf("%v %+v", err, res)
	}
	// A plain message after it, in the same (only) queue: once it is
	// consumed, the rolled back one would have been too.
	sentinel, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte("sentinel")})
	if err != nil {
		t.Fatal(err)
	}
	col.waitAll(e, 10*time.Second, []*SendResult{sentinel})
	time.Sleep(time.Second)
	if n := col.deliveries(res.TransactionID); n != 0 || e.written(topic) != 1 || col.distinct() != 1 {
		t.Fatalf("rolled back message delivered %d times; %d written", n, e.written(topic))
	}
	if st := e.txnStats(); st.Rollbacks != 1 || st.Pending != 0 || st.Checks != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTransactionCheckBackCommit: a transaction left Unknown is checked
// back (every interval while undecided) and is consumed once after the
// check says commit — never before.
func TestTransactionCheckBackCommit(t *testing.T) {
	e := startTxnEnv(t, 1, 300*time.Millisecond, 300*time.Millisecond, 50)
	topic := e.topic(4)
	col := newCollector()
	e.push("txn-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	l := newLedger(func(*ledger, string) LocalTransactionState { return Unknown })
	p := e.txnProducer("txn-pg", l)
	res, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte("order-1")}, nil)
	if err != nil || res.State != Unknown || res.EndErr != nil {
		t.Fatalf("%v %+v", err, res)
	}
	e.waitFor(20*time.Second, "two checks", func() error {
		if n := l.checked("order-1"); n < 2 {
			return fmt.Errorf("%d checks", n)
		}
		return nil
	})
	if n := col.deliveries(res.TransactionID); n != 0 || e.written(topic) != 0 {
		t.Fatalf("consumed %d times (written %d) before the decision", n, e.written(topic))
	}
	pend, err := e.admin.PendingTransactions(context.Background(), TransactionQuery{Group: "txn-pg"})
	if err != nil || len(pend) != 1 || pend[0].TransactionID != res.TransactionID || pend[0].CheckTimes < 2 || pend[0].Queue.Topic != topic {
		t.Fatalf("pending: %v %+v", err, pend)
	}
	l.set("order-1", CommitMessage)
	e.waitFor(20*time.Second, "consumed", func() error {
		if n := col.deliveries(res.TransactionID); n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	e.waitNoPending()
	checks := l.checked("order-1")
	time.Sleep(time.Second)
	if n := col.deliveries(res.TransactionID); n != 1 || e.written(topic) != 1 || l.checked("order-1") != checks {
		t.Fatalf("deliveries %d, written %d, checks %d then %d", n, e.written(topic), checks, l.checked("order-1"))
	}
}

// TestTransactionCheckBackRollback: Unknown, then a check says rollback:
// never consumed.
func TestTransactionCheckBackRollback(t *testing.T) {
	e := startTxnEnv(t, 1, 300*time.Millisecond, 300*time.Millisecond, 50)
	topic := e.topic(1)
	col := newCollector()
	e.push("txn-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	l := newLedger(func(*ledger, string) LocalTransactionState { return Unknown })
	p := e.txnProducer("txn-pg", l)
	res, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte("order-1")}, nil)
	if err != nil || res.State != Unknown {
		t.Fatalf("%v %+v", err, res)
	}
	e.waitFor(20*time.Second, "a check", func() error {
		if n := l.checked("order-1"); n < 1 {
			return fmt.Errorf("%d checks", n)
		}
		return nil
	})
	l.set("order-1", RollbackMessage)
	e.waitNoPending()
	sentinel, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte("sentinel")})
	if err != nil {
		t.Fatal(err)
	}
	col.waitAll(e, 10*time.Second, []*SendResult{sentinel})
	time.Sleep(time.Second)
	if n := col.deliveries(res.TransactionID); n != 0 || e.written(topic) != 1 {
		t.Fatalf("rolled back message delivered %d times; %d written", n, e.written(topic))
	}
	if st := e.txnStats(); st.Rollbacks != 1 || st.Checks < 1 || st.ChecksSent < 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTransactionNoLiveProducerDiscarded: the producer is gone; the checks
// find no live producer, are retried every interval and counted, and after
// the maximum the half message is discarded — listed by the admin RPC,
// never consumed.
func TestTransactionNoLiveProducerDiscarded(t *testing.T) {
	e := startTxnEnv(t, 1, 200*time.Millisecond, 200*time.Millisecond, 3)
	topic := e.topic(2)
	col := newCollector()
	e.push("txn-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	l := newLedger(func(*ledger, string) LocalTransactionState { return Unknown })
	p := e.txnProducer("txn-gone", l)
	res, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Keys: []string{"lost-1"}, Body: []byte("order-1")}, nil)
	if err != nil || res.State != Unknown {
		t.Fatalf("%v %+v", err, res)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var list []DiscardedTransaction
	e.waitFor(20*time.Second, "discarded", func() error {
		var err error
		list, err = e.admin.DiscardedTransactions(context.Background(), TransactionQuery{})
		if err != nil {
			return err
		}
		if len(list) != 1 {
			return fmt.Errorf("%d discarded", len(list))
		}
		return nil
	})
	d := list[0]
	if d.TransactionID != res.TransactionID || d.Group != "txn-gone" || d.CheckTimes != 3 || d.Queue.Topic != topic ||
		d.Queue.QueueID != res.QueueID || string(d.Message.Body) != "order-1" || d.Message.Keys[0] != "lost-1" || d.DiscardedAt.IsZero() {
		t.Fatalf("discarded %+v (message %+v)", d, d.Message)
	}
	// The discarded copy is listed a moment before the service counts it.
	e.waitFor(10*time.Second, "the discard counted", func() error {
		if st := e.txnStats(); st.Checks != 3 || st.ChecksWithoutProducer != 3 || st.Discards != 1 || st.Pending != 0 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	if l.checked("order-1") != 0 || col.distinct() != 0 || e.written(topic) != 0 {
		t.Fatalf("checks %d, consumed %d, written %d", l.checked("order-1"), col.distinct(), e.written(topic))
	}
	if list, _ := e.admin.DiscardedTransactions(context.Background(), TransactionQuery{Group: "other"}); len(list) != 0 {
		t.Fatalf("group filter: %+v", list)
	}
}

// panicky panics in ExecuteLocalTransaction and commits on check.
type panicky struct{ checks atomic.Int32 }

func (*panicky) ExecuteLocalTransaction(context.Context, *Message, any) LocalTransactionState {
	panic("local transaction blew up")
}

func (p *panicky) CheckLocalTransaction(_ context.Context, msg *MessageExt) LocalTransactionState {
	p.checks.Add(1)
	if msg.Properties[PropertyTransactionID] != msg.MsgID || msg.Properties[message.PropertyRealTopic] != msg.Topic {
		panic(fmt.Sprintf("check message %+v", msg))
	}
	return CommitMessage
}

// TestTransactionExecutePanics: a panic in ExecuteLocalTransaction is
// Unknown; the check then commits.
func TestTransactionExecutePanics(t *testing.T) {
	e := startTxnEnv(t, 1, 200*time.Millisecond, 200*time.Millisecond, 15)
	topic := e.topic(2)
	col := newCollector()
	e.push("txn-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	l := &panicky{}
	p := e.txnProducer("txn-pg", l)
	res, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte("x")}, nil)
	if err != nil || res.State != Unknown {
		t.Fatalf("%v %+v", err, res)
	}
	e.waitFor(20*time.Second, "consumed", func() error {
		if n := col.deliveries(res.TransactionID); n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	if l.checks.Load() != 1 {
		t.Fatalf("%d checks", l.checks.Load())
	}
}

// TestTransactionProducerBadInput: what SendInTransaction refuses.
func TestTransactionProducerBadInput(t *testing.T) {
	if _, err := NewTransactionProducer("pg", nil); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("nil listener: %v", err)
	}
	e := startTxnEnv(t, 1, time.Hour, time.Hour, 15)
	topic := e.topic(1)
	l := newLedger(func(*ledger, string) LocalTransactionState { return CommitMessage })
	p, err := NewTransactionProducer("txn-pg", l, e.popts()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte("x")}, nil); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("before start: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for name, m := range map[string]*Message{
		"nil":        nil,
		"empty body": {Topic: topic},
		"delayed":    {Topic: topic, Body: []byte("x"), Properties: map[string]string{message.PropertyDelayLevel: "3"}},
		"bad topic":  {Topic: "no such topic!", Body: []byte("x")},
	} {
		if _, err := p.SendInTransaction(context.Background(), m, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if len(l.executed) != 0 {
		t.Fatalf("local transactions ran: %v", l.executed)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte("x")}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// TestTransactionRandomWithProducerCrashes runs 1000 transactions with
// random outcomes — commit, rollback, unknown then check commit, unknown
// then check rollback — over two broker groups, while the producer is
// closed abruptly three times mid-way (sends, local transactions and ends
// in flight) and replaced by a new producer of the same group answering
// checks from the shared decision table. The consumed set must equal the
// committed set exactly, each message consumed once, and the brokers must
// hold exactly the committed messages.
func TestTransactionRandomWithProducerCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 transactions")
	}
	const (
		total   = 1000
		workers = 16
		group   = "txn-random"
	)
	e := startTxnEnv(t, 2, 300*time.Millisecond, 300*time.Millisecond, 100)
	topic := e.topic(4)
	col := newCollector()
	e.push("txn-random-c", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))

	// The decision table: what each local transaction did. A key a check
	// asks about before its local transaction ran (the half message is
	// still being sent) is undecided; one whose half message failed to
	// send never ran: a check rolls it back.
	type kind int
	const (
		commit kind = iota
		rollback
		unknownCommit
		unknownRollback
	)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	kinds := make([]kind, total)
	for i := range kinds {
		kinds[i] = kind(rng.IntN(4))
	}
	l := newLedger(func(l *ledger, key string) LocalTransactionState {
		var i int
		fmt.Sscanf(key, "tx-%d", &i)
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // a crash may land here
		switch kinds[i] {
		case commit:
			l.set(key, CommitMessage)
			return CommitMessage
		case rollback:
			l.set(key, RollbackMessage)
			return RollbackMessage
		case unknownCommit:
			l.set(key, CommitMessage)
		default:
			l.set(key, RollbackMessage)
		}
		return Unknown
	})
	gen := &crashable{ledger: l, dead: make(chan struct{})}
	var (
		mu       sync.Mutex
		producer = e.txnProducer(group, gen)
		failed   = make(map[string]bool) // half message not acknowledged: never ran
		endErrs  atomic.Int64
		next     atomic.Int64
		started  atomic.Int64
	)
	current := func() *TransactionProducer {
		mu.Lock()
		defer mu.Unlock()
		return producer
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				started.Add(1)
				key := fmt.Sprintf("tx-%d", i)
				res, err := current().SendInTransaction(context.Background(), &Message{Topic: topic, Body: []byte(key)}, nil)
				if err != nil {
					// The local transaction did not run; a stored half
					// message is rolled back by a check.
					l.mu.Lock()
					if _, ran := l.outcome[key]; !ran {
						l.outcome[key] = RollbackMessage
					}
					l.mu.Unlock()
					mu.Lock()
					failed[key] = true
					mu.Unlock()
					continue
				}
				if res.EndErr != nil {
					endErrs.Add(1)
				}
			}
		}()
	}
	// Crash the producer three times mid-way: local transactions that
	// finish from now on hang until it is closed (as if the process died
	// before telling the broker), sends and ends in flight fail; a new
	// producer of the group takes over.
	var parked int32
	for _, at := range []int64{250, 500, 750} {
		e.waitFor(60*time.Second, fmt.Sprintf("%d transactions started", at), func() error {
			if n := started.Load(); n < at {
				return fmt.Errorf("%d started", n)
			}
			return nil
		})
		old, oldGen := current(), gen
		oldGen.crashing.Store(true)
		_ = cluster.Poll(5*time.Second, func() error {
			if oldGen.parked.Load() < workers/2 {
				return errors.New("not yet")
			}
			return nil
		})
		gen = &crashable{ledger: l, dead: make(chan struct{})}
		mu.Lock()
		producer = e.txnProducer(group, gen)
		mu.Unlock()
		_ = old.Close()
		parked += oldGen.parked.Load()
		close(oldGen.dead)
	}
	wg.Wait()
	// Every transaction gets its outcome, from its end or a check.
	e.waitFor(60*time.Second, "every transaction ended", func() error {
		if st := e.txnStats(); st.Pending != 0 {
			return fmt.Errorf("%d pending", st.Pending)
		}
		return nil
	})
	committed := make(map[string]bool)
	l.mu.Lock()
	for k, s := range l.outcome {
		if s == CommitMessage {
			committed[k] = true
		}
	}
	l.mu.Unlock()
	consumed := func() (map[string]int, int) {
		col.mu.Lock()
		defer col.mu.Unlock()
		out := make(map[string]int)
		dups := 0
		for _, m := range col.msgs {
			out[string(m.Body)]++
			if out[string(m.Body)] > 1 {
				dups++
			}
		}
		return out, dups
	}
	diff := func() error {
		got, dups := consumed()
		var missing, extra []string
		for k := range committed {
			if got[k] == 0 {
				missing = append(missing, k)
			}
		}
		for k := range got {
			if !committed[k] {
				extra = append(extra, k)
			}
		}
		if len(missing) > 0 || len(extra) > 0 || dups > 0 {
			return fmt.Errorf("%d committed not consumed %v, %d consumed not committed %v, %d duplicates",
				len(missing), head(missing), len(extra), head(extra), dups)
		}
		return nil
	}
	e.waitFor(60*time.Second, "consumed set == committed set", diff)
	time.Sleep(time.Second) // nothing else arrives
	if err := diff(); err != nil {
		t.Fatal(err)
	}
	if n := e.written(topic); n != int64(len(committed)) {
		t.Fatalf("brokers hold %d messages, %d committed", n, len(committed))
	}
	st := e.txnStats()
	var byKind [4]int
	for _, k := range kinds {
		byKind[k]++
	}
	mu.Lock()
	nFailed := len(failed)
	mu.Unlock()
	t.Logf("%d transactions (commit %d, rollback %d, unknown→commit %d, unknown→rollback %d); %d committed; "+
		"%d local transactions hung at crashes, %d half sends failed, %d ends failed; broker: %d commits, %d rollbacks, %d checks (%d sent), %d duplicate ends, %d conflicts",
		total, byKind[commit], byKind[rollback], byKind[unknownCommit], byKind[unknownRollback], len(committed),
		parked, nFailed, endErrs.Load(), st.Commits, st.Rollbacks, st.Checks, st.ChecksSent, st.DuplicateEnds, st.ConflictingEnds)
	if st.Commits != int64(len(committed)) || st.ConflictingEnds != 0 {
		t.Fatalf("broker stats %+v for %d committed", st, len(committed))
	}
}

// crashable is one producer's listener over the shared ledger: once
// crashing, a local transaction that finishes hangs until the producer is
// dead, then answers (too late: its end fails).
type crashable struct {
	*ledger
	crashing atomic.Bool
	parked   atomic.Int32
	dead     chan struct{}
}

func (c *crashable) ExecuteLocalTransaction(ctx context.Context, msg *Message, arg any) LocalTransactionState {
	s := c.ledger.ExecuteLocalTransaction(ctx, msg, arg)
	if c.crashing.Load() {
		c.parked.Add(1)
		<-c.dead
	}
	return s
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}
