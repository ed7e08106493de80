package rocketmqgo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// sqlStreamSize is the size of the SQL92 filter test's mixed stream:
// RMQGO_SQL_N, else 10 000 (2 000 with -short).
func sqlStreamSize(t *testing.T) int {
	if s := os.Getenv("RMQGO_SQL_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("RMQGO_SQL_N=%q: want a number ≥ 10", s)
		}
		return n
	}
	if testing.Short() {
		return 2000
	}
	return 10000
}

// sqlCondition selects about one message in seven of sqlStreamMessage's;
// sqlMatches is the same condition in Go.
const sqlCondition = "region IN ('eu', 'uk') AND amount BETWEEN 200 AND 599 AND TAGS <> 'void'"

func sqlMatches(i int) bool {
	region := []string{"eu", "us", "uk", "asia"}[i%4]
	amount := i * 37 % 1000
	return (region == "eu" || region == "uk") && i%5 != 0 && amount >= 200 && amount <= 599 && i%3 != 2
}

func sqlStreamMessage(topic string, i int) *primitive.Message {
	m := primitive.NewMessage(topic, []byte("sql-"+strconv.Itoa(i)))
	m.WithTag([]string{"new", "paid", "void"}[i%3])
	m.WithProperty("seq", strconv.Itoa(i))
	m.WithProperty("region", []string{"eu", "us", "uk", "asia"}[i%4])
	if i%5 != 0 { // every fifth message has no amount: never a match
		m.WithProperty("amount", strconv.Itoa(i*37%1000))
	}
	return m
}

// seqCounter counts deliveries by the seq property.
type seqCounter struct {
	mu   sync.Mutex
	seen map[int]int
	bad  []string
}

func (s *seqCounter) add(msgs ...*primitive.MessageExt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		i, err := strconv.Atoi(m.GetProperty("seq"))
		if err != nil || !sqlMatches(i) {
			s.bad = append(s.bad, fmt.Sprintf("%s (seq %q, tag %q, region %q, amount %q)", m.MsgId, m.GetProperty("seq"),
				m.GetTags(), m.GetProperty("region"), m.GetProperty("amount")))
			continue
		}
		s.seen[i]++
	}
}

func (s *seqCounter) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *seqCounter) check(t *testing.T, name string, want int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Errorf("%s: %d messages that do not match, first %s", name, len(s.bad), s.bad[0])
	}
	if len(s.seen) != want {
		t.Errorf("%s: %d distinct matching messages, want %d", name, len(s.seen), want)
	}
	for i, k := range s.seen {
		if k != 1 {
			t.Errorf("%s: message %d delivered %d times", name, i, k)
		}
	}
}

// TestSQL92Filter: RocketMQ's push consumer and lite pull consumer
// subscribed with MessageSelector{Type: SQL92} over a mixed stream get
// exactly the matching messages, each once, and their groups' committed
// offsets reach the end of every queue: the brokers moved them past the
// others.
func TestSQL92Filter(t *testing.T) {
	n := sqlStreamSize(t)
	c := sharedCluster(t, twoGroups)
	topic := c.NewTopic(t, "sql", 4)
	p := newProducer(t, c)
	want := 0
	for i := 0; i < n; i += 100 {
		var batch []*primitive.Message
		for j := i; j < min(i+100, n); j++ {
			batch = append(batch, sqlStreamMessage(topic, j))
			if sqlMatches(j) {
				want++
			}
		}
		if _, err := p.SendSync(context.Background(), batch...); err != nil {
			t.Fatalf("send batch at %d: %v", i, err)
		}
	}
	t.Logf("%d messages sent, %d match %q", n, want, sqlCondition)
	sel := consumer.MessageSelector{Type: consumer.SQL92, Expression: sqlCondition}

	pushGroup := uniq("sqlpush")
	pushed := &seqCounter{seen: map[int]int{}}
	pc, err := newRMQPushConsumer(c, pushGroup)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		pushed.add(msgs...)
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start push consumer: %v", err)
	}
	t.Cleanup(func() { _ = pc.Shutdown() })

	pullGroup := uniq("sqlpull")
	lite := startSQLPullConsumer(t, c, pullGroup, topic, sel)
	pulled := &seqCounter{seen: map[int]int{}}
	lag := func(g string) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := c.Admin.ConsumeStats(ctx, g, topic)
		if err != nil {
			return -1
		}
		return st.TotalLag
	}
	// Poll until every matching message came and the group's committed
	// offsets reached the end of every queue: the client moves them past
	// messages the broker filtered out when a pull finds nothing more
	// (NO_MATCHED or NO_NEW with nothing cached) and commits every 5 s.
	deadline := time.Now().Add(time.Duration(90+n/500) * time.Second)
	pullLag := int64(-1)
	for time.Now().Before(deadline) {
		if pulled.distinct() >= want {
			if pullLag = lag(pullGroup); pullLag == 0 {
				break
			}
		}
		cr, err := lite.Poll(context.Background(), 2*time.Second)
		if errors.Is(err, consumer.ErrNoNewMsg) {
			continue
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		pulled.add(cr.GetMsgList()...)
		lite.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	if pullLag != 0 {
		t.Errorf("pull consumer: %d of %d matching messages, lag %d (want 0: offsets past every message)", pulled.distinct(), want, pullLag)
	}
	pushLag := int64(-1)
	if !waitFor(time.Until(deadline)+time.Second, func() bool {
		pushLag = lag(pushGroup)
		return pushed.distinct() >= want && pushLag == 0
	}) {
		t.Errorf("push consumer: %d of %d matching messages, lag %d (want 0: offsets past every message)", pushed.distinct(), want, pushLag)
	}
	pushed.check(t, "push", want)
	pulled.check(t, "pull", want)
}

func newRMQPushConsumer(c *cluster, group string) (rocketmq.PushConsumer, error) {
	return rocketmq.NewPushConsumer(consumerOpts(c, group)...)
}

// startSQLPullConsumer is startPullConsumer with any selector.
func startSQLPullConsumer(t *testing.T, c *cluster, group, topic string, sel consumer.MessageSelector) rocketmq.PullConsumer {
	t.Helper()
	pc, err := rocketmq.NewPullConsumer(consumer.WithNameServer([]string{c.NameSrv}), consumer.WithGroupName(group),
		consumer.WithInstance(uniq("pull")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithPullBatchSize(32))
	if err != nil {
		t.Fatalf("new pull consumer: %v", err)
	}
	if err := pc.Subscribe(topic, sel); err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start pull consumer: %v", err)
	}
	t.Cleanup(func() { _ = pc.Shutdown() })
	return pc
}
