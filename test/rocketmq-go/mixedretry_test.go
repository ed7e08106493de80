package rocketmqgo_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/bolide-mq/bolide/client"
)

// TestMixedGroupRetry: in a group of one SDK and one RocketMQ consumer,
// each member fails every message the first time; the retries of both
// (the RocketMQ client's CONSUMER_SEND_MSG_BACK, the SDK's own send-back)
// land in %RETRY%<group> (one queue per broker group), whose owner — of
// either kind — consumes them as the original message: same id, topic, body and
// properties, reconsume times 1.
func TestMixedGroupRetry(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "mixretry", 2)
		group := uniq("mixretryg")
		prepareGroup(t, c, group, topic)

		type seen struct {
			by, topic, body, color string
			recons                 int32
		}
		var (
			mu  sync.Mutex
			got = map[string][]seen{}
		)
		note := func(id string, s seen) bool {
			mu.Lock()
			defer mu.Unlock()
			got[id] = append(got[id], s)
			return s.recons == 0
		}
		startSDKConsumer(t, c, group, topic, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			fail := false
			for _, m := range msgs {
				if note(sdkMsgID(m), seen{"sdk", m.Topic, string(m.Body), m.Properties["color"], m.ReconsumeTimes}) {
					fail = true
				}
			}
			if fail {
				return client.ConsumeRetryLater
			}
			return client.ConsumeSuccess
		})
		startPushConsumer(t, c, group, topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			fail := false
			for _, m := range msgs {
				if note(m.MsgId, seen{"rmq", m.Topic, string(m.Body), m.GetProperty("color"), m.ReconsumeTimes}) {
					fail = true
				}
			}
			if fail {
				return consumer.ConsumeRetryLater, nil
			}
			return consumer.ConsumeSuccess, nil
		})
		if !waitFor(30*time.Second, func() bool { return len(groupMembers(c, group)) == 2 }) {
			t.Fatalf("group members %v, want two", groupMembers(c, group))
		}
		time.Sleep(2 * time.Second) // both have rebalanced

		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 20 {
			msgs = append(msgs, testMessage(topic, i, "mr"))
		}
		ss := sendAll(t, c, p, msgs)
		done := func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range ss {
				if len(got[s.res.MsgID]) < 2 {
					return false
				}
			}
			return true
		}
		if !waitFor(60*time.Second, done) {
			t.Errorf("not every message was retried within 60 s")
		}
		time.Sleep(time.Second)
		mu.Lock()
		defer mu.Unlock()
		firstBy, retryBy := map[string]int{}, map[string]int{}
		for _, s := range ss {
			d := got[s.res.MsgID]
			var times []int32
			for _, x := range d {
				times = append(times, x.recons)
				if x.topic != topic || x.body != string(s.msg.Body) || x.color != s.msg.GetProperty("color") {
					t.Errorf("%s: %s got topic %q body %q color %q", s.res.MsgID, x.by, x.topic, x.body, x.color)
				}
			}
			if !slices.Equal(times, []int32{0, 1}) {
				t.Errorf("%s: deliveries %v with reconsume times %v, want [0 1]", s.res.MsgID, d, times)
				continue
			}
			firstBy[d[0].by]++
			retryBy[d[1].by]++
		}
		t.Logf("first deliveries by %v, retries by %v", firstBy, retryBy)
		if firstBy["sdk"] == 0 || firstBy["rmq"] == 0 {
			t.Errorf("first deliveries by %v: want both members", firstBy)
		}
		if len(retryBy) > len(c.Brokers) {
			t.Errorf("retries consumed by %v: want the owners of the %d retry queues", retryBy, len(c.Brokers))
		}
	})
}
