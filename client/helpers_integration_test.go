package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// Short intervals so that integration tests converge quickly.
func fastShared(ns []string) Option {
	return WithOptions(WithNameServers(ns...), WithRouteRefreshInterval(300*time.Millisecond))
}

// fastProducerOptions are fastShared and extra.
func fastProducerOptions(ns []string, extra ...ProducerOption) []ProducerOption {
	return append([]ProducerOption{fastShared(ns)}, extra...)
}

// fastConsumerOptions are shared, short consumer intervals and extra.
func fastConsumerOptions(shared Option, extra ...ConsumerOption) []ConsumerOption {
	return append([]ConsumerOption{
		shared,
		WithHeartbeatInterval(500 * time.Millisecond),
		WithRebalanceInterval(time.Second),
		WithCommitInterval(200 * time.Millisecond),
		WithLongPollTimeout(3 * time.Second),
		WithRetryDelay(200 * time.Millisecond),
		WithSuspendDelay(100 * time.Millisecond),
		WithLockInterval(time.Second),
	}, extra...)
}

type env struct {
	t     *testing.T
	c     *cluster.Cluster
	ns    []string
	admin *Admin
}

func startEnv(t *testing.T, nameServers, brokers int) *env {
	t.Helper()
	return startEnvWith(t, cluster.Options{NameServers: nameServers, BrokerGroups: brokers})
}

// startEnvWith starts a cluster with o and an admin client for it.
func startEnvWith(t *testing.T, o cluster.Options) *env {
	t.Helper()
	c := cluster.Start(t, o)
	// cluster.Start registers its Stop before the brokers' temporary
	// directories, so they would be removed before the brokers persist on
	// close; stopping (idempotently) here runs first.
	t.Cleanup(c.Stop)
	e := &env{t: t, c: c, ns: c.NameServerAddrs()}
	a, err := NewAdmin(e.shared())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	e.admin = a
	return e
}

// shared are the options of every client of a test: fastShared, and a
// test logger with -v.
func (e *env) shared() Option {
	o := fastShared(e.ns)
	if testing.Verbose() {
		o = WithOptions(o, WithLogger(zaptest.NewLogger(e.t)))
	}
	return o
}

// popts are a producer's options: shared and extra.
func (e *env) popts(extra ...ProducerOption) []ProducerOption {
	return append([]ProducerOption{e.shared()}, extra...)
}

// copts are a consumer's options: shared, short intervals and extra.
func (e *env) copts(extra ...ConsumerOption) []ConsumerOption {
	return fastConsumerOptions(e.shared(), extra...)
}

func (e *env) topic(queues int) string {
	e.t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(e.t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.admin.CreateTopic(ctx, TopicSpec{Name: name, Queues: queues}); err != nil {
		e.t.Fatalf("create topic: %v", err)
	}
	return name
}

func (e *env) producer(extra ...ProducerOption) *Producer {
	e.t.Helper()
	p, err := NewProducer("pg", e.popts(extra...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	return p
}

func (e *env) push(group, topic, expr string, listener Listener, extra ...ConsumerOption) *PushConsumer {
	e.t.Helper()
	c, err := NewPushConsumer(group, e.copts(extra...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Subscribe(topic, expr, listener); err != nil {
		e.t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (e *env) waitFor(d time.Duration, what string, cond func() error) {
	e.t.Helper()
	if err := cluster.Poll(d, cond); err != nil {
		e.t.Fatalf("%s: not within %v: %v", what, d, err)
	}
}

func (e *env) sendN(p *Producer, topic string, n int, mk func(i int) *Message) []*SendResult {
	e.t.Helper()
	out := make([]*SendResult, n)
	for i := 0; i < n; i++ {
		m := &Message{Topic: topic, Body: []byte(fmt.Sprintf("m%d", i))}
		if mk != nil {
			m = mk(i)
		}
		r, err := p.Send(context.Background(), m)
		if err != nil {
			e.t.Fatalf("send %d: %v", i, err)
		}
		out[i] = r
	}
	return out
}

// collector records consumed messages per consumer.
type collector struct {
	mu    sync.Mutex
	seen  map[string]map[string]int // consumer → unique id → deliveries
	total map[string]int            // unique id → deliveries over all consumers
	msgs  []*MessageExt
}

func newCollector() *collector {
	return &collector{seen: make(map[string]map[string]int), total: make(map[string]int)}
}

func (c *collector) listener(name string) ConcurrentListener {
	return func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		c.add(name, msgs)
		return ConsumeSuccess
	}
}

func (c *collector) add(name string, msgs []*MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[name] == nil {
		c.seen[name] = make(map[string]int)
	}
	for _, m := range msgs {
		c.seen[name][m.MsgID]++
		c.total[m.MsgID]++
		c.msgs = append(c.msgs, m)
	}
}

// distinct returns how many different messages were consumed.
func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.total)
}

func (c *collector) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen[name])
}

// waitAll waits until every result was consumed at least once.
func (c *collector) waitAll(e *env, d time.Duration, results []*SendResult) {
	e.t.Helper()
	e.waitFor(d, "all messages consumed", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		missing := 0
		for _, r := range results {
			if c.total[r.MsgID] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d missing", missing, len(results))
		}
		return nil
	})
}
