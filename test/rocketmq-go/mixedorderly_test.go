package rocketmqgo_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/bolide-mq/bolide/client"
)

// TestMixedOrderly: an orderly group of both kinds. The SDK consumer runs
// alone, then a RocketMQ orderly consumer joins: the SDK member commits and
// unlocks the queues it gives up (RocketMQ's LOCK_BATCH_MQ and the SDK's
// locks are the same locks), the RocketMQ member locks them and goes on
// from the committed offsets. Every key's messages are consumed once, in
// order, across the handover.
func TestMixedOrderly(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "mixord", 4)
		group := uniq("mixordg")
		type del struct {
			by, queue string
			seq       int
			key       string
			at        time.Time
		}
		var (
			mu   sync.Mutex
			dels []del
		)
		add := func(d del) {
			mu.Lock()
			dels = append(dels, d)
			mu.Unlock()
		}
		count := func(from, to int) int {
			mu.Lock()
			defer mu.Unlock()
			seen := map[int]bool{}
			for _, d := range dels {
				if d.seq >= from && d.seq < to {
					seen[d.seq] = true
				}
			}
			return len(seen)
		}
		var copts []client.ConsumerOption
		for _, o := range sdkOpts(c) {
			copts = append(copts, o)
		}
		sdkc, err := client.NewPushConsumer(group, append(copts, client.WithConsumeFrom(client.ConsumeFromFirst))...)
		if err != nil {
			t.Fatal(err)
		}
		err = sdkc.Subscribe(topic, "*", client.OrderlyListener(func(_ context.Context, msgs []*client.MessageExt) client.OrderlyResult {
			for _, m := range msgs {
				s, _ := strconv.Atoi(m.Properties["seq"])
				add(del{"sdk", fmt.Sprintf("%s/%d", m.BrokerName, m.QueueID), s, m.Properties["shard"], time.Now()})
			}
			return client.OrderlySuccess
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := sdkc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sdkc.Close() })

		p := newProducer(t, c, producer.WithQueueSelector(producer.NewHashQueueSelector()))
		shardKeys := []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7"}
		send := func(from, to int) {
			for i := from; i < to; i++ {
				m := testMessage(topic, i, "mo")
				m.WithShardingKey(shardKeys[i%len(shardKeys)])
				m.WithProperty("shard", shardKeys[i%len(shardKeys)])
				if _, err := p.SendSync(context.Background(), m); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
		}
		send(0, 70)
		if !waitFor(30*time.Second, func() bool { return count(0, 70) == 70 }) {
			t.Fatalf("the SDK member consumed %d of 70", count(0, 70))
		}
		startPushConsumer(t, c, group, topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				s, _ := strconv.Atoi(m.GetProperty("seq"))
				add(del{"rmq", fmt.Sprintf("%s/%d", m.Queue.BrokerName, m.Queue.QueueId), s, m.GetProperty("shard"), time.Now()})
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumerOrder(true))
		if !waitFor(30*time.Second, func() bool { return len(groupMembers(c, group)) == 2 }) {
			t.Errorf("group members %v, want two", groupMembers(c, group))
		}
		time.Sleep(3 * time.Second)
		handover := time.Now()
		send(70, 210)
		// A queue the RocketMQ member fails to lock (the SDK member has not
		// let it go yet) waits for its next rebalance, 20 s later.
		if !waitFor(60*time.Second, func() bool { return count(70, 210) == 140 }) {
			t.Fatalf("%d of the 140 messages sent after the RocketMQ member joined consumed in 60 s (queues still locked by the SDK member?)", count(70, 210))
		}
		t.Logf("the messages sent after the RocketMQ member joined consumed in %v", time.Since(handover).Round(100*time.Millisecond))
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		sort.Slice(dels, func(i, j int) bool { return dels[i].at.Before(dels[j].at) })
		last := map[string]int{}
		times := map[int]int{}
		owners := map[string]map[string]bool{}
		for _, d := range dels {
			times[d.seq]++
			if prev, ok := last[d.key]; ok && d.seq <= prev {
				t.Errorf("key %s: seq %d (by %s) after %d", d.key, d.seq, d.by, prev)
			}
			last[d.key] = d.seq
			if d.at.After(handover) {
				if owners[d.queue] == nil {
					owners[d.queue] = map[string]bool{}
				}
				owners[d.queue][d.by] = true
			}
		}
		for s := range 210 {
			if times[s] != 1 {
				t.Errorf("message %d consumed %d times", s, times[s])
			}
		}
		members := map[string]int{}
		for q, o := range owners {
			if len(o) != 1 {
				t.Errorf("queue %s consumed by %v after the handover", q, keys(o))
			}
			for m := range o {
				members[m]++
			}
		}
		t.Logf("queues after the handover: %v", members)
		if members["sdk"] == 0 || members["rmq"] == 0 {
			t.Errorf("queues after the handover by member: %v, want both", members)
		}
	})
}
