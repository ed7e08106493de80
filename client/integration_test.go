package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRouteDiscovery(t *testing.T) {
	e := startEnv(t, 2, 2)
	topic := e.topic(4)
	ctx := context.Background()

	r, err := e.admin.Route(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Queues) != 2 || len(r.Brokers) != 2 {
		t.Fatalf("route has %d queue datas and %d brokers, want 2 and 2", len(r.Queues), len(r.Brokers))
	}
	for i, b := range r.Brokers {
		if want := e.c.Broker(i).Addr(); b.MasterAddr() != want || r.Queues[i].WriteQueues != 4 {
			t.Fatalf("broker %d: %+v, want master %s with 4 queues", i, b, want)
		}
	}
	if _, err := e.admin.Route(ctx, "no-such-topic"); !errors.Is(err, ErrNoRoute) || !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("route of a missing topic: %v", err)
	}

	// A dead NameServer first in the list: calls move on to the next.
	p, err := NewProducer("pg", e.popts(WithNameServers(append([]string{"127.0.0.1:1"}, e.ns...)...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("x")})
	if err != nil {
		t.Fatalf("send with a dead first NameServer: %v", err)
	}
	if res.BrokerName != "broker-a" && res.BrokerName != "broker-b" {
		t.Fatalf("result %+v", res)
	}
	if _, err := p.Send(ctx, &Message{Topic: "no-such-topic", Body: []byte("x")}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("send to a missing topic: %v", err)
	}

	// A topic created later is found; a route change (more queues) is seen
	// after the refresh interval.
	if err := e.admin.UpdateTopic(ctx, TopicSpec{Name: topic, Queues: 6}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(5*time.Second, "producer sees the new queues", func() error {
		ri, err := p.b.routes.get(ctx, topic)
		if err != nil {
			return err
		}
		if len(ri.publish) != 12 {
			return fmt.Errorf("%d writable queues", len(ri.publish))
		}
		return nil
	})
}

func TestSendKinds(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(4)
	p := e.producer()
	ctx := context.Background()
	col := newCollector()
	e.push("g", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))

	var want []*SendResult
	brokers := map[string]int{}
	// Sync.
	for _, r := range e.sendN(p, topic, 20, nil) {
		want = append(want, r)
		brokers[r.BrokerName]++
		if r.OffsetMsgID == "" || len(r.MsgID) != 32 {
			t.Fatalf("result lacks ids: %+v", r)
		}
	}
	if brokers["broker-a"] != 10 || brokers["broker-b"] != 10 {
		t.Fatalf("sync sends not round-robin across brokers: %v", brokers)
	}
	// Async: every callback exactly once.
	const nAsync = 200
	var mu sync.Mutex
	calls := map[int]int{}
	var wg sync.WaitGroup
	wg.Add(nAsync)
	for i := 0; i < nAsync; i++ {
		p.SendAsync(ctx, &Message{Topic: topic, Body: []byte(fmt.Sprintf("async-%d", i))}, func(r *SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			calls[i]++
			if err != nil {
				t.Errorf("async %d: %v", i, err)
				return
			}
			want = append(want, r)
		})
	}
	wg.Wait()
	for i := 0; i < nAsync; i++ {
		if calls[i] != 1 {
			t.Fatalf("callback %d called %d times", i, calls[i])
		}
	}
	// Oneway: no result; found by the consumer through its body.
	for i := 0; i < 10; i++ {
		if err := p.SendOneway(ctx, &Message{Topic: topic, Body: []byte(fmt.Sprintf("oneway-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	// Batch: one queue, consecutive offsets.
	batch := make([]*Message, 10)
	for i := range batch {
		batch[i] = &Message{Topic: topic, Tag: "batch", Keys: []string{fmt.Sprintf("bk%d", i)}, Body: []byte(fmt.Sprintf("batch-%d", i))}
	}
	br, err := p.SendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(br) != 10 {
		t.Fatalf("%d batch results", len(br))
	}
	for i, r := range br {
		if r.Queue(topic) != br[0].Queue(topic) || r.QueueOffset != br[0].QueueOffset+int64(i) {
			t.Fatalf("batch result %d: %+v (first %+v)", i, r, br[0])
		}
	}
	want = append(want, br...)
	col.waitAll(e, 10*time.Second, want)
	e.waitFor(10*time.Second, "oneway messages consumed", func() error {
		col.mu.Lock()
		defer col.mu.Unlock()
		n := 0
		for _, m := range col.msgs {
			if len(m.Body) > 7 && string(m.Body[:7]) == "oneway-" {
				n++
			}
		}
		if n < 10 {
			return fmt.Errorf("%d of 10", n)
		}
		return nil
	})
	// Consumed messages carry what was sent, with the ids the send
	// returned: MsgID the unique id, OffsetMsgID where it was stored.
	col.mu.Lock()
	defer col.mu.Unlock()
	sent := make(map[string]*SendResult, len(want))
	for _, r := range want {
		sent[r.MsgID] = r
	}
	for _, m := range col.msgs {
		if r := sent[m.MsgID]; r != nil && (m.OffsetMsgID != r.OffsetMsgID || m.MsgID == m.OffsetMsgID) {
			t.Fatalf("message %q: ids %s/%s, sent as %s/%s", m.Body, m.MsgID, m.OffsetMsgID, r.MsgID, r.OffsetMsgID)
		}
		if m.Tag == "batch" {
			if len(m.Keys) != 1 || m.Keys[0] != "bk"+string(m.Body[len("batch-"):]) || m.BrokerName != br[0].BrokerName {
				t.Fatalf("batch message %q: keys %v broker %s", m.Body, m.Keys, m.BrokerName)
			}
		}
	}
}

func TestTagFiltering(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p := e.producer()
	col := newCollector()
	e.push("g", topic, "a || b", col.listener("ab"), WithConsumeFrom(ConsumeFromFirst))
	// "Aa" and "BB" have the same Java hash: the broker lets "BB" through
	// for "Aa", the client must not.
	colAa := newCollector()
	e.push("g2", topic, "Aa", colAa.listener("Aa"), WithConsumeFrom(ConsumeFromFirst))

	tags := []string{"a", "b", "c", "", "BB", "Aa", "a"}
	var want, wantAa []*SendResult
	for i, tag := range tags {
		r, err := p.Send(context.Background(), &Message{Topic: topic, Tag: tag, Body: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		switch tag {
		case "a", "b":
			want = append(want, r)
		case "Aa":
			wantAa = append(wantAa, r)
		}
	}
	// A sentinel after everything: once it is consumed, anything the filter
	// let through has been delivered too.
	sentinel, err := p.Send(context.Background(), &Message{Topic: topic, Tag: "b", Body: []byte("end")})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, sentinel)
	col.waitAll(e, 10*time.Second, want)
	colAa.waitAll(e, 10*time.Second, wantAa)
	// Wait until both groups committed past the last message, so nothing
	// more can arrive.
	e.waitFor(10*time.Second, "offsets committed", func() error {
		for _, g := range []string{"g", "g2"} {
			st, err := e.admin.ConsumeStats(context.Background(), g, topic)
			if err != nil {
				return err
			}
			if st.TotalLag != 0 {
				return fmt.Errorf("%s lag %d", g, st.TotalLag)
			}
		}
		return nil
	})
	if n := col.distinct(); n != len(want) {
		t.Fatalf("\"a || b\" consumed %d messages, want %d", n, len(want))
	}
	for _, m := range col.msgs {
		if m.Tag != "a" && m.Tag != "b" {
			t.Fatalf("\"a || b\" got tag %q", m.Tag)
		}
	}
	if n := colAa.distinct(); n != 1 {
		t.Fatalf("\"Aa\" consumed %d messages (hash collision not filtered)", n)
	}
}

// waitBalanced waits until the consumers' assignments are disjoint, cover
// all queues and each holds some.
func waitBalanced(e *env, topicQueues int, cs ...*PushConsumer) {
	e.t.Helper()
	e.waitFor(15*time.Second, "balanced assignment", func() error {
		owner := map[MessageQueue]int{}
		for i, c := range cs {
			a := c.Assignment()
			if len(a) == 0 {
				return fmt.Errorf("consumer %d holds nothing", i)
			}
			for _, q := range a {
				owner[q]++
			}
		}
		if len(owner) != topicQueues {
			return fmt.Errorf("%d of %d queues held", len(owner), topicQueues)
		}
		for q, n := range owner {
			if n != 1 {
				return fmt.Errorf("%s held by %d consumers", q, n)
			}
		}
		return nil
	})
}

func TestClusteringThreeConsumers(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(4) // 8 queues over two brokers
	p := e.producer()
	col := newCollector()
	var cs []*PushConsumer
	for i := 0; i < 3; i++ {
		cs = append(cs, e.push("g", topic, "*", col.listener(fmt.Sprint(i)), WithConsumeFrom(ConsumeFromFirst)))
	}
	waitBalanced(e, 8, cs...)
	res := e.sendN(p, topic, 300, nil)
	col.waitAll(e, 15*time.Second, res)
	col.mu.Lock()
	defer col.mu.Unlock()
	for uid, n := range col.total {
		if n != 1 {
			t.Fatalf("message %s consumed %d times", uid, n)
		}
	}
	for i := 0; i < 3; i++ {
		if len(col.seen[fmt.Sprint(i)]) == 0 {
			t.Fatalf("consumer %d got nothing", i)
		}
	}
	// Each queue's messages went to the consumer holding it.
	held := map[MessageQueue]string{}
	for i, c := range cs {
		for _, q := range c.Assignment() {
			held[q] = fmt.Sprint(i)
		}
	}
	for _, m := range col.msgs {
		if col.seen[held[m.Queue()]][m.MsgID] != 1 {
			t.Fatalf("message of %s not consumed by its holder", m.Queue())
		}
	}
}

func TestConsumerJoinAndLeave(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(4)
	p := e.producer()
	col := newCollector()
	c0 := e.push("g", topic, "*", col.listener("0"), WithConsumeFrom(ConsumeFromFirst))
	c1 := e.push("g", topic, "*", col.listener("1"), WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(e, 8, c0, c1)

	// Produce continuously while members join and leave.
	var (
		mu      sync.Mutex
		sent    []*SendResult
		stop    = make(chan struct{})
		prodErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte(fmt.Sprint(i))})
			mu.Lock()
			if err != nil {
				prodErr = err
				mu.Unlock()
				return
			}
			sent = append(sent, r)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	sentCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(sent)
	}
	e.waitFor(5*time.Second, "traffic", func() error {
		if sentCount() < 50 {
			return fmt.Errorf("%d sent", sentCount())
		}
		return nil
	})
	c2 := e.push("g", topic, "*", col.listener("2"), WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(e, 8, c0, c1, c2)
	e.waitFor(5*time.Second, "new member consumes", func() error {
		if col.count("2") == 0 {
			return errors.New("nothing yet")
		}
		return nil
	})
	if err := c0.Close(); err != nil {
		t.Fatal(err)
	}
	waitBalanced(e, 8, c1, c2)
	before := sentCount()
	e.waitFor(5*time.Second, "more traffic", func() error {
		if sentCount() < before+50 {
			return fmt.Errorf("%d sent", sentCount())
		}
		return nil
	})
	close(stop)
	<-done
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	col.waitAll(e, 15*time.Second, sent)
	t.Logf("sent %d, consumed by 0/1/2: %d/%d/%d", len(sent), col.count("0"), col.count("1"), col.count("2"))
}

func TestBroadcasting(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	p := e.producer()
	dir := t.TempDir()
	col := newCollector()
	var cs []*PushConsumer
	for i := 0; i < 2; i++ {
		cs = append(cs, e.push("bg", topic, "*", col.listener(fmt.Sprint(i)), WithMessageModel(Broadcasting),
			WithConsumeFrom(ConsumeFromFirst), WithInstanceName(fmt.Sprint("inst", i)),
			WithOffsetStoreDir(filepath.Join(dir, fmt.Sprint(i)))))
	}
	for _, c := range cs {
		e.waitFor(5*time.Second, "every queue assigned", func() error {
			if n := len(c.Assignment()); n != 4 {
				return fmt.Errorf("%d queues", n)
			}
			return nil
		})
	}
	res := e.sendN(p, topic, 40, nil)
	e.waitFor(10*time.Second, "each consumer got every message", func() error {
		for i := 0; i < 2; i++ {
			if n := col.count(fmt.Sprint(i)); n != 40 {
				return fmt.Errorf("consumer %d: %d of 40", i, n)
			}
		}
		return nil
	})
	// Offsets are kept in the client's file; a restarted consumer resumes.
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	s, err := newLocalOffsetStore(filepath.Join(dir, "0", "bg.json"), "bg")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for q := range s.loaded {
		total += s.loaded[q]
	}
	if total != 40 {
		t.Fatalf("offset file sums to %d, want 40", total)
	}
	col2 := newCollector()
	e.push("bg", topic, "*", col2.listener("r"), WithMessageModel(Broadcasting), WithInstanceName("inst0"),
		WithConsumeFrom(ConsumeFromFirst), WithOffsetStoreDir(filepath.Join(dir, "0")))
	more := e.sendN(p, topic, 10, nil)
	col2.waitAll(e, 10*time.Second, more)
	col2.mu.Lock()
	defer col2.mu.Unlock()
	for _, r := range res {
		if col2.total[r.MsgID] != 0 {
			t.Fatal("restarted broadcasting consumer replayed old messages")
		}
	}
}

func TestOrderlyPerShardingKey(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(4)
	p := e.producer()
	const keys, perKey = 8, 40

	var mu sync.Mutex
	got := map[string][]int{}   // key → sequence numbers in consumption order
	by := map[string][]string{} // key → consumer per delivery
	var wrongQueue atomic.Int32
	queueOf := sync.Map{}
	listener := func(name string) OrderlyListener {
		return func(_ context.Context, msgs []*MessageExt) OrderlyResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				var seq int
				fmt.Sscan(string(m.Body), &seq)
				got[m.ShardingKey] = append(got[m.ShardingKey], seq)
				by[m.ShardingKey] = append(by[m.ShardingKey], name)
				if q, loaded := queueOf.LoadOrStore(m.ShardingKey, m.Queue()); loaded && q != m.Queue() {
					wrongQueue.Add(1)
				}
			}
			return OrderlySuccess
		}
	}
	send := func(from, to int) {
		for s := from; s < to; s++ {
			for k := 0; k < keys; k++ {
				key := fmt.Sprint("order-", k)
				if _, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte(fmt.Sprint(s))}, WithShardingKey(key)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	consumed := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range got {
			n += len(v)
		}
		return n
	}

	a := e.push("og", topic, "*", listener("a"), WithConsumeFrom(ConsumeFromFirst), WithConsumeBatchSize(3))
	send(0, 10)
	e.waitFor(10*time.Second, "first part consumed", func() error {
		if n := consumed(); n < 10*keys {
			return fmt.Errorf("%d consumed", n)
		}
		return nil
	})
	// A second member joins: queues move between them under the locks.
	b := e.push("og", topic, "*", listener("b"), WithConsumeFrom(ConsumeFromFirst), WithConsumeBatchSize(3))
	waitBalanced(e, 8, a, b)
	send(10, 25)
	// The first member leaves: the second takes over every queue.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	send(25, perKey)
	e.waitFor(15*time.Second, "all consumed", func() error {
		if n := consumed(); n < keys*perKey {
			return fmt.Errorf("%d of %d", n, keys*perKey)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if wrongQueue.Load() != 0 {
		t.Fatal("a sharding key's messages landed in several queues")
	}
	handoffs := 0
	for k, seqs := range got {
		for i, s := range seqs {
			if s != i {
				t.Fatalf("key %s consumed out of order or twice: %v by %v", k, seqs, by[k])
			}
		}
		for i := 1; i < len(by[k]); i++ {
			if by[k][i] != by[k][i-1] {
				handoffs++
			}
		}
	}
	if handoffs == 0 {
		t.Fatal("no key moved between consumers: the hand-over was not exercised")
	}
}

func TestOrderlySuspendRedeliversInOrder(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	p := e.producer()
	var mu sync.Mutex
	var seen []string
	failed := false
	e.push("og", topic, "*", OrderlyListener(func(_ context.Context, msgs []*MessageExt) OrderlyResult {
		mu.Lock()
		defer mu.Unlock()
		if string(msgs[0].Body) == "2" && !failed {
			failed = true
			return OrderlySuspend
		}
		if string(msgs[0].Body) == "3" && msgs[0].ReconsumeTimes == 0 {
			panic("listener bug") // counts as a suspend
		}
		seen = append(seen, string(msgs[0].Body))
		return OrderlySuccess
	}), WithConsumeFrom(ConsumeFromFirst))
	e.sendN(p, topic, 5, func(i int) *Message { return &Message{Topic: topic, Body: []byte(fmt.Sprint(i))} })
	e.waitFor(10*time.Second, "all consumed", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) < 5 {
			return fmt.Errorf("%v", seen)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[0 1 2 3 4]" {
		t.Fatalf("consumed %v", seen)
	}
}

func TestRetryLaterAndPanicRedeliver(t *testing.T) {
	e := startRetryEnv(t, retryLevels) // retries go through the broker's delay levels
	topic := e.topic(2)
	p := e.producer()
	var mu sync.Mutex
	attempts := map[string]int{}
	success := map[string]bool{}
	e.push("rg", topic, "*", ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		m := msgs[0]
		attempts[m.MsgID]++
		switch {
		case m.Tag == "retry" && attempts[m.MsgID] < 3:
			return ConsumeRetryLater
		case m.Tag == "panic" && attempts[m.MsgID] == 1:
			panic("boom")
		}
		success[m.MsgID] = true
		return ConsumeSuccess
	}), WithConsumeFrom(ConsumeFromFirst))
	res := e.sendN(p, topic, 6, func(i int) *Message {
		return &Message{Topic: topic, Tag: []string{"ok", "retry", "panic"}[i%3], Body: []byte("x")}
	})
	e.waitFor(10*time.Second, "every message consumed", func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range res {
			if !success[r.MsgID] {
				return fmt.Errorf("%s not yet", r.MsgID)
			}
		}
		return nil
	})
	mu.Lock()
	for i, r := range res {
		want := []int{1, 3, 2}[i%3]
		if attempts[r.MsgID] != want {
			t.Errorf("message %d: %d attempts, want %d", i, attempts[r.MsgID], want)
		}
	}
	mu.Unlock()
	e.waitFor(10*time.Second, "offsets committed past retried messages", func() error {
		st, err := e.admin.ConsumeStats(context.Background(), "rg", topic)
		if err != nil {
			return err
		}
		if st.TotalLag != 0 {
			return fmt.Errorf("lag %d", st.TotalLag)
		}
		return nil
	})
}

func TestOffsetsSurviveRestart(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	p := e.producer()
	col := newCollector()
	c := e.push("sg", topic, "*", col.listener("first"), WithConsumeFrom(ConsumeFromFirst))
	first := e.sendN(p, topic, 30, nil)
	col.waitAll(e, 10*time.Second, first)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	second := e.sendN(p, topic, 20, nil)
	col2 := newCollector()
	// ConsumeFromFirst only applies without a committed offset.
	e.push("sg", topic, "*", col2.listener("second"), WithConsumeFrom(ConsumeFromFirst))
	col2.waitAll(e, 10*time.Second, second)
	col2.mu.Lock()
	for _, r := range first {
		if col2.total[r.MsgID] != 0 {
			t.Fatalf("message consumed before the restart delivered again")
		}
	}
	col2.mu.Unlock()
	// A new group with ConsumeFromLast skips history.
	col3 := newCollector()
	c3 := e.push("sg-new", topic, "*", col3.listener("new"))
	e.waitFor(10*time.Second, "assigned", func() error {
		if len(c3.Assignment()) != 4 {
			return errors.New("not yet")
		}
		return nil
	})
	// Wait for the start offsets to be committed (a queue's start offset is
	// committed even before anything is consumed).
	e.waitFor(10*time.Second, "start offsets committed", func() error {
		st, err := e.admin.ConsumeStats(context.Background(), "sg-new", topic)
		if err != nil {
			return err
		}
		for _, q := range st.Queues {
			if q.ConsumerOffset < 0 {
				return fmt.Errorf("%s not committed", q.Queue)
			}
		}
		return nil
	})
	third := e.sendN(p, topic, 5, nil)
	col3.waitAll(e, 10*time.Second, third)
	if n := col3.distinct(); n != 5 {
		t.Fatalf("ConsumeFromLast group consumed %d messages, want only the 5 new ones", n)
	}
}

func TestLongPolling(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	p := e.producer()
	got := make(chan time.Time, 10)
	c := e.push("lg", topic, "*", ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		got <- time.Now()
		return ConsumeSuccess
	}), WithLongPollTimeout(30*time.Second))
	e.waitFor(5*time.Second, "queue pulled", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, q := range c.queues {
			q.pq.mu.Lock()
			started := q.pq.started
			q.pq.mu.Unlock()
			if started {
				return nil
			}
		}
		return errors.New("not started")
	})
	// The first pull is issued right after the start offset is known; give
	// it time to reach the broker and park there (if it has not, it finds
	// the message at once and the bound holds anyway).
	time.Sleep(200 * time.Millisecond)
	// The median wake-up must be within 50 ms; every one far below the
	// 30 s hold, which only a wake-up on arrival explains. (One slow round
	// under the race detector on a small machine is not a failure.)
	var lat []time.Duration
	for i := 0; i < 5; i++ {
		if _, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte("wake")}); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		select {
		case at := <-got:
			lat = append(lat, max(0, at.Sub(sent)))
		case <-time.After(5 * time.Second):
			t.Fatal("parked pull did not return")
		}
		time.Sleep(100 * time.Millisecond) // park again
	}
	slices.Sort(lat)
	t.Logf("wake-up latencies %v", lat)
	if lat[len(lat)/2] > 50*time.Millisecond || lat[len(lat)-1] > time.Second {
		t.Fatalf("parked pulls returned %v after the sends", lat)
	}
}

func TestLookupByIDAndKey(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	// Another topic, so that a unique id lookup without a topic searches
	// more than one.
	if err := e.admin.CreateTopic(context.Background(), TopicSpec{Name: "lookup-other", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	p := e.producer()
	ctx := context.Background()
	// The same key on both brokers.
	var rs []*SendResult
	for _, b := range []string{"broker-a", "broker-b"} {
		r, err := p.Send(ctx, &Message{Topic: topic, Keys: []string{"order-42", "user-7"}, Tag: "t", Body: []byte(b)},
			WithQueue(MessageQueue{Topic: topic, BrokerName: b, QueueID: 1}))
		if err != nil {
			t.Fatal(err)
		}
		if r.BrokerName != b || r.QueueID != 1 {
			t.Fatalf("WithQueue ignored: %+v", r)
		}
		rs = append(rs, r)
	}
	var found []*MessageExt
	e.waitFor(10*time.Second, "indexed", func() error {
		var err error
		found, err = e.admin.QueryMessageByKey(ctx, topic, "order-42", time.Time{}, time.Time{}, 10)
		if err != nil {
			return err
		}
		if len(found) != 2 {
			return fmt.Errorf("%d found", len(found))
		}
		return nil
	})
	if found[0].BrokerName == found[1].BrokerName {
		t.Fatalf("both results from %s", found[0].BrokerName)
	}
	if got, err := e.admin.QueryMessageByKey(ctx, topic, "nope", time.Time{}, time.Time{}, 10); err != nil || len(got) != 0 {
		t.Fatalf("missing key: %v %v", got, err)
	}
	if got, _ := e.admin.QueryMessageByKey(ctx, topic, "user-7", time.Time{}, time.Time{}, 1); len(got) != 1 {
		t.Fatalf("max ignored: %d", len(got))
	}

	// By offset message id.
	l, err := e.admin.ViewMessage(ctx, rs[1].OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	if l.MatchedBy != ByOffsetMsgID || len(l.Messages) != 1 || string(l.Messages[0].Body) != "broker-b" ||
		l.Messages[0].BrokerName != "broker-b" || l.Messages[0].MsgID != rs[1].MsgID {
		t.Fatalf("view by offset id: %v %+v", l.MatchedBy, l.Messages)
	}
	// By unique id, with and without a topic.
	for _, opts := range [][]ViewOption{{InTopic(topic)}, nil} {
		l, err := e.admin.ViewMessage(ctx, rs[0].MsgID, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if l.MatchedBy != ByMsgID || len(l.Messages) != 1 || l.Messages[0].OffsetMsgID != rs[0].OffsetMsgID {
			t.Fatalf("view by unique id: %v %+v", l.MatchedBy, l.Messages)
		}
	}
	if _, err := e.admin.ViewMessage(ctx, "00000000000000000000000000000000", InTopic(topic)); !errors.Is(err, ErrQueryNotFound) && err == nil {
		t.Fatalf("unknown id: %v", err)
	}
	// Any id a producer gave is looked up (RocketMQ 5 and applications
	// choose their own); one that cannot be a key is refused.
	if _, err := e.admin.ViewMessage(ctx, "order-42-paid", InTopic(topic)); !errors.Is(err, ErrQueryNotFound) {
		t.Fatalf("an application id never sent: %v", err)
	}
	if _, err := e.admin.ViewMessage(ctx, "not an id"); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("malformed id: %v", err)
	}
}

func TestAdmin(t *testing.T) {
	e := startEnv(t, 2, 2)
	ctx := context.Background()
	a := e.admin
	topic := "admin-topic"
	if err := a.CreateTopic(ctx, TopicSpec{Name: topic, Queues: 3}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTopic(ctx, TopicSpec{Name: topic, Queues: 3}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := a.CreateTopic(ctx, TopicSpec{Name: "bad topic"}); !errors.Is(err, ErrIllegalTopic) {
		t.Fatalf("bad name: %v", err)
	}
	if err := a.CreateTopic(ctx, TopicSpec{Name: "x", BrokerNames: []string{"nope"}}); !errors.Is(err, ErrBrokerNotExist) {
		t.Fatalf("unknown broker: %v", err)
	}
	if err := a.CreateTopic(ctx, TopicSpec{Name: "only-b", BrokerNames: []string{"broker-b"}}); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Route(ctx, "only-b"); err != nil || len(r.Brokers) != 1 || r.Brokers[0].BrokerName != "broker-b" {
		t.Fatalf("route of only-b: %+v %v", r, err)
	}
	if err := a.CreateTopic(ctx, TopicSpec{Name: "in-cluster", Cluster: "DefaultCluster", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	topics, err := a.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{topic, "only-b", "in-cluster"} {
		if !slices.Contains(topics, want) {
			t.Fatalf("ListTopics = %v lacks %s", topics, want)
		}
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ci.Brokers) != 2 || len(ci.Clusters["DefaultCluster"]) != 2 || len(ci.Live) != 2 {
		t.Fatalf("cluster info: %+v", ci)
	}
	bi, err := a.BrokerInfo(ctx, e.c.Broker(0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	if bi.BrokerName != "broker-a" || bi.Role != "MASTER" {
		t.Fatalf("broker info: %+v", bi)
	}

	p := e.producer()
	e.sendN(p, topic, 30, nil)
	// Queues are built asynchronously from the CommitLog: poll.
	e.waitFor(5*time.Second, "queue status", func() error {
		qs, err := a.QueueStatus(ctx, topic)
		if err != nil {
			return err
		}
		var total int64
		for _, q := range qs {
			total += q.MaxOffset - q.MinOffset
			if q.MaxOffset > 0 && q.LastStoreTime.IsZero() {
				return fmt.Errorf("queue %s without last store time", q.Queue)
			}
		}
		if len(qs) != 6 || total != 30 {
			return fmt.Errorf("%d queues, %d messages", len(qs), total)
		}
		return nil
	})

	col := newCollector()
	c := e.push("admin-g", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	e.waitFor(10*time.Second, "consumed and committed", func() error {
		st, err := a.ConsumeStats(ctx, "admin-g", topic)
		if err != nil {
			return err
		}
		if len(st.Queues) != 6 || st.TotalLag != 0 || col.distinct() != 30 {
			return fmt.Errorf("%d queues, lag %d, consumed %d", len(st.Queues), st.TotalLag, col.distinct())
		}
		return nil
	})
	groups, err := a.ConsumerGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(groups, func(g ConsumerGroup) bool { return g.Name == "admin-g" })
	if i < 0 || !slices.Equal(groups[i].ClientIDs, []string{c.ClientID()}) || groups[i].Subscriptions[topic] != "*" || len(groups[i].Brokers) != 2 {
		t.Fatalf("consumer groups: %+v", groups)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	changes, err := a.ResetOffset(ctx, "admin-g", topic, ResetToEarliest, true)
	if err != nil {
		t.Fatal(err)
	}
	var moved int64
	for _, ch := range changes {
		moved += ch.Before - ch.After
	}
	if len(changes) != 6 || moved != 30 {
		t.Fatalf("dry-run reset: %+v", changes)
	}
	st, _ := a.ConsumeStats(ctx, "admin-g", topic)
	if st.TotalLag != 0 {
		t.Fatal("dry run changed offsets")
	}
	if _, err := a.ResetOffset(ctx, "admin-g", topic, ResetToEarliest, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.ConsumeStats(ctx, "admin-g", topic); st.TotalLag != 30 {
		t.Fatalf("lag after reset %d, want 30", st.TotalLag)
	}
	// The group re-consumes everything after the reset.
	col2 := newCollector()
	e.push("admin-g", topic, "*", col2.listener("c2"))
	e.waitFor(10*time.Second, "re-consumed", func() error {
		if n := col2.distinct(); n != 30 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})

	if err := a.DeleteTopic(ctx, "only-b"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(10*time.Second, "route gone", func() error {
		if _, err := a.Route(ctx, "only-b"); !errors.Is(err, ErrTopicNotExist) {
			return fmt.Errorf("route: %v", err)
		}
		return nil
	})
}

func TestPullConsumer(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	p := e.producer()
	ctx := context.Background()
	newPC := func(extra ...ConsumerOption) *PullConsumer {
		c, err := NewPullConsumer("pullg", e.copts(append([]ConsumerOption{WithConsumeFrom(ConsumeFromFirst), WithPollBatchSize(7)}, extra...)...)...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Poll(ctx); !errors.Is(err, ErrNotStarted) {
			t.Fatalf("poll before start: %v", err)
		}
		if err := c.Subscribe(topic, "*"); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := newPC(WithAutoCommit(false))
	res := e.sendN(p, topic, 40, nil)
	seen := map[string]int{}
	last := map[MessageQueue]int64{}
	for len(seen) < 40 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msgs, err := c.Poll(pctx)
		cancel()
		if err != nil {
			t.Fatalf("poll: %v (%d seen)", err, len(seen))
		}
		if len(msgs) > 7 {
			t.Fatalf("poll returned %d messages, batch size 7", len(msgs))
		}
		for _, m := range msgs {
			seen[m.MsgID]++
			if prev, ok := last[m.Queue()]; ok && m.QueueOffset != prev+1 {
				t.Fatalf("queue %s: offset %d after %d", m.Queue(), m.QueueOffset, prev)
			}
			last[m.Queue()] = m.QueueOffset
		}
	}
	for _, r := range res {
		if seen[r.MsgID] != 1 {
			t.Fatalf("message seen %d times", seen[r.MsgID])
		}
	}
	if len(c.Assignment()) != 4 {
		t.Fatalf("assignment %v", c.Assignment())
	}
	// Poll blocks until ctx is done when there is nothing.
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := c.Poll(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("empty poll: %v", err)
	}
	cancel()
	// Seek back on one queue: its messages come again from there.
	q := c.Assignment()[0]
	if err := c.Seek(ctx, q, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Seek(ctx, MessageQueue{Topic: topic, BrokerName: "nope"}, 0); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("seek on an unassigned queue: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	msgs, err := c.Poll(pctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Queue() != q || msgs[0].QueueOffset != 1 {
		t.Fatalf("after seek got %s@%d", msgs[0].Queue(), msgs[0].QueueOffset)
	}
	// Commit everything polled except the seek replay, then restart: the
	// new consumer starts after what was committed.
	if err := c.Seek(ctx, q, last[q]+1); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	more := e.sendN(p, topic, 5, nil)
	c2 := newPC()
	got := map[string]bool{}
	for len(got) < 5 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msgs, err := c2.Poll(pctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got[m.MsgID] = true
		}
	}
	for _, r := range more {
		if !got[r.MsgID] {
			t.Fatal("new message missing")
		}
	}
	if len(got) != 5 {
		t.Fatalf("restarted pull consumer got %d messages, want the 5 new ones", len(got))
	}
}

func TestSendRetriesOnAnotherBroker(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	// A long refresh interval: the producer keeps routing to the stopped
	// broker until a send fails there.
	p := e.producer(WithRouteRefreshInterval(time.Hour))
	e.sendN(p, topic, 4, nil)
	e.c.StopBroker(0)
	brokers := map[string]int{}
	for _, r := range e.sendN(p, topic, 20, nil) {
		brokers[r.BrokerName]++
	}
	if brokers["broker-b"] != 20 {
		t.Fatalf("sends with broker-a down: %v", brokers)
	}
	// An ordered send to the dead broker is not moved elsewhere.
	_, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte("x")},
		WithQueue(MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}))
	if err == nil {
		t.Fatal("send to a stopped broker's queue succeeded")
	}
	// After a restart the send stream reconnects.
	e.c.StartBroker(0)
	e.waitFor(10*time.Second, "broker-a back", func() error {
		_, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte("x")},
			WithQueue(MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}))
		return err
	})
}

// TestSendWhileBrokerDown: with the only broker of a topic down, a send
// says the broker is unreachable — not that the topic does not exist —
// for a producer that knew the route and for a new one; a send started
// while it is down succeeds once it is back, within its retries.
func TestSendWhileBrokerDown(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	ctx := context.Background()
	running := e.producer()
	e.sendN(running, topic, 2, nil)
	e.c.StopBroker(0) // unregisters: the NameServer drops its routes at once
	fresh := e.producer()
	for name, p := range map[string]*Producer{"running": running, "new": fresh} {
		_, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("x")})
		if !errors.Is(err, ErrBrokerUnreachable) || errors.Is(err, ErrTopicNotExist) {
			t.Errorf("%s producer, broker down: %v, want ErrBrokerUnreachable and not ErrTopicNotExist", name, err)
		}
	}
	if _, err := fresh.Send(ctx, &Message{Topic: topic, Body: []byte("x")}); err == nil ||
		!strings.Contains(err.Error(), "no broker is registered") {
		t.Errorf("new producer, broker down: %v, want it to say that no broker is registered", err)
	}
	if _, err := running.b.routes.fetch(ctx, topic); !errors.Is(err, ErrBrokerUnreachable) ||
		!strings.Contains(err.Error(), "broker group broker-a, which serves it, is not registered") {
		t.Errorf("route of the running producer, broker down: %v", err)
	}
	// A send in progress when the broker comes back succeeds.
	slow := e.producer(WithSendRetries(10))
	done := make(chan error, 1)
	go func() {
		_, err := slow.Send(ctx, &Message{Topic: topic, Body: []byte("during the restart")})
		done <- err
	}()
	e.c.StartBroker(0)
	if err := <-done; err != nil {
		t.Errorf("send across the restart: %v", err)
	}
	e.waitFor(10*time.Second, "the running producer sends again", func() error {
		_, err := running.Send(ctx, &Message{Topic: topic, Body: []byte("x")})
		return err
	})
	// A topic deleted while its broker is up does not exist.
	if err := e.admin.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := running.b.routes.fetch(ctx, topic); !errors.Is(err, ErrTopicNotExist) || errors.Is(err, ErrBrokerUnreachable) {
		t.Errorf("route of a deleted topic: %v, want ErrTopicNotExist", err)
	}
}

func TestConcurrentSendsShareStreams(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(4)
	p := e.producer()
	var wg sync.WaitGroup
	var failed atomic.Int32
	offsets := sync.Map{}
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				r, err := p.Send(context.Background(), &Message{Topic: topic, Body: []byte("x")})
				if err != nil {
					failed.Add(1)
					return
				}
				if _, dup := offsets.LoadOrStore(fmt.Sprint(r.BrokerName, r.QueueID, r.QueueOffset), true); dup {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatal("concurrent sends failed or got duplicate positions")
	}
	p.muxMu.Lock()
	n := len(p.muxes)
	p.muxMu.Unlock()
	if n != 2 {
		t.Fatalf("%d send streams for 2 brokers", n)
	}
	e.waitFor(5*time.Second, "all stored", func() error {
		qs, err := e.admin.QueueStatus(context.Background(), topic)
		if err != nil {
			return err
		}
		var total int64
		for _, q := range qs {
			total += q.MaxOffset
		}
		if total != 800 {
			return fmt.Errorf("%d stored, want 800", total)
		}
		return nil
	})
}

// Close of a consumer blocked in its listener waits for the listener, and
// the message it was consuming is committed or redelivered, never lost.
func TestCloseWaitsForListener(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	p := e.producer()
	entered := make(chan struct{})
	release := make(chan struct{})
	var returned atomic.Bool
	c := e.push("cg", topic, "*", ConcurrentListener(func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		close(entered)
		<-release
		returned.Store(true)
		return ConsumeSuccess
	}), WithConsumeFrom(ConsumeFromFirst))
	e.sendN(p, topic, 1, nil)
	<-entered
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while the listener was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Fatal("listener did not finish")
	}
	st, err := e.admin.ConsumeStats(context.Background(), "cg", topic)
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalLag != 0 {
		t.Fatalf("the message consumed during Close was not committed: lag %d", st.TotalLag)
	}
}

// Pulling pauses while a queue has more than the threshold in flight, and
// no more listener calls run at once than the worker pool allows.
func TestFlowControlAndWorkerBound(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	p := e.producer()
	release := make(chan struct{})
	var running, peak atomic.Int32
	c := e.push("fg", topic, "*", ConcurrentListener(func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		n := running.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return ConsumeSuccess
	}), WithConsumeFrom(ConsumeFromFirst), WithPullThreshold(5, 1<<20), WithPullBatchSize(4), WithConsumeGoroutines(3))
	res := e.sendN(p, topic, 100, nil)
	inFlight := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, q := range c.queues {
			return q.pq.count()
		}
		return 0
	}
	e.waitFor(5*time.Second, "threshold reached", func() error {
		if n := inFlight(); n <= 5 {
			return fmt.Errorf("%d in flight", n)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // let a pull that should not happen happen
	if n := inFlight(); n > 5+4 {
		t.Fatalf("%d messages in flight with a threshold of 5 and batches of 4", n)
	}
	close(release)
	e.waitFor(10*time.Second, "drained", func() error {
		st, err := e.admin.ConsumeStats(context.Background(), "fg", topic)
		if err != nil {
			return err
		}
		if st.TotalLag != 0 {
			return fmt.Errorf("lag %d", st.TotalLag)
		}
		return nil
	})
	if peak.Load() > 3 {
		t.Fatalf("%d listener calls at once with 3 workers", peak.Load())
	}
	if len(res) != 100 {
		t.Fatal(len(res))
	}
}

func TestConsumeFromTimestamp(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	p := e.producer()
	e.sendN(p, topic, 10, nil)
	time.Sleep(10 * time.Millisecond) // store timestamps have millisecond resolution
	at := time.Now()
	time.Sleep(10 * time.Millisecond)
	later := e.sendN(p, topic, 10, nil)
	col := newCollector()
	e.push("tg", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromTimestamp(at)))
	col.waitAll(e, 10*time.Second, later)
	e.waitFor(10*time.Second, "committed", func() error {
		st, err := e.admin.ConsumeStats(context.Background(), "tg", topic)
		if err != nil {
			return err
		}
		if st.TotalLag != 0 {
			return fmt.Errorf("lag %d", st.TotalLag)
		}
		return nil
	})
	if n := col.distinct(); n != 10 {
		t.Fatalf("consumed %d messages, want the 10 stored after the timestamp", n)
	}
}

func TestProducerCloseWaitsForAsyncCallbacks(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p, err := NewProducer("pg", e.popts()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	for i := 0; i < 100; i++ {
		p.SendAsync(context.Background(), &Message{Topic: topic, Body: []byte("x")}, func(_ *SendResult, err error) {
			if err != nil {
				t.Errorf("async send: %v", err)
			}
			calls.Add(1)
		})
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 100 {
		t.Fatalf("%d callbacks done when Close returned", n)
	}
}

func TestConsumerStartedBeforeTopicExists(t *testing.T) {
	e := startEnv(t, 1, 1)
	col := newCollector()
	topic := "created-later"
	e.push("lg", topic, "*", col.listener("c"), WithConsumeFrom(ConsumeFromFirst))
	if err := e.admin.CreateTopic(context.Background(), TopicSpec{Name: topic, Queues: 2}); err != nil {
		t.Fatal(err)
	}
	p := e.producer()
	res := e.sendN(p, topic, 5, nil)
	col.waitAll(e, 15*time.Second, res)
}

// TestRoundRobinPerTopic: a producer that sends to two topics in turn
// still spreads each topic's messages over all its queues (one position
// per topic, as RocketMQ keeps; a shared one would use every other queue).
func TestRoundRobinPerTopic(t *testing.T) {
	e := startEnv(t, 1, 1)
	ctx := context.Background()
	topics := []string{"rr-a", "rr-b"}
	for _, name := range topics {
		if err := e.admin.CreateTopic(ctx, TopicSpec{Name: name, Queues: 4}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.producer()
	used := map[string]map[int32]int{}
	for i := range 16 {
		topic := topics[i%2]
		r, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		if used[topic] == nil {
			used[topic] = map[int32]int{}
		}
		used[topic][r.QueueID]++
	}
	for _, topic := range topics {
		if len(used[topic]) != 4 {
			t.Errorf("%s: sends by queue %v, want 2 on each of 4", topic, used[topic])
		}
		for q, n := range used[topic] {
			if n != 2 {
				t.Errorf("%s: %d sends to queue %d, want 2", topic, n, q)
			}
		}
	}
}
