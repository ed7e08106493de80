package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Log messages of the SDK's slave reads (client/readfrom.go).
const (
	logToSlave  = "reading from a slave while the master is unavailable"
	logToMaster = "reading from the master again"
)

// received counts the deliveries of each message body.
type received struct {
	mu     sync.Mutex
	counts map[string]int
	total  int
}

func (r *received) add(msgs []*client.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.counts[string(m.Body)]++
		r.total++
	}
}

// missing lists the bodies prefix-0 .. prefix-(n-1) not received yet.
func (r *received) missing(prefix string, n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for i := 0; i < n; i++ {
		if b := fmt.Sprintf("%s-%d", prefix, i); r.counts[b] == 0 {
			out = append(out, b)
		}
	}
	return out
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// duplicates lists the bodies delivered more than once, with their counts.
func (r *received) duplicates() (extra int, list []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for b, n := range r.counts {
		if n > 1 {
			extra += n - 1
			list = append(list, fmt.Sprintf("%s×%d", b, n))
		}
	}
	sort.Strings(list)
	return extra, list
}

// waitAll waits until bodies prefix-0 .. prefix-(n-1) were all received.
func (r *received) waitAll(t *testing.T, prefix string, n int) {
	t.Helper()
	if err := Poll(60*time.Second, func() error {
		if m := r.missing(prefix, n); len(m) > 0 {
			return fmt.Errorf("%d of %d %q messages not received (first %s)", len(m), n, prefix, m[0])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// slaveReadConsumer is a push or pull consumer under test; release lets a
// consumer that stopped taking messages go on.
type slaveReadConsumer struct {
	release func()
	close   func() error
}

// Consumer flow control of the tests: few messages in memory, so that most
// of them must be pulled after the master stops.
const (
	srPullBatch = 4
	srQueueMax  = 8
	srQueues    = 4
	srHoldAfter = 40
)

func srOptions(ns []string, lg *zap.Logger) []client.ConsumerOption {
	return []client.ConsumerOption{
		client.WithNameServers(ns...), client.WithLogger(lg),
		client.WithConsumeFrom(client.ConsumeFromFirst),
		client.WithMasterRetryInterval(300 * time.Millisecond),
		client.WithCommitInterval(200 * time.Millisecond),
		client.WithPullBatchSize(srPullBatch), client.WithPullThreshold(srQueueMax, 1<<20),
		client.WithLongPollTimeout(2 * time.Second),
		client.WithRPCTimeout(2 * time.Second),
	}
}

// holdAfter returns a gate that blocks once n messages passed it, until
// release is called (or stop is closed).
func holdAfter(n int, stop <-chan struct{}) (pass func(k int), release func()) {
	var mu sync.Mutex
	seen := 0
	gate := make(chan struct{})
	var once sync.Once
	pass = func(k int) {
		mu.Lock()
		seen += k
		hold := seen >= n
		mu.Unlock()
		if hold {
			select {
			case <-gate:
			case <-stop:
			}
		}
	}
	return pass, func() { once.Do(func() { close(gate) }) }
}

func startPushSR(t *testing.T, ns []string, lg *zap.Logger, group, topic string, got *received) slaveReadConsumer {
	t.Helper()
	stop := make(chan struct{})
	pass, release := holdAfter(srHoldAfter, stop)
	c, err := client.NewPushConsumer(group, append(srOptions(ns, lg), client.WithConsumeGoroutines(1))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		got.add(msgs)
		pass(len(msgs))
		return client.ConsumeSuccess
	})); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return slaveReadConsumer{release: release, close: func() error {
		close(stop)
		release()
		return c.Close()
	}}
}

func startPullSR(t *testing.T, ns []string, lg *zap.Logger, group, topic string, got *received) slaveReadConsumer {
	t.Helper()
	c, err := client.NewPullConsumer(group, append(srOptions(ns, lg), client.WithPollBatchSize(4))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pass, release := holdAfter(srHoldAfter, ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			msgs, err := c.Poll(ctx)
			if err != nil {
				return
			}
			got.add(msgs)
			pass(len(msgs))
		}
	}()
	return slaveReadConsumer{release: release, close: func() error {
		cancel()
		<-done
		return c.Close()
	}}
}

// TestConsumersReadFromSlaveWhileMasterDown: consumers keep reading from
// the slave while the master is down, then return to the master. A
// consumer reads part of N messages and stops taking more; the master
// stops; the consumer goes on, pulling the rest from the slave (its pull to
// the master fails) and committing offsets there, while producers cannot
// send (they never send to a slave). The master comes back: the consumer
// commits its offsets to it and reads from it again — the slave is then
// stopped, and M more messages reach the consumer from the master. Nothing
// is lost; duplicates are counted and logged, and bounded by what one
// consumer holds in memory.
func TestConsumersReadFromSlaveWhileMasterDown(t *testing.T) {
	for _, kind := range []string{"push", "pull"} {
		t.Run(kind, func(t *testing.T) { testSlaveRead(t, kind) })
	}
}

func testSlaveRead(t *testing.T, kind string) {
	const before, after = 200, 60
	topic, group := "sr-"+kind, "sr-"+kind+"-readers"
	c := Start(t, Options{Broker: fastHA(broker.ReplicationAsync)})
	c.CreateTopic(topic, srQueues)
	slave := c.StartSlave(0, 1)
	ns := c.NameServerAddrs()
	ctx := context.Background()

	p, err := client.NewProducer("sr-producers", client.WithNameServers(ns...), client.WithSendTimeout(2*time.Second),
		client.WithRouteRefreshInterval(200*time.Millisecond), client.WithLatencyFaultTolerance(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < before; i++ {
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(fmt.Sprintf("before-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, c.Broker(0), slave.Broker())
	sc := brokerClient(t, slave.Broker().Addr())
	waitTopic(t, sc, topic)

	obs, logs := observer.New(zap.InfoLevel)
	lg := zap.New(zapcore.NewTee(obs, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	got := &received{counts: make(map[string]int)}
	var cons slaveReadConsumer
	if kind == "push" {
		cons = startPushSR(t, ns, lg, group, topic, got)
	} else {
		cons = startPullSR(t, ns, lg, group, topic, got)
	}
	defer func() {
		if err := cons.close(); err != nil {
			t.Errorf("close the consumer: %v", err)
		}
	}()
	if err := Poll(30*time.Second, func() error {
		if n := got.count(); n < srHoldAfter {
			return fmt.Errorf("%d messages consumed", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The master stops while most messages are neither consumed nor
	// fetched (and once the slave has every topic the master made for the
	// consumer); nothing can be produced meanwhile.
	sameTopics(t, brokerClient(t, c.Broker(0).Addr()), sc)
	c.StopBroker(0)
	slaveEnd := slave.Broker().Store().CommitLog().MaxOffset()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = p.Send(sctx, &client.Message{Topic: topic, Body: []byte("while-down")})
	cancel()
	if err == nil {
		t.Fatal("a send succeeded while the master was down")
	}
	if end := slave.Broker().Store().CommitLog().MaxOffset(); end != slaveEnd {
		t.Fatalf("the slave's log grew from %d to %d while its master was down", slaveEnd, end)
	}
	cons.release()
	got.waitAll(t, "before", before)
	if n := logs.FilterMessage(logToSlave).Len(); n == 0 {
		t.Fatal("the consumer did not say it reads from the slave")
	}
	// Offsets are committed to the slave.
	perQueue := int64(before / srQueues)
	if err := Poll(20*time.Second, func() error {
		return committed(sc, group, topic, perQueue)
	}); err != nil {
		t.Fatalf("offsets on the slave: %v", err)
	}

	// The master is back: the consumer commits its offsets to it and reads
	// from it again.
	master := c.StartBroker(0)
	if err := Poll(30*time.Second, func() error {
		if logs.FilterMessage(logToMaster).Len() == 0 {
			return fmt.Errorf("the consumer has not returned to the master")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mc := brokerClient(t, master.Addr())
	if err := Poll(20*time.Second, func() error { return committed(mc, group, topic, perQueue) }); err != nil {
		t.Fatalf("offsets on the master: %v", err)
	}
	// With the slave gone, what follows can only come from the master.
	slave.Stop()
	sendRetrying(t, ctx, p, topic, "after", after)
	got.waitAll(t, "after", after)
	if err := Poll(20*time.Second, func() error {
		return committed(mc, group, topic, int64((before+after)/srQueues))
	}); err != nil {
		// Sends spread over the queues unevenly only after a failure.
		t.Logf("offsets on the master after the last messages: %v", err)
	}
	if n := logs.FilterMessage(logToSlave).Len(); n != 1 {
		t.Errorf("the consumer moved to a slave %d times, want once", n)
	}
	extra, dups := got.duplicates()
	t.Logf("%s consumer: %d deliveries of %d messages, %d duplicates %v", kind, got.count(), before+after, extra, dups)
	if bound := srQueues * (srQueueMax + srPullBatch); extra > bound {
		t.Fatalf("%d duplicate deliveries, more than the %d one consumer holds in memory", extra, bound)
	}
}

// committed checks that the broker behind bc holds offset want for every
// queue of topic for group.
func committed(bc pb.BrokerClient, group, topic string, want int64) error {
	var bad []string
	for q := int32(0); q < srQueues; q++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := bc.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: group, Topic: topic, QueueId: q})
		cancel()
		if err != nil {
			return err
		}
		if r.Offset != want {
			bad = append(bad, fmt.Sprintf("queue %d at %d", q, r.Offset))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("want %d: %s", want, strings.Join(bad, ", "))
	}
	return nil
}

// sameTopics waits until the slave behind sc has the topics of the master
// behind mc.
func sameTopics(t *testing.T, mc, sc pb.BrokerClient) {
	t.Helper()
	names := func(bc pb.BrokerClient) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := bc.GetTopicConfigs(ctx, &pb.GetTopicConfigsRequest{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, tc := range r.Topics {
			out = append(out, tc.Name)
		}
		sort.Strings(out)
		return out, nil
	}
	if err := Poll(20*time.Second, func() error {
		m, err := names(mc)
		if err != nil {
			return err
		}
		s, err := names(sc)
		if err != nil {
			return err
		}
		if strings.Join(m, ",") != strings.Join(s, ",") {
			return fmt.Errorf("master has topics %v, slave %v", m, s)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestConsumerReadsFromSlaveWhileKilledMasterIsRouted: the master is a
// real process killed with SIGKILL, so the NameServer keeps routing it
// (gossip is off and its heartbeat timeout has not passed). The consumer's
// pull to it fails, the consumer reads the rest from the slave and, while
// the dead master stays in the route, keeps failing to reach it and stays
// on the slave. Restarted (on a new address), the master takes the
// consumer back; the slave is then killed and more messages come from the
// master. Nothing is lost.
func TestConsumerReadsFromSlaveWhileKilledMasterIsRouted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const before, after = 200, 40
	topic, group := "srk", "srk-readers"
	ns := StartProc(t, "bolide-nameserver", "--listen", "127.0.0.1:0", "--gossip", "off")
	m := StartBrokerProc(t, BrokerProcOptions{NameServer: ns.Addr, Name: "broker-a", ID: 0})
	s := StartBrokerProc(t, BrokerProcOptions{NameServer: ns.Addr, Name: "broker-a", ID: 1})
	createTopicOn(t, m.Addr, topic, srQueues)
	routed := func(want map[int64]string) error {
		r, err := route(t, ns.Addr, topic)
		if err != nil {
			return err
		}
		if len(r.BrokerDatas) != 1 {
			return fmt.Errorf("route %v", r)
		}
		for id, addr := range want {
			if got := r.BrokerDatas[0].BrokerAddrs[id]; got != addr {
				return fmt.Errorf("broker %d at %q, want %q", id, got, addr)
			}
		}
		return nil
	}
	if err := Poll(20*time.Second, func() error { return routed(map[int64]string{0: m.Addr, 1: s.Addr}) }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := client.NewProducer("srk-producers", client.WithNameServers(ns.Addr), client.WithSendTimeout(2*time.Second),
		client.WithRouteRefreshInterval(200*time.Millisecond), client.WithLatencyFaultTolerance(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < before; i++ {
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(fmt.Sprintf("before-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	mc, sc := brokerClient(t, m.Addr), brokerClient(t, s.Addr)
	obs, logs := observer.New(zap.InfoLevel)
	lg := zap.New(zapcore.NewTee(obs, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	got := &received{counts: make(map[string]int)}
	cons := startPushSR(t, []string{ns.Addr}, lg, group, topic, got)
	defer func() {
		if err := cons.close(); err != nil {
			t.Errorf("close the consumer: %v", err)
		}
	}()
	if err := Poll(30*time.Second, func() error {
		if n := got.count(); n < srHoldAfter {
			return fmt.Errorf("%d messages consumed", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sameTopics(t, mc, sc)
	if err := Poll(20*time.Second, func() error {
		mi, err := BrokerInfo(m.Addr)
		if err != nil {
			return err
		}
		si, err := BrokerInfo(s.Addr)
		if err != nil {
			return err
		}
		if mi.CommitLogMaxOffset != si.CommitLogMaxOffset {
			return fmt.Errorf("slave at %d, master at %d", si.CommitLogMaxOffset, mi.CommitLogMaxOffset)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	deadAddr := m.Addr
	m.Kill()
	cons.release()
	got.waitAll(t, "before", before)
	if err := routed(map[int64]string{0: deadAddr}); err != nil {
		t.Fatalf("the killed master is no longer routed (the test needs it): %v", err)
	}
	if logs.FilterMessage(logToSlave).Len() == 0 {
		t.Fatal("the consumer did not say it reads from the slave")
	}
	if n := logs.FilterMessage(logToMaster).Len(); n != 0 {
		t.Fatalf("the consumer returned to a dead master %d times", n)
	}
	perQueue := int64(before / srQueues)
	if err := Poll(20*time.Second, func() error { return committed(sc, group, topic, perQueue) }); err != nil {
		t.Fatalf("offsets on the slave: %v", err)
	}

	m.Restart()
	if err := Poll(30*time.Second, func() error {
		if logs.FilterMessage(logToMaster).Len() == 0 {
			return fmt.Errorf("the consumer has not returned to the master")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mc = brokerClient(t, m.Addr)
	if err := Poll(20*time.Second, func() error { return committed(mc, group, topic, perQueue) }); err != nil {
		t.Fatalf("offsets on the master: %v", err)
	}
	s.Kill()
	sendRetrying(t, ctx, p, topic, "after", after)
	got.waitAll(t, "after", after)
	if n := logs.FilterMessage(logToSlave).Len(); n != 1 {
		t.Errorf("the consumer moved to a slave %d times, want once", n)
	}
	extra, dups := got.duplicates()
	t.Logf("%d deliveries of %d messages, %d duplicates %v", got.count(), before+after, extra, dups)
	if bound := srQueues * (srQueueMax + srPullBatch); extra > bound {
		t.Fatalf("%d duplicate deliveries, more than the %d one consumer holds in memory", extra, bound)
	}
}

// sendRetrying sends n messages "<prefix>-<i>" to topic, each retried for
// up to 20 s (routes may still point at a broker that just went away).
func sendRetrying(t *testing.T, ctx context.Context, p *client.Producer, topic, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("%s-%d", prefix, i)
		if err := Poll(20*time.Second, func() error {
			_, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)})
			return err
		}); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
}
