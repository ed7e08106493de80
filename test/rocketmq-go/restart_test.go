package rocketmqgo_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Consumer offsets survive a broker crash (kill -9), a clean broker restart
// and a consumer restart: nothing committed is delivered again, nothing is
// lost.

func TestOffsetsSurviveRestarts(t *testing.T) {
	t.Parallel()
	for _, l := range layouts {
		t.Run(l.Name, func(t *testing.T) {
			t.Parallel()
			c := privateCluster(t, l)
			topic := c.NewTopic(t, "restart", 4)
			group := uniq("restartg")
			p := newProducer(t, c)
			round := 0
			send := func(n int) []sent {
				round++
				var msgs []*primitive.Message
				for i := range n {
					msgs = append(msgs, testMessage(topic, round*1000+i, fmt.Sprintf("round%d", round)))
				}
				return sendAllRetry(t, c, p, msgs)
			}
			wantOffsets := map[string]int64{}
			note := func(ss []sent) {
				for _, s := range ss {
					q := fmt.Sprintf("%s/%d", s.res.MessageQueue.BrokerName, s.res.MessageQueue.QueueId)
					wantOffsets[q] = max(wantOffsets[q], s.res.QueueOffset+1)
				}
			}
			waitCommitted := func(what string) {
				t.Helper()
				var got map[string]int64
				if !waitFor(25*time.Second, func() bool {
					got = c.GroupOffsets(t, group, topic)
					for q, w := range wantOffsets {
						if got[q] != w {
							return false
						}
					}
					return true
				}) {
					t.Fatalf("%s: committed offsets %v, want %v", what, got, wantOffsets)
				}
			}

			// Round 1: consumer A consumes; its offsets reach the brokers.
			r1 := send(30)
			note(r1)
			colA := &collector{}
			aStart := time.Now()
			a := startPushConsumer(t, c, group, topic, "*", colA.listener("A"))
			colA.waitDistinct(t, len(r1), 30*time.Second)
			waitCommitted("round 1")
			// Let the brokers persist their offset tables (every 5 s), then
			// crash them all and start them again.
			time.Sleep(6 * time.Second)
			before := c.GroupOffsets(t, group, topic)
			for i := range c.Brokers {
				c.RestartBroker(t, i, true)
			}
			if after := c.GroupOffsets(t, group, topic); !maps.Equal(after, before) {
				t.Errorf("offsets after kill -9 and restart %v, before %v", after, before)
			}

			// Round 2: A goes on after the crash, with nothing replayed. (After
			// A's first rebalance since the restart: until A heartbeats again
			// the brokers know no member of its group, and the Go client then
			// drops its queues and takes them back —
			// TestConsumerKeepsQueuesAcrossBrokerRestart.)
			waitPastRebalance(aStart)
			r2 := send(30)
			note(r2)
			if !waitFor(60*time.Second, func() bool { return colA.distinct() >= len(r1)+len(r2) }) {
				t.Fatalf("after the broker crash consumer A got %d of %d messages of round 2", colA.distinct()-len(r1), len(r2))
			}
			time.Sleep(time.Second)
			checkOnce(t, c, "consumer A", colA, append(append([]sent{}, r1...), r2...))

			// A stops (it commits on shutdown); the brokers restart cleanly.
			if err := a.Shutdown(); err != nil {
				t.Fatalf("shutdown A: %v", err)
			}
			waitCommitted("A's shutdown")
			for i := range c.Brokers {
				c.RestartBroker(t, i, false)
			}
			waitCommitted("after a clean broker restart")

			// Round 3: consumer B of the same group starts where A stopped.
			r3 := send(30)
			note(r3)
			colB := &collector{}
			startPushConsumer(t, c, group, topic, "*", colB.listener("B"))
			colB.waitDistinct(t, len(r3), 30*time.Second)
			time.Sleep(time.Second)
			checkOnce(t, c, "consumer B", colB, r3)
		})
	}
}

// waitPastRebalance waits until 2 s after the next periodic rebalance of a
// RocketMQ client started at start (every 20 s).
func waitPastRebalance(start time.Time) {
	n := time.Since(start)/(20*time.Second) + 1
	time.Sleep(time.Until(start.Add(n*20*time.Second + 2*time.Second)))
}

// checkOnce checks that col got each of ss exactly once, as sent, and
// nothing else.
func checkOnce(t testing.TB, c *cluster, who string, col *collector, ss []sent) {
	t.Helper()
	got := col.byMsgID()
	want := map[string]bool{}
	for _, s := range ss {
		want[s.res.MsgID] = true
		d := got[s.res.MsgID]
		if len(d) != 1 {
			t.Errorf("%s: message %s (%s) consumed %d times", who, s.res.MsgID, s.msg.GetTags(), len(d))
		}
		if len(d) > 0 {
			checkDelivered(t, c, s, d[0].msg)
		}
	}
	for id, d := range got {
		if !want[id] {
			t.Errorf("%s: consumed %s (%s, offset %d) again or unexpectedly", who, id, d[0].msg.GetTags(), d[0].msg.QueueOffset)
		}
	}
}

// sendAllRetry is sendAll with a retry of each send for up to 30 s (the
// producer may take a moment to find a restarted broker).
func sendAllRetry(t testing.TB, c *cluster, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, msgs []*primitive.Message) []sent {
	t.Helper()
	out := make([]sent, 0, len(msgs))
	for _, m := range msgs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			res, err := p.SendSync(context.Background(), m)
			if err == nil {
				checkSendResult(t, c, m, res)
				out = append(out, sent{m, res})
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("send: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return out
}

// TestConsumerKeepsQueuesAcrossBrokerRestart: a RocketMQ push consumer
// keeps its queues across a crash and restart of its broker, and consumes
// nothing twice. The Go client heartbeats 1 s after it starts and then
// every 30 s, and rebalances every 20 s: its first rebalance after the
// restart (20 s after its start) asks the broker for the group's members
// (GET_CONSUMER_LIST_BY_GROUP) before the broker has heard from it again.
// An answer without members (Apache RocketMQ's SYSTEM_ERROR "no consumer
// for this group", without a body) is read by the Go client as an empty
// group: it drops every queue (persisting its offsets; what its listener
// is consuming at that moment is not committed), heartbeats, is told the
// group changed, takes the queues back from the committed offsets and
// consumes those messages again.
func TestConsumerKeepsQueuesAcrossBrokerRestart(t *testing.T) {
	t.Parallel()
	c := privateCluster(t, oneGroup)
	topic := c.NewTopic(t, "keepq", 2)
	col := &collector{}
	start := time.Now()
	pc := startPushConsumer(t, c, uniq("keepqg"), topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if m.GetTags() == "slow" {
				time.Sleep(4 * time.Second)
			}
		}
		col.add("push", msgs...)
		return consumer.ConsumeSuccess, nil
	})
	p := newProducer(t, c, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	var all []sent
	perQueue := func(tag string) {
		var msgs []*primitive.Message
		for q := range 2 {
			m := testMessage(topic, len(all)+q, tag)
			m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: "broker-a", QueueId: q}
			msgs = append(msgs, m)
		}
		all = append(all, sendAllRetry(t, c, p, msgs)...)
	}
	perQueue("warm")
	col.waitDistinct(t, len(all), 30*time.Second)
	// No pull held across the restart (the client would wait for its
	// answer up to 30 s): suspended, the consumer stops once its held pulls
	// have returned.
	pc.Suspend()
	perQueue("drain")
	col.waitDistinct(t, len(all), 30*time.Second)
	time.Sleep(time.Until(start.Add(3 * time.Second))) // after the client's first heartbeat
	c.RestartBroker(t, 0, false)
	pc.Resume()
	// Messages whose consumption spans the client's rebalance 20 s after
	// its start.
	time.Sleep(time.Until(start.Add(18500 * time.Millisecond)))
	perQueue("slow")
	perQueue("slow")
	col.waitDistinct(t, len(all), 45*time.Second)
	time.Sleep(6 * time.Second) // a second delivery shows by now
	for _, d := range col.all() {
		t.Logf("%s %s (queue %d, offset %d) delivered %v after the consumer started", d.msg.GetTags(), d.msg.MsgId, d.msg.Queue.QueueId, d.msg.QueueOffset,
			d.at.Sub(start).Round(100*time.Millisecond))
	}
	checkOnce(t, c, "consumer", col, all)
	if t.Failed() {
		t.Log("the client dropped and took back its queues at a rebalance after the restart: the restarted broker " +
			"answered GET_CONSUMER_LIST_BY_GROUP without members before the client's heartbeat (see the test's comment)")
	}
}
