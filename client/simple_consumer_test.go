package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

func (e *env) simple(group string, subs map[string]string, await time.Duration) *SimpleConsumer {
	e.t.Helper()
	c, err := NewSimpleConsumer(group, subs, await, e.shared())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// lateTimerContext has a deadline but is never done, like a context whose
// deadline has passed before its timer fired.
type lateTimerContext struct {
	context.Context
	deadline time.Time
}

func (c lateTimerContext) Deadline() (time.Time, bool) { return c.deadline, true }

// receiveUntil receives (and hands each message to fn) until done holds.
func (e *env) receiveUntil(c *SimpleConsumer, invisible time.Duration, fn func(*MessageView), done func() error) {
	e.t.Helper()
	e.receiveUntilTolerating(c, invisible, fn, done, func(error) bool { return false })
}

// receiveUntilTolerating is receiveUntil, going on after a failed receive
// when tolerate(err).
func (e *env) receiveUntilTolerating(c *SimpleConsumer, invisible time.Duration, fn func(*MessageView), done func() error, tolerate func(error) bool) {
	e.t.Helper()
	e.waitFor(30*time.Second, "receive", func() error {
		if err := done(); err == nil {
			return nil
		}
		msgs, err := c.Receive(context.Background(), 16, invisible)
		if err != nil && tolerate(err) {
			return err
		}
		if err != nil {
			e.t.Fatalf("receive: %v", err)
		}
		for _, m := range msgs {
			fn(m)
		}
		return done()
	})
}

// TestSimpleConsumerAcrossBrokers: a simple consumer receives the messages
// of a topic spread over two broker groups, only those its tag expression
// selects, each once while it acknowledges them; then there is nothing
// left to receive.
func TestSimpleConsumerAcrossBrokers(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	p := e.producer()
	res := e.sendN(p, topic, 20, func(i int) *Message {
		return &Message{Topic: topic, Tag: []string{"a", "b"}[i/2%2], Keys: []string{fmt.Sprint("k", i)}, Body: []byte(fmt.Sprint("m", i))}
	})
	want := map[string]bool{}
	brokers := map[string]bool{}
	for i, r := range res {
		if i/2%2 == 0 {
			want[r.MsgID] = true
			brokers[r.BrokerName] = true
		}
	}
	if len(brokers) != 2 {
		t.Fatalf("the tag-a messages went to %v: the test needs both broker groups", brokers)
	}
	c := e.simple("simple-g", map[string]string{topic: "a"}, 500*time.Millisecond)
	got := map[string]int{}
	seenBrokers := map[string]bool{}
	var views []*MessageView
	e.receiveUntil(c, 30*time.Second, func(m *MessageView) {
		if m.Tag != "a" || m.DeliveryAttempt != 1 || m.ReceiptHandle == "" || !m.VisibleAt.After(time.Now()) {
			t.Errorf("received %s: tag %q attempt %d handle %q visible at %v", m.MsgID, m.Tag, m.DeliveryAttempt, m.ReceiptHandle, m.VisibleAt)
		}
		got[m.MsgID]++
		seenBrokers[m.BrokerName] = true
		views = append(views, m)
	}, func() error {
		if len(got) < len(want) {
			return fmt.Errorf("%d of %d messages", len(got), len(want))
		}
		return nil
	})
	for id, n := range got {
		if !want[id] || n != 1 {
			t.Errorf("message %s received %d times (wanted: %v)", id, n, want[id])
		}
	}
	if len(seenBrokers) != 2 {
		t.Errorf("received from %v only", seenBrokers)
	}
	// One Ack for all (a request per broker group); acknowledged twice,
	// each handle is refused.
	if err := c.Ack(context.Background(), views...); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := c.Ack(context.Background(), views[:2]...); !errors.Is(err, ErrInvalidReceiptHandle) ||
		!strings.Contains(err.Error(), views[0].MsgID) || !strings.Contains(err.Error(), views[1].MsgID) {
		t.Fatalf("second ack: %v", err)
	}
	// Acknowledged: nothing comes again.
	if msgs, err := c.Receive(context.Background(), 16, 30*time.Second); err != nil || len(msgs) != 0 {
		t.Fatalf("after acking everything: %d messages, %v", len(msgs), err)
	}
	// A deadline that has passed while its timer has not fired yet (a busy
	// machine) ends a receive as that deadline, not as brokers that did
	// not answer: gRPC refuses such a call with its own DeadlineExceeded.
	late := lateTimerContext{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	if msgs, err := c.Receive(late, 16, 30*time.Second); len(msgs) != 0 || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBrokerUnreachable) {
		t.Fatalf("receive past a deadline whose timer is late: %d messages, %v", len(msgs), err)
	}
	// An acknowledged handle is no longer valid.
	var m MessageView
	m.Topic, m.BrokerName, m.ReceiptHandle = topic, res[0].BrokerName, "not-a-handle"
	if err := c.Ack(context.Background(), &m); !errors.Is(err, ErrInvalidReceiptHandle) {
		t.Fatalf("ack of a bad handle: %v", err)
	}
	if _, err := c.Receive(context.Background(), 1, 13*time.Hour); !errors.Is(err, ErrIllegalInvisibleTime) {
		t.Fatalf("receive invisible 13h: %v", err)
	}
}

// TestSimpleConsumerRedelivery: a message not acknowledged comes again
// when its invisibility runs out, with the next delivery attempt; a
// changed invisible duration replaces the receipt handle; a nacked
// message comes again after the group's backoff; after the group's
// maximum delivery attempts it is in %DLQ%group.
func TestSimpleConsumerRedelivery(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	ctx := context.Background()
	const group = "simple-redeliver"
	if err := e.admin.CreateSubscriptionGroup(ctx, SubscriptionGroupSpec{Name: group, MaxDeliveryAttempts: 4,
		RetryBackoff: []time.Duration{200 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	p := e.producer()
	sent := e.sendN(p, topic, 1, nil)[0]
	c := e.simple(group, map[string]string{topic: "*"}, 500*time.Millisecond)

	var first *MessageView
	e.receiveUntil(c, time.Second, func(m *MessageView) { first = m }, func() error {
		if first == nil {
			return errors.New("nothing yet")
		}
		return nil
	})
	if first.MsgID != sent.MsgID || first.DeliveryAttempt != 1 {
		t.Fatalf("first delivery: %s attempt %d", first.MsgID, first.DeliveryAttempt)
	}
	// Not acknowledged: it comes again once its second is over.
	var second *MessageView
	e.receiveUntil(c, time.Minute, func(m *MessageView) { second = m }, func() error {
		if second == nil {
			return errors.New("not redelivered yet")
		}
		return nil
	})
	if second.MsgID != sent.MsgID || second.DeliveryAttempt != 2 {
		t.Fatalf("second delivery: %s attempt %d", second.MsgID, second.DeliveryAttempt)
	}
	if err := c.Ack(ctx, first); !errors.Is(err, ErrInvalidReceiptHandle) {
		t.Fatalf("ack with the expired first handle: %v", err)
	}
	old := *second
	if err := c.ChangeInvisibleDuration(ctx, second, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if second.ReceiptHandle == old.ReceiptHandle || !second.VisibleAt.After(old.VisibleAt) {
		t.Fatalf("change invisible duration: handle %q (was %q), visible at %v (was %v)",
			second.ReceiptHandle, old.ReceiptHandle, second.VisibleAt, old.VisibleAt)
	}
	if err := c.Ack(ctx, &old); !errors.Is(err, ErrInvalidReceiptHandle) {
		t.Fatalf("ack with the replaced handle: %v", err)
	}
	// Nacked: back after the group's backoff, twice, then dead-lettered
	// (four attempts).
	m := second
	for attempt := int32(3); attempt <= 4; attempt++ {
		if _, err := c.Nack(ctx, m); err != nil {
			t.Fatalf("nack attempt %d: %v", m.DeliveryAttempt, err)
		}
		var next *MessageView
		e.receiveUntil(c, time.Minute, func(v *MessageView) { next = v }, func() error {
			if next == nil {
				return errors.New("not back yet")
			}
			return nil
		})
		if next.MsgID != sent.MsgID || next.DeliveryAttempt != attempt {
			t.Fatalf("after a nack: %s attempt %d, want attempt %d", next.MsgID, next.DeliveryAttempt, attempt)
		}
		m = next
	}
	if _, err := c.Nack(ctx, m); err != nil {
		t.Fatalf("last nack: %v", err)
	}
	// The broker dead-letters the message when it would hand it out a
	// fifth time: keep receiving (nothing) until it has.
	e.waitFor(30*time.Second, "dead letter", func() error {
		if msgs, err := c.Receive(ctx, 16, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("after the last nack: %d messages, %v", len(msgs), err)
		}
		dls, err := e.admin.DeadLetters(ctx, group, DeadLetterQuery{})
		if err != nil {
			return err
		}
		if len(dls) != 1 || dls[0].MsgID != sent.MsgID {
			return fmt.Errorf("dead letters: %+v", dls)
		}
		return nil
	})
}

// TestAdminSubscriptionGroupsAndTopicTypes: groups are declared on every
// master, refused when they exist, changed keeping what is not changed,
// listed and deleted; topics carry their message type.
func TestAdminSubscriptionGroupsAndTopicTypes(t *testing.T) {
	e := startEnv(t, 1, 2)
	ctx := context.Background()
	spec := SubscriptionGroupSpec{Name: "ledger", FIFO: true, MaxDeliveryAttempts: 5,
		RetryBackoff: []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}}
	if err := e.admin.CreateSubscriptionGroup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.CreateSubscriptionGroup(ctx, spec); !errors.Is(err, ErrGroupExists) {
		t.Fatalf("second create: %v", err)
	}
	gs, err := e.admin.SubscriptionGroup(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 {
		t.Fatalf("declared on %d broker groups", len(gs))
	}
	for _, g := range gs {
		if !g.FIFO || g.MaxDeliveryAttempts != 5 || g.RetryPolicy != RetryCustomized || !slices.Equal(g.RetryBackoff, spec.RetryBackoff) || !g.ConsumeEnable {
			t.Fatalf("on %s: %+v", g.BrokerName, g)
		}
	}
	spec.FIFO, spec.RetryBackoff, spec.Exponential = false, nil, &ExponentialBackoff{Initial: time.Second, Max: time.Minute, Multiplier: 2}
	spec.BrokerNames = []string{gs[0].BrokerName}
	if err := e.admin.UpdateSubscriptionGroup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	all, err := e.admin.SubscriptionGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].FIFO || all[0].RetryPolicy != RetryExponential || *all[0].Exponential != *spec.Exponential || !all[1].FIFO {
		t.Fatalf("after updating %s: %+v", gs[0].BrokerName, all)
	}
	if err := e.admin.DeleteSubscriptionGroup(ctx, "ledger", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.SubscriptionGroup(ctx, "ledger"); !errors.Is(err, ErrGroupNotExist) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := e.admin.DeleteSubscriptionGroup(ctx, "ledger", false); !errors.Is(err, ErrGroupNotExist) {
		t.Fatalf("second delete: %v", err)
	}
	if err := e.admin.CreateSubscriptionGroup(ctx, SubscriptionGroupSpec{Name: "bad", MaxDeliveryAttempts: -1}); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("negative attempts: %v", err)
	}

	if err := e.admin.CreateTopic(ctx, TopicSpec{Name: "typed", Queues: 2, MessageType: "fifo"}); err != nil {
		t.Fatal(err)
	}
	cfgs, err := e.admin.TopicConfig(ctx, "typed")
	if err != nil || len(cfgs) != 2 || cfgs[0].MessageType() != TopicFIFO || cfgs[1].MessageType() != TopicFIFO {
		t.Fatalf("typed topic: %+v %v", cfgs, err)
	}
	if err := e.admin.UpdateTopic(ctx, TopicSpec{Name: "typed", Queues: 2}); err != nil {
		t.Fatal(err)
	}
	allCfgs, err := e.admin.AllTopicConfigs(ctx)
	if err != nil || len(allCfgs["typed"]) != 2 || allCfgs["typed"][0].MessageType() != TopicMixed {
		t.Fatalf("after an update without a type: %+v %v", allCfgs["typed"], err)
	}
	if err := e.admin.CreateTopic(ctx, TopicSpec{Name: "badtype", MessageType: "LOUD"}); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("unknown type: %v", err)
	}
}

// TestSimpleConsumerAfterPromotion: a simple consumer keeps receiving when
// its broker group's slave is promoted after the master stopped; messages
// acknowledged on the old master are not delivered again, the others are.
func TestSimpleConsumerAfterPromotion(t *testing.T) {
	e := startEnvWith(t, cluster.Options{Broker: fastReplication})
	topic := e.topic(2)
	slave := e.c.StartSlave(0, 1).Broker().Addr()
	ctx := context.Background()
	e.waitFor(30*time.Second, "the slave in sync", func() error {
		st, err := e.admin.ReplicationStatus(ctx, e.c.Broker(0).Addr())
		if err != nil {
			return err
		}
		if st.InSyncSlaves != 1 || len(st.Slaves) != 1 || !st.Slaves[0].Connected {
			return fmt.Errorf("master %+v", st)
		}
		return nil
	})
	sent := e.sendN(e.producer(), topic, 10, nil)
	c := e.simple("simple-failover", map[string]string{topic: "*"}, 200*time.Millisecond)
	acked := map[string]bool{}
	// Half acknowledged; the others stay invisible for 2 s.
	e.receiveUntil(c, 2*time.Second, func(m *MessageView) {
		if len(acked) < 5 {
			if err := c.Ack(ctx, m); err != nil {
				t.Fatalf("ack %s: %v", m.MsgID, err)
			}
			acked[m.MsgID] = true
		}
	}, func() error {
		if len(acked) < 5 {
			return fmt.Errorf("%d acknowledged", len(acked))
		}
		return nil
	})

	// The slave holds everything (the acknowledgements are records of the
	// CommitLog too) before the master stops.
	e.waitFor(30*time.Second, "the slave caught up", func() error {
		ms, err := e.admin.ReplicationStatus(ctx, e.c.Broker(0).Addr())
		if err != nil {
			return err
		}
		ss, err := e.admin.ReplicationStatus(ctx, slave)
		if err != nil {
			return err
		}
		if ss.CommitLogMaxOffset != ms.CommitLogMaxOffset {
			return fmt.Errorf("slave at %d, master at %d", ss.CommitLogMaxOffset, ms.CommitLogMaxOffset)
		}
		return nil
	})
	e.c.StopBroker(0)
	if _, err := e.admin.Promote(ctx, slave, "broker-a", 0); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	// Until the route names the new master, receives fail.
	failover := func(err error) bool {
		return errors.Is(err, ErrBrokerUnreachable) || errors.Is(err, ErrNotMaster) || errors.Is(err, ErrServiceNotAvailable) || errors.Is(err, ErrNoRoute)
	}
	e.receiveUntilTolerating(c, 2*time.Second, func(m *MessageView) {
		if acked[m.MsgID] {
			t.Fatalf("%s was acknowledged on the old master and came again (attempt %d)", m.MsgID, m.DeliveryAttempt)
		}
		if err := c.Ack(ctx, m); err != nil {
			t.Fatalf("ack %s on the new master: %v", m.MsgID, err)
		}
		got[m.MsgID] = true
	}, func() error {
		if len(got)+len(acked) < len(sent) {
			return fmt.Errorf("%d acknowledged before, %d after the promotion, of %d", len(acked), len(got), len(sent))
		}
		return nil
	}, failover)
}

// TestSimpleConsumerFIFOGroup: in a FIFO group a queue hands out its next
// message only once the previous one is acknowledged, in queue order.
func TestSimpleConsumerFIFOGroup(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	ctx := context.Background()
	const group = "simple-fifo"
	if err := e.admin.CreateSubscriptionGroup(ctx, SubscriptionGroupSpec{Name: group, FIFO: true}); err != nil {
		t.Fatal(err)
	}
	sent := e.sendN(e.producer(), topic, 3, nil)
	c := e.simple(group, map[string]string{topic: "*"}, 200*time.Millisecond)
	for i, want := range sent {
		var got []*MessageView
		e.waitFor(30*time.Second, "receive", func() error {
			var err error
			if got, err = c.Receive(ctx, 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				return errors.New("nothing yet")
			}
			return nil
		})
		if len(got) != 1 || got[0].MsgID != want.MsgID {
			t.Fatalf("receive %d: %d messages, first %s, want %s", i, len(got), got[0].MsgID, want.MsgID)
		}
		// Not acknowledged yet: the queue is blocked.
		if msgs, err := c.Receive(ctx, 1, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("while %s is unacknowledged: %d messages, %v", want.MsgID, len(msgs), err)
		}
		if err := c.Ack(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSimpleConsumerSQL92: a simple consumer with an SQL92 selector is
// handed only the messages whose properties match; a malformed condition
// is refused by the broker.
func TestSimpleConsumerSQL92(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	sent := e.sendN(e.producer(), topic, 10, func(i int) *Message {
		return &Message{Topic: topic, Body: []byte(fmt.Sprint("m", i)), Properties: map[string]string{"amount": fmt.Sprint(i * 10)}}
	})
	c, err := NewSimpleConsumerSelectors("simple-sql", map[string]Selector{topic: SQL92("amount >= 50")}, 200*time.Millisecond, e.shared())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	e.receiveUntil(c, time.Minute, func(m *MessageView) {
		if m.Properties["amount"] < "50" || len(m.Properties["amount"]) != 2 {
			t.Errorf("%s with amount %q does not match", m.MsgID, m.Properties["amount"])
		}
		got[m.MsgID] = true
		if err := c.Ack(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}, func() error {
		if len(got) < 5 {
			return fmt.Errorf("%d of 5", len(got))
		}
		return nil
	})
	for _, r := range sent[5:] {
		if !got[r.MsgID] {
			t.Errorf("%s not received", r.MsgID)
		}
	}
	if msgs, err := c.Receive(context.Background(), 16, time.Minute); err != nil || len(msgs) != 0 {
		t.Fatalf("after the matches: %d messages, %v", len(msgs), err)
	}

	bad, err := NewSimpleConsumerSelectors("simple-sql", map[string]Selector{topic: SQL92("amount >=")}, 0, e.shared())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Receive(context.Background(), 1, time.Minute); !errors.Is(err, ErrSubscriptionParse) {
		t.Fatalf("receive with a malformed condition: %v", err)
	}
	if _, err := NewSimpleConsumerSelectors("g", map[string]Selector{topic: SQL92(" ")}, 0); !errors.Is(err, ErrSubscriptionParse) {
		t.Fatalf("empty condition: %v", err)
	}
}
