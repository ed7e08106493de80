package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

// svcRig is a controller rig (three replicas, sync replication) with a
// producer and a push consumer of ctlTopic that records its deliveries.
// Bodies starting "retry-" fail until their copy comes back from the
// retry topic; bodies starting "dlq-" always fail and end in the DLQ
// (one reconsume).
type svcRig struct {
	*ctlRig
	p     *client.Producer
	rec   *dpRecorder
	group string
}

func startSvcRig(t *testing.T) *svcRig {
	t.Helper()
	r := startCtlRig(t, 3, broker.ReplicationSync, func(o *broker.Options) {
		// Level 3 (retries) waits 3 s so that retries are pending at the
		// kill.
		o.Delay.Levels = "1s 4s 3s"
		o.Delay.OffsetPersistInterval = 100 * time.Millisecond
		// Registrations go through the controller's proxy too: a broker
		// cut off from the controllers is cut off from the NameServer,
		// and no refused registration fences it.
		o.NameServers = o.Replication.ControllerAddrs
	})
	m := r.master(0)
	r.waitSSS(m, 3)
	r.sendN(m, 2, "init") // creates the topic
	s := &svcRig{ctlRig: r, rec: &dpRecorder{got: make(map[string][]dpGot)}, group: "svc-readers"}
	ns := []string{r.ns.Addr()}
	ctx := context.Background()
	lg := zap.NewNop()
	if testing.Verbose() {
		lg = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	p, err := client.NewProducer("svc-producers", client.WithNameServers(ns...), client.WithLogger(lg),
		client.WithSendTimeout(3*time.Second), client.WithRouteRefreshInterval(200*time.Millisecond),
		client.WithLatencyFaultTolerance(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	s.p = p
	cons, err := client.NewPushConsumer(s.group, client.WithNameServers(ns...), client.WithLogger(lg),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithRouteRefreshInterval(200*time.Millisecond),
		client.WithMasterRetryInterval(300*time.Millisecond), client.WithCommitInterval(200*time.Millisecond),
		client.WithLongPollTimeout(time.Second), client.WithRPCTimeout(2*time.Second), client.WithRebalanceInterval(time.Second),
		client.WithMaxReconsumeTimes(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Subscribe(ctlTopic, "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		res := client.ConsumeSuccess
		for _, m := range msgs {
			failed := s.rec.add(m)
			b := string(m.Body)
			if strings.HasPrefix(b, "dlq-") || (strings.HasPrefix(b, "retry-") && failed == 0) {
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
	t.Cleanup(func() { _ = cons.Close() })
	return s
}

// send sends a message (retrying across a failover) and returns its id.
func (s *svcRig) send(body string, opts ...client.SendOption) string {
	s.t.Helper()
	var id string
	if err := Poll(30*time.Second, func() error {
		res, err := s.p.Send(context.Background(), &client.Message{Topic: ctlTopic, Body: []byte(body)}, opts...)
		if err != nil {
			return err
		}
		id = res.MsgID
		return nil
	}); err != nil {
		s.t.Fatalf("send %s: %v", body, err)
	}
	return id
}

// stored counts the bodies in queues 0..queues-1 of a topic of replica i.
func (s *svcRig) stored(i int, topic string, queues int32) map[string]int {
	s.t.Helper()
	out := map[string]int{}
	bc := brokerClient(s.t, s.broker(i).Addr())
	for q := range queues {
		for _, m := range dpPullAll(s.t, bc, topic, q) {
			out[string(m.Body)]++
		}
	}
	return out
}

// inheritedLevel waits until every slave took the master's delivery
// progress of a delay level up to off (its metadata sync).
func (s *svcRig) waitSlavesProgress(m, level int, off int64) {
	s.t.Helper()
	if err := Poll(20*time.Second, func() error {
		for i := range 3 {
			if i == m {
				continue
			}
			if got := delayOffsetOf(s.broker(i).Options().StoreDir, level); got < off {
				return fmt.Errorf("replica %d: level %d offset %d, want %d", i+1, level, got, off)
			}
		}
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
}

// The master is killed while delay-level and timer messages are pending
// (others delivered) and retries wait in the retry delay level (one
// message heading for the DLQ): the new master delivers every pending one,
// none early, the retries and the dead letter; what the old master had
// delivered before its progress reached the slaves is not delivered again;
// the old master restarts as a slave, delivers nothing and ends with the
// new master's log, and messages delayed after its return are stored once.
func TestControllerFailoverDelayedAndRetries(t *testing.T) {
	s := startSvcRig(t)
	m := s.master(0)
	epoch := s.broker(m).Epoch()

	// Delivered before the kill, with the slaves holding the progress.
	start := time.Now()
	var early []string
	for i := range 4 {
		b := fmt.Sprint("early-level-", i)
		s.send(b, client.WithDelayLevel(1))
		early = append(early, b)
		b = fmt.Sprint("early-timer-", i)
		s.send(b, client.WithDeliverAt(start.Add(1200*time.Millisecond)))
		early = append(early, b)
	}
	s.rec.waitFor(t, 1, early...)
	s.waitSlavesProgress(m, 1, 4)
	// The timer progress too: the slaves' inherited progress passes the
	// early timers' due time.
	if err := Poll(20*time.Second, func() error {
		for i := range 3 {
			if i == m {
				continue
			}
			ok := false
			for _, pr := range s.broker(i).DelayEngine().Inherited() {
				ok = ok || pr.DueBeforeMS > start.Add(1200*time.Millisecond).UnixMilli()
			}
			if !ok {
				return fmt.Errorf("replica %d's timer progress %+v", i+1, s.broker(i).DelayEngine().Inherited())
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Pending at the kill: level 2 (4 s), timers 4–5 s ahead, one of them
	// cancelled, retries waiting 3 s in level 3, one dead letter to be.
	late := time.Now()
	var pending []string
	for i := range 4 {
		b := fmt.Sprint("late-level-", i)
		s.send(b, client.WithDelayLevel(2))
		pending = append(pending, b)
		b = fmt.Sprint("late-timer-", i)
		s.send(b, client.WithDeliverAt(late.Add(4*time.Second+time.Duration(i)*200*time.Millisecond)))
		pending = append(pending, b)
	}
	cancelled := s.send("late-cancelled", client.WithDeliverAt(late.Add(4500*time.Millisecond)))
	if err := s.p.CancelDelayed(context.Background(), ctlTopic, cancelled); err != nil {
		t.Fatal(err)
	}
	var retries []string
	for i := range 3 {
		b := fmt.Sprint("retry-", i)
		s.send(b)
		retries = append(retries, b)
	}
	s.send("dlq-0")
	s.rec.waitFor(t, 1, append(retries, "dlq-0")...) // failed once: sent back
	caughtUpAll(t, s.ctlRig, m)
	s.kill(m)
	killed := time.Now()
	if killed.Sub(late) > 4*time.Second {
		t.Logf("the kill came %v after the late sends: the old master may have delivered some", killed.Sub(late).Round(time.Millisecond))
	}
	n := s.master(epoch)
	t.Logf("replica %d is master at epoch %d, %v after the kill", n+1, s.broker(n).Epoch(), time.Since(killed).Round(time.Millisecond))

	s.rec.waitFor(t, 1, pending...)
	if err := Poll(30*time.Second, func() error {
		for _, b := range retries {
			if len(s.rec.retried(b)) == 0 {
				return fmt.Errorf("%s did not come back from the retry topic", b)
			}
		}
		if s.stored(n, message.DLQTopic(s.group), 1)["dlq-0"] == 0 {
			return fmt.Errorf("dlq-0 not in the DLQ: deliveries %+v", s.rec.deliveries("dlq-0"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The old master returns as a slave and runs no master-only service.
	old := s.start(m)
	s.waitSSS(n, 3)
	if old.Role() != broker.RoleSlave {
		t.Fatalf("the old master restarted as %s", old.Role())
	}
	now := time.Now()
	var after []string
	for i := range 3 {
		b := fmt.Sprint("after-level-", i)
		s.send(b, client.WithDelayLevel(1))
		after = append(after, b)
		b = fmt.Sprint("after-timer-", i)
		s.send(b, client.WithDeliverAt(now.Add(1500*time.Millisecond)))
		after = append(after, b)
	}
	s.rec.waitFor(t, 1, after...)
	// A slave answers that it does not deliver.
	if _, st, err := old.DelayStatus(); err == nil && st != nil && st.Active {
		t.Fatalf("the old master's timer engine delivers as a slave: %+v", st)
	}
	caughtUp(t, s.broker(n), old)
	sameCommitLog(t, s.broker(n), old)

	// What the topic holds on the new master.
	stored := s.stored(n, ctlTopic, 2)
	var dups []string
	for _, b := range append(append(append([]string{}, early...), pending...), after...) {
		switch c := stored[b]; {
		case c == 0:
			t.Errorf("%s is not in the topic", b)
		case c > 1 && strings.HasPrefix(b, "late-"):
			dups = append(dups, b) // due before the kill: see below
		case c > 1:
			t.Errorf("%s stored %d times", b, c)
		}
	}
	if stored["late-cancelled"] != 0 || len(s.rec.deliveries("late-cancelled")) != 0 {
		t.Error("the cancelled timer message was delivered")
	}
	for _, b := range dups {
		if !late.Add(4 * time.Second).Before(killed) {
			t.Errorf("%s stored twice though it was not due before the kill", b)
		}
	}
	if c := s.stored(n, message.DLQTopic(s.group), 1)["dlq-0"]; c != 1 {
		t.Errorf("dlq-0 is %d times in the DLQ", c)
	}
	for _, b := range retries {
		if c := len(s.rec.retried(b)); c != 1 {
			t.Errorf("%s came back %d times from the retry topic", b, c)
		}
	}
	sort.Strings(dups)
	t.Logf("%d delayed messages across the kill; delivered again by the new master: %v", len(stored), dups)
}

// caughtUpAll waits until every other running replica holds master m's log.
func caughtUpAll(t *testing.T, r *ctlRig, m int) {
	t.Helper()
	for i := range 3 {
		if i != m && r.broker(i) != nil {
			caughtUp(t, r.broker(m), r.broker(i))
		}
	}
}

// A master cut off from the controllers and its slaves stops delivering
// delayed messages once its write lease runs out: messages that come due
// while it is isolated are delivered by the new master only, and the old
// one stores nothing more; reconnected, it follows the new master.
func TestControllerDeposedMasterStopsDelivering(t *testing.T) {
	s := startSvcRig(t)
	m := s.master(0)
	epoch := s.broker(m).Epoch()
	due := time.Now().Add(3 * time.Second)
	var pending []string
	for i := range 4 {
		b := fmt.Sprint("cut-timer-", i)
		s.send(b, client.WithDeliverAt(due.Add(time.Duration(i)*100*time.Millisecond)))
		pending = append(pending, b)
		b = fmt.Sprint("cut-level-", i)
		s.send(b, client.WithDelayLevel(2))
		pending = append(pending, b)
	}
	caughtUpAll(t, s.ctlRig, m)
	s.ctl[m].Blackhole(true)
	s.ha[m].Blackhole(true)
	old := s.broker(m)
	if err := Poll(10*time.Second, func() error {
		if err := old.Replication().CheckWritable(); err == nil {
			return fmt.Errorf("the isolated master still holds its lease")
		}
		if _, st, _ := old.DelayStatus(); st != nil && st.Active {
			return fmt.Errorf("the isolated master's timer engine is active")
		}
		if old.Role() != broker.RoleMaster {
			return fmt.Errorf("the isolated master is %s: it did not stop under its lease alone", old.Role())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(due) {
		t.Fatalf("the lease ran out after the messages came due (%v)", time.Since(due))
	}
	end := old.Store().CommitLog().MaxOffset()
	n := s.master(epoch)
	s.rec.waitFor(t, 1, pending...)
	if got := old.Store().CommitLog().MaxOffset(); got != end {
		t.Fatalf("the deposed master stored %d bytes after its lease ran out", got-end)
	}

	s.ha[m].Blackhole(false)
	s.ha[m].Cut()
	s.ctl[m].Blackhole(false)
	s.ctl[m].Cut()
	if err := Poll(15*time.Second, func() error {
		if old.Role() != broker.RoleSlave {
			return fmt.Errorf("old master is %s", old.Role())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.waitSSS(n, 3)
	caughtUp(t, s.broker(n), old)
	sameCommitLog(t, s.broker(n), old)
	stored := s.stored(n, ctlTopic, 2)
	for _, b := range pending {
		if stored[b] != 1 {
			t.Errorf("%s stored %d times on the new master", b, stored[b])
		}
	}
}
