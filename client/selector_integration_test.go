package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// sqlStreamSize is how many messages the SQL92 end-to-end test sends:
// BOLIDE_SQL_E2E_N (make sql-e2e: 100 000), else 10 000, 2 000 with -short.
func sqlStreamSize(t *testing.T) int {
	if s := os.Getenv("BOLIDE_SQL_E2E_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("BOLIDE_SQL_E2E_N=%q: want a number ≥ 10", s)
		}
		return n
	}
	if testing.Short() {
		return 2000
	}
	return 10000
}

// sqlMessage is message i of the mixed stream: regions in turn, amounts
// 0..999, a tag in three, and every seventh message without an amount.
func sqlMessage(topic string, i int) *Message {
	m := &Message{Topic: topic, Tag: []string{"new", "paid", "void"}[i%3], Body: []byte("m" + strconv.Itoa(i)),
		Properties: map[string]string{"region": []string{"eu", "us", "asia", "eu"}[i%4], "seq": strconv.Itoa(i)}}
	if i%7 != 0 {
		m.Properties["amount"] = strconv.Itoa(i * 37 % 1000)
	}
	return m
}

// sqlCondition and sqlMatches are the same filter, on the broker and here.
const sqlCondition = "region = 'eu' AND amount >= 500 AND TAGS <> 'void'"

func sqlMatches(i int) bool {
	return (i%4 == 0 || i%4 == 3) && i%7 != 0 && i*37%1000 >= 500 && i%3 != 2
}

// TestSQL92Selector: push and pull consumers subscribed with an SQL92
// condition over a mixed stream receive exactly the matching messages,
// each once, and their groups' offsets reach the end of every queue
// (lag 0): the broker moved them past the messages that do not match.
func TestSQL92Selector(t *testing.T) {
	n := sqlStreamSize(t)
	e := startEnv(t, 1, 2)
	topic := e.topic(4)
	ctx := context.Background()

	pushed := newSeqSet()
	push, err := NewPushConsumer("sqlpush", e.copts(WithConsumeFrom(ConsumeFromFirst))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := push.SubscribeSelector(topic, SQL92(sqlCondition), ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			pushed.add(t, m)
		}
		return ConsumeSuccess
	})); err != nil {
		t.Fatal(err)
	}
	if err := push.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = push.Close() })

	pull, err := NewPullConsumer("sqlpull", e.copts(WithConsumeFrom(ConsumeFromFirst), WithCommitInterval(100*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := pull.SubscribeSelector(topic, SQL92(sqlCondition)); err != nil {
		t.Fatal(err)
	}
	if err := pull.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pull.Close() })
	pulled := newSeqSet()
	pctx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			msgs, err := pull.Poll(pctx)
			if err != nil {
				return
			}
			for _, m := range msgs {
				pulled.add(t, m)
			}
		}
	}()
	t.Cleanup(func() { stopPoll(); wg.Wait() })

	p := e.producer()
	want := 0
	const batch = 100
	for i := 0; i < n; i += batch {
		msgs := make([]*Message, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			msgs = append(msgs, sqlMessage(topic, j))
			if sqlMatches(j) {
				want++
			}
		}
		if _, err := p.SendBatch(ctx, msgs); err != nil {
			t.Fatalf("send batch at %d: %v", i, err)
		}
	}
	t.Logf("%d messages sent, %d match %q", n, want, sqlCondition)

	for name, set := range map[string]*seqSet{"push": pushed, "pull": pulled} {
		e.waitFor(time.Duration(30+n/1000)*time.Second, name+" consumer has every matching message", func() error {
			if got := set.len(); got < want {
				return fmt.Errorf("%d of %d", got, want)
			}
			return nil
		})
	}
	e.waitFor(30*time.Second, "offsets past every message", func() error {
		for _, g := range []string{"sqlpush", "sqlpull"} {
			st, err := e.admin.ConsumeStats(ctx, g, topic)
			if err != nil {
				return err
			}
			if st.TotalLag != 0 {
				return fmt.Errorf("%s: lag %d", g, st.TotalLag)
			}
		}
		return nil
	})
	for name, set := range map[string]*seqSet{"push": pushed, "pull": pulled} {
		if err := set.check(n, want); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// seqSet records consumed messages by their seq property.
type seqSet struct {
	mu   sync.Mutex
	seen map[int]int
}

func newSeqSet() *seqSet { return &seqSet{seen: make(map[int]int)} }

func (s *seqSet) add(t *testing.T, m *MessageExt) {
	i, err := strconv.Atoi(m.Properties["seq"])
	if err != nil {
		t.Errorf("message %s without seq: %v", m.MsgID, m.Properties)
		return
	}
	s.mu.Lock()
	s.seen[i]++
	s.mu.Unlock()
}

func (s *seqSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// check: exactly the matching messages of 0..n-1, each once.
func (s *seqSet) check(n, want int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []string
	for i, k := range s.seen {
		switch {
		case !sqlMatches(i):
			errs = append(errs, fmt.Sprintf("message %d does not match", i))
		case k != 1:
			errs = append(errs, fmt.Sprintf("message %d delivered %d times", i, k))
		}
	}
	if len(s.seen) != want {
		errs = append(errs, fmt.Sprintf("%d distinct messages, want %d", len(s.seen), want))
	}
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Sprintf("and %d more", len(errs)-5))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// TestSQL92SelectorRefused: a condition the brokers do not take is refused
// at Subscribe time with the position of the error; a broker that does not
// filter by properties refuses SQL92 with NO_PERMISSION.
func TestSQL92SelectorRefused(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	c, err := NewPushConsumer("sqlbad", e.copts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := ConcurrentListener(func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	err = c.SubscribeSelector(topic, SQL92("region = 'eu' AND"), l)
	if !errors.Is(err, ErrSubscriptionParse) || !strings.Contains(err.Error(), "offset 17") {
		t.Fatalf("bad condition: %v", err)
	}
	if err := c.SubscribeSelector(topic, SQL92("  "), l); !errors.Is(err, ErrSubscriptionParse) {
		t.Fatalf("empty condition: %v", err)
	}
	if err := c.SubscribeSelector(topic, SQL92("region = 'eu'"), l); err != nil {
		t.Fatalf("good condition: %v", err)
	}
	if err := c.SubscribeSelector(topic, ByTag("a ||| b"), l); !errors.Is(err, ErrSubscriptionParse) {
		t.Fatalf("bad tags: %v", err)
	}

	off := startEnvWith(t, cluster.Options{Broker: func(o *broker.Options) { o.EnablePropertyFilter = false }})
	topic2 := off.topic(1)
	pc, err := NewPullConsumer("sqloff", off.copts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.SubscribeSelector(topic2, SQL92("region = 'eu'")); !errors.Is(err, ErrNoPermission) {
		t.Fatalf("property filter off: %v", err)
	}
}
