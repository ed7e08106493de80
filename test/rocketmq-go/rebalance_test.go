package rocketmqgo_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Rebalancing between two consumer processes of one group: this test
// process and a child process, both RocketMQ push consumers. They split the
// queues (RocketMQ's averaging over sorted client ids) without sharing
// one; when the child stops, this process takes its queues from the
// offsets the child committed.

func TestRebalanceTwoProcesses(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "rebal", 4)
		group := uniq("rebalg")
		recsA := &memberRecords{}
		startPushConsumer(t, c, group, topic, "*",
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					recsA.add(rmqRecord(m, "A"))
				}
				return consumer.ConsumeSuccess, nil
			})
		b := newChild(t, c, "B", "rmq", topic, group, "")
		b.start(t)
		if !waitFor(30*time.Second, func() bool { return len(groupMembers(c, group)) == 2 }) {
			t.Errorf("the brokers list members %v of group %s, want this process and the child", groupMembers(c, group), group)
		}
		time.Sleep(3 * time.Second) // both have rebalanced

		p := newProducer(t, c)
		send := func(prefix string, n int) map[string]bool {
			ids := map[string]bool{}
			for i := range n {
				m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", prefix, i)))
				m.WithKeys([]string{fmt.Sprintf("%s-%d", prefix, i)})
				res, err := p.SendSync(context.Background(), m)
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				ids[res.MsgID] = true
			}
			return ids
		}
		all := func() []record { return append(recsA.all(), b.records()...) }
		waitAll := func(ids map[string]bool, d time.Duration) {
			t.Helper()
			if !waitFor(d, func() bool {
				n := 0
				seen := map[string]bool{}
				for _, r := range all() {
					if ids[r.id] && !seen[r.id] {
						seen[r.id] = true
						n++
					}
				}
				return n == len(ids)
			}) {
				t.Fatalf("not every message consumed in %v", d)
			}
		}

		// Phase 1: both members consume, each from its own queues.
		p1 := send("p1", 200)
		waitAll(p1, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		queuesOf := map[string]map[string]bool{"A": {}, "B#1": {}}
		count := map[string]int{}
		for _, r := range all() {
			if !p1[r.id] {
				t.Errorf("unexpected message %s", r.id)
				continue
			}
			count[r.id]++
			queuesOf[r.by][r.queue] = true
		}
		for id, n := range count {
			if n != 1 {
				t.Errorf("phase 1: message %s consumed %d times", id, n)
			}
		}
		qa, qb := keys(queuesOf["A"]), keys(queuesOf["B#1"])
		t.Logf("phase 1: A consumed from %v, B from %v", qa, qb)
		total := 4 * len(c.Brokers)
		if len(qa) != total/2 || len(qb) != total/2 {
			t.Errorf("queues split %d/%d, want %d each", len(qa), len(qb), total/2)
		}
		for _, q := range qa {
			if queuesOf["B#1"][q] {
				t.Errorf("queue %s consumed by both members", q)
			}
		}

		// Phase 2: B stops cleanly; A takes every queue from B's offsets.
		b.stop()
		if !waitFor(30*time.Second, func() bool { return len(groupMembers(c, group)) == 1 }) {
			t.Errorf("after B stopped the brokers list members %v", groupMembers(c, group))
		}
		p2 := send("p2", 100)
		waitAll(p2, 45*time.Second)
		time.Sleep(time.Second)
		count = map[string]int{}
		for _, r := range all() {
			count[r.id]++
			if p2[r.id] && r.by != "A" {
				t.Errorf("phase 2 message %s consumed by %s", r.id, r.by)
			}
		}
		for id, n := range count {
			if n != 1 {
				t.Errorf("message %s consumed %d times (phase 1: %v)", id, n, p1[id])
			}
		}
	})
}

func keys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}
