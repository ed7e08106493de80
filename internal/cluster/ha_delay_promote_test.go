package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// dpGot is one delivery to the consumer.
type dpGot struct {
	at        time.Time
	stored    time.Time
	outMS     int64 // TIMER_OUT_MS, 0 for delay levels
	reconsume int32
	// failedMS is the broker's last failure time of a retry copy (0: not
	// a copy from the retry topic).
	failedMS int64
}

// dpRecorder records the consumer's deliveries by body.
type dpRecorder struct {
	mu  sync.Mutex
	got map[string][]dpGot
}

func (r *dpRecorder) add(m *client.MessageExt) (failedMS int64) {
	out, _ := strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
	failed, _ := strconv.ParseInt(m.Properties[retry.PropertyLastFailureMS], 10, 64)
	r.mu.Lock()
	defer r.mu.Unlock()
	b := string(m.Body)
	r.got[b] = append(r.got[b], dpGot{at: time.Now(), stored: m.StoreTimestamp, outMS: out, reconsume: m.ReconsumeTimes, failedMS: failed})
	return failed
}

// retried returns the deliveries of body that came from the retry topic.
func (r *dpRecorder) retried(body string) []dpGot {
	var out []dpGot
	for _, g := range r.deliveries(body) {
		if g.failedMS > 0 {
			out = append(out, g)
		}
	}
	return out
}

func (r *dpRecorder) deliveries(body string) []dpGot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]dpGot(nil), r.got[body]...)
}

// waitFor waits until every body was received (at least n times).
func (r *dpRecorder) waitFor(t *testing.T, n int, bodies ...string) {
	t.Helper()
	if err := Poll(60*time.Second, func() error {
		var missing []string
		for _, b := range bodies {
			if len(r.deliveries(b)) < n {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not received %d time(s): %v", n, missing)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// dpExpect is when a message may be delivered: not before notBefore; a
// timer message carries its due time (TIMER_OUT_MS) exactly.
type dpExpect struct {
	notBefore time.Time
	timerMS   int64
}

// TestPromotedSlaveDeliversDelayed: a master delivers delay-level (1 s)
// and timer messages; then, while delay-level (5 s) and timer messages
// (5–6 s ahead, one of them cancelled) are pending, it stops and its slave
// is promoted. A consumer receives every message the master did not
// deliver from the promoted broker, none before its due time, the
// cancelled one never; a message the consumer asks to retry comes back
// through the promoted broker's delay level; the promoted broker restarted
// with messages pending keeps delivering them. In the topic, a message is
// stored twice only if the old master could have delivered it before it
// stopped (its delivery progress had not reached the slave): with the
// slave caught up on the master's progress before the late messages are
// sent, none is.
func TestPromotedSlaveDeliversDelayed(t *testing.T) {
	const topic, group, queues = "dp", "dp-readers", 2
	c := Start(t, Options{Broker: func(o *broker.Options) {
		fastHA(broker.ReplicationSync)(o)
		o.Replication.SlaveTimeout = 3 * time.Second
		// Level 3 (a first retry) waits 2 s rather than 10 s.
		o.Delay.Levels = "1s 5s 2s"
		o.Delay.OffsetPersistInterval = 100 * time.Millisecond
	}})
	c.CreateTopic(topic, queues)
	slave := c.StartSlave(0, 1, func(o *broker.Options) {
		// Promoted, it has no slave of its own: it acknowledges alone.
		o.Replication.Mode = broker.ReplicationAsync
	})
	waitInSync(t, c.Broker(0), 1)
	ns := c.NameServerAddrs()
	ctx := context.Background()
	lg := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	p, err := client.NewProducer("dp-producers", client.WithNameServers(ns...), client.WithLogger(lg),
		client.WithSendTimeout(3*time.Second), client.WithRouteRefreshInterval(200*time.Millisecond),
		client.WithLatencyFaultTolerance(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	rec := &dpRecorder{got: make(map[string][]dpGot)}
	cons, err := client.NewPushConsumer(group, client.WithNameServers(ns...), client.WithLogger(lg),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithRouteRefreshInterval(200*time.Millisecond),
		client.WithMasterRetryInterval(300*time.Millisecond), client.WithCommitInterval(200*time.Millisecond),
		client.WithLongPollTimeout(time.Second), client.WithRPCTimeout(2*time.Second), client.WithRebalanceInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Subscribe(topic, "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		// retry-me fails until its copy comes back from the retry topic
		// (a failed send-back is retried locally first).
		res := client.ConsumeSuccess
		for _, m := range msgs {
			if failed := rec.add(m); string(m.Body) == "retry-me" && failed == 0 {
				res = client.ConsumeRetryLater
			}
		}
		return res
	})); err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cons.Close(); err != nil {
			t.Errorf("close the consumer: %v", err)
		}
	}()

	expect := map[string]dpExpect{}
	uniq := map[string]string{}
	send := func(body string, e dpExpect, opts ...client.SendOption) {
		t.Helper()
		var res *client.SendResult
		if err := Poll(30*time.Second, func() error {
			var err error
			res, err = p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)}, opts...)
			return err
		}); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		expect[body] = e
		uniq[body] = res.MsgID
	}
	level := func(body string, n int, d time.Duration) {
		send(body, dpExpect{notBefore: time.Now().Truncate(time.Millisecond).Add(d)}, client.WithDelayLevel(n))
	}
	timer := func(body string, at time.Time) {
		at = at.Truncate(time.Millisecond)
		send(body, dpExpect{notBefore: at, timerMS: at.UnixMilli()}, client.WithDeliverAt(at))
	}
	cancel := func(body string) {
		t.Helper()
		if err := p.CancelDelayed(ctx, topic, uniq[body]); err != nil {
			t.Fatalf("cancel %s: %v", body, err)
		}
		delete(expect, body)
	}
	bodies := func(prefix string) []string {
		var out []string
		for b := range expect {
			if strings.HasPrefix(b, prefix) {
				out = append(out, b)
			}
		}
		sort.Strings(out)
		return out
	}

	// The master delivers the early messages, and the slave takes its
	// progress.
	start := time.Now()
	for i := 0; i < 5; i++ {
		level(fmt.Sprint("early-level-", i), 1, time.Second)
		timer(fmt.Sprint("early-timer-", i), start.Add(1500*time.Millisecond+time.Duration(i)*100*time.Millisecond))
	}
	rec.waitFor(t, 1, bodies("early-")...)
	sb := slave.Broker()
	lastEarlyDue := expect["early-timer-4"].timerMS
	if err := Poll(20*time.Second, func() error {
		if off := delayOffsetOf(sb.Options().StoreDir, 1); off < 5 {
			return fmt.Errorf("the slave's level 1 offset is %d", off)
		}
		for _, pr := range sb.DelayEngine().Inherited() {
			if pr.DueBeforeMS > lastEarlyDue {
				return nil
			}
		}
		return fmt.Errorf("the slave's timer progress %+v does not pass %d", sb.DelayEngine().Inherited(), lastEarlyDue)
	}); err != nil {
		t.Fatal(err)
	}

	// Late messages, pending when the master stops.
	late := time.Now()
	for i := 0; i < 5; i++ {
		level(fmt.Sprint("late-level-", i), 2, 5*time.Second)
		timer(fmt.Sprint("late-timer-", i), late.Add(5500*time.Millisecond+time.Duration(i)*200*time.Millisecond))
	}
	timer("late-cancelled", late.Add(5900*time.Millisecond)) // due before late-timer-4
	cancel("late-cancelled")
	caughtUp(t, c.Broker(0), sb)
	c.StopBroker(0)
	stopped := time.Now()
	if stopped.Sub(late) > 5*time.Second {
		t.Logf("the master took %v to stop: it may have delivered late messages", stopped.Sub(late).Round(time.Millisecond))
	}
	conn := dialT(t, sb.Addr())
	resp, err := pb.NewBrokerHAClient(conn).Promote(ctx, &pb.PromoteRequest{BrokerName: "broker-a"})
	if err != nil || wire.FromStatus(resp.Status) != nil || !resp.Registered {
		t.Fatalf("promote: %v %v %+v", err, resp.GetStatus(), resp)
	}
	send("retry-me", dpExpect{notBefore: time.Now().Truncate(time.Millisecond)})
	rec.waitFor(t, 1, bodies("late-")...)
	if err := Poll(60*time.Second, func() error {
		if len(rec.retried("retry-me")) == 0 {
			return fmt.Errorf("retry-me did not come back from the retry topic: %+v", rec.deliveries("retry-me"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Restarted with messages pending, the promoted broker delivers them.
	level("after-level-1", 1, time.Second)
	level("after-level-2", 2, 5*time.Second)
	now := time.Now()
	timer("after-cancelled", now.Add(3*time.Second))
	timer("after-timer", now.Add(3500*time.Millisecond)) // due after the cancelled one
	cancel("after-cancelled")
	slave.Stop()
	sb = slave.Start()
	if sb.Role() != broker.RoleMaster {
		t.Fatalf("the promoted broker restarted as %s", sb.Role())
	}
	rec.waitFor(t, 1, bodies("after-")...)

	// Never early, never cancelled; the retry came back through level 3.
	for body, e := range expect {
		for _, g := range rec.deliveries(body) {
			if g.reconsume > 0 {
				continue // checked below
			}
			if g.stored.Before(e.notBefore) || g.at.Before(e.notBefore) {
				t.Errorf("%s stored at %v, received at %v, due %v: early", body, g.stored, g.at, e.notBefore)
			}
			if e.timerMS != 0 && g.outMS != e.timerMS {
				t.Errorf("%s delivered with TIMER_OUT_MS %d, sent for %d", body, g.outMS, e.timerMS)
			}
		}
	}
	for _, b := range []string{"late-cancelled", "after-cancelled"} {
		if n := len(rec.deliveries(b)); n != 0 {
			t.Errorf("cancelled %s delivered %d times", b, n)
		}
	}
	// Level 3 + reconsume times, capped at the highest level (3: 2 s).
	for _, g := range rec.retried("retry-me") {
		if due := time.UnixMilli(g.failedMS + 2000); g.stored.Before(due) || g.reconsume < 1 {
			t.Errorf("retry copy stored at %v, due %v (sent back at %v), reconsume times %d",
				g.stored, due, time.UnixMilli(g.failedMS), g.reconsume)
		}
	}

	// What the topic holds: each message once, except a late one the old
	// master may have delivered after its progress last reached the slave
	// (the early ones are covered by the progress the slave took).
	stored := map[string]int{}
	bc := brokerClient(t, sb.Addr())
	for q := int32(0); q < queues; q++ {
		for _, m := range dpPullAll(t, bc, topic, q) {
			stored[string(m.Body)]++
		}
	}
	var dups []string
	for body, e := range expect {
		switch n := stored[body]; {
		case n == 0:
			t.Errorf("%s is not in the topic", body)
		case n == 2 && strings.HasPrefix(body, "late-") && e.notBefore.Before(stopped):
			dups = append(dups, body) // delivered by the old master, maybe again by the new one
		case n > 1:
			t.Errorf("%s stored %d times (due %v, the master stopped at %v)", body, n, e.notBefore, stopped)
		}
	}
	for _, b := range []string{"late-cancelled", "after-cancelled"} {
		if stored[b] != 0 {
			t.Errorf("cancelled %s stored in the topic", b)
		}
	}
	if len(stored) != len(expect) {
		t.Errorf("the topic holds %d distinct messages, %d expected", len(stored), len(expect))
	}
	t.Logf("%d messages delivered across the promotion and a restart; duplicates of messages due before the master stopped: %v",
		len(expect), dups)
}

// delayOffsetOf reads a level's offset from a broker's
// config/delayOffset.json (-1 when it cannot).
func delayOffsetOf(storeDir string, level int) int64 {
	b, err := os.ReadFile(filepath.Join(storeDir, "config", "delayOffset.json"))
	if err != nil {
		return -1
	}
	var f struct {
		OffsetTable map[string]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return -1
	}
	if v, ok := f.OffsetTable[strconv.Itoa(level)]; ok {
		return v
	}
	return -1
}

// dpPullAll reads a queue from its start.
func dpPullAll(t *testing.T, bc pb.BrokerClient, topic string, q int32) []*message.Ext {
	t.Helper()
	var out []*message.Ext
	off := int64(0)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := bc.Pull(ctx, &pb.PullRequest{Topic: topic, QueueId: q, Offset: off, MaxMessages: 256, MaxBytes: 4 << 20, CommitOffset: -1})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.FromStatus(r.Status); err != nil {
			t.Fatalf("pull %s/%d at %d: %v", topic, q, off, err)
		}
		if r.PullStatus != pb.PullStatus_FOUND {
			return out
		}
		for _, rec := range r.Records {
			m, err := message.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		off = r.NextOffset
	}
}
