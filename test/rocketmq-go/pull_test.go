package rocketmqgo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The RocketMQ pull consumer: Poll/ACK with rebalancing and committed
// offsets, PullFrom, OffsetForTimestamp.

func TestPullPollAck(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "poll", 4)
		group := uniq("pollg")
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 40 {
			msgs = append(msgs, testMessage(topic, i, "poll"))
		}
		ss := sendAll(t, c, p, msgs)
		pc := startPullConsumer(t, c, group, topic, "*", consumer.WithPullBatchSize(8))
		got := map[string][]*primitive.MessageExt{}
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < len(ss) && time.Now().Before(deadline) {
			cr, err := pc.Poll(context.Background(), 2*time.Second)
			if errors.Is(err, consumer.ErrNoNewMsg) {
				continue
			}
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			for _, m := range cr.GetMsgList() {
				got[m.MsgId] = append(got[m.MsgId], m)
			}
			pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		}
		if len(got) != len(ss) {
			t.Fatalf("polled %d of %d messages", len(got), len(ss))
		}
		for _, s := range ss {
			d := got[s.res.MsgID]
			if len(d) != 1 {
				t.Errorf("message %s polled %d times", s.res.MsgID, len(d))
			}
			if len(d) > 0 {
				checkDelivered(t, c, s, d[0])
			}
		}
		// What was ACKed is committed on Shutdown and the brokers hold it.
		if err := pc.Shutdown(); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		want := map[string]int64{}
		for _, s := range ss {
			q := fmt.Sprintf("%s/%d", s.res.MessageQueue.BrokerName, s.res.MessageQueue.QueueId)
			want[q] = max(want[q], s.res.QueueOffset+1)
		}
		var offs map[string]int64
		ok := waitFor(10*time.Second, func() bool {
			offs = c.GroupOffsets(t, group, topic)
			for q, w := range want {
				if offs[q] != w {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Errorf("committed offsets %v, want %v", offs, want)
		}
	})
}

func TestPullFromAndOffsetForTimestamp(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "pullfrom", 2)
		p := newProducer(t, c)
		var first, second []*primitive.Message
		for i := range 12 {
			first = append(first, testMessage(topic, i, "first"))
			second = append(second, testMessage(topic, 100+i, "second"))
		}
		s1 := sendAll(t, c, p, first)
		time.Sleep(50 * time.Millisecond)
		mark := time.Now()
		time.Sleep(50 * time.Millisecond)
		s2 := sendAll(t, c, p, second)

		pc := startReader(t, c, uniq("pullfromg"), topic)
		perQueue := map[string]int64{} // messages of the first round per queue
		for _, s := range s1 {
			perQueue[fmt.Sprintf("%s/%d", s.res.MessageQueue.BrokerName, s.res.MessageQueue.QueueId)]++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		all := append(append([]sent{}, s1...), s2...)
		byID := map[string]sent{}
		for _, s := range all {
			byID[s.res.MsgID] = s
		}
		seen := 0
		for _, b := range c.Brokers {
			for qid := range 2 {
				mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.Name, QueueId: qid}
				key := fmt.Sprintf("%s/%d", b.Name, qid)
				off, err := pc.OffsetForTimestamp(mq, mark.UnixMilli())
				if err != nil {
					t.Fatalf("OffsetForTimestamp %s: %v", key, err)
				}
				if off != perQueue[key] {
					t.Errorf("OffsetForTimestamp %s at the mark = %d, want %d (the first message stored after it)", key, off, perQueue[key])
				}
				// PullFrom reads from any offset; the answer's offsets tell
				// the queue's bounds.
				res, err := pc.PullFrom(ctx, mq, 0, 64)
				if err != nil {
					t.Fatalf("PullFrom %s: %v", key, err)
				}
				n := int64(len(res.GetMessageExts()))
				if res.Status != primitive.PullFound || res.NextBeginOffset != n || res.MinOffset != 0 || res.MaxOffset != n {
					t.Errorf("PullFrom %s at 0: status %v, %d messages, next %d, min %d, max %d", key, res.Status, n, res.NextBeginOffset, res.MinOffset, res.MaxOffset)
				}
				for i, m := range res.GetMessageExts() {
					if m.QueueOffset != int64(i) {
						t.Errorf("PullFrom %s: message %d at offset %d", key, i, m.QueueOffset)
					}
					s, ok := byID[m.MsgId]
					if !ok {
						t.Errorf("PullFrom %s: unknown message %s", key, m.MsgId)
						continue
					}
					m.Queue = mq
					checkDelivered(t, c, s, m)
					seen++
				}
				if n > 2 {
					res, err := pc.PullFrom(ctx, mq, n-2, 1)
					if err != nil {
						t.Fatalf("PullFrom %s at %d: %v", key, n-2, err)
					}
					if len(res.GetMessageExts()) != 1 || res.GetMessageExts()[0].QueueOffset != n-2 || res.NextBeginOffset != n-1 {
						t.Errorf("PullFrom %s at %d for 1: %d messages, next %d", key, n-2, len(res.GetMessageExts()), res.NextBeginOffset)
					}
				}
			}
		}
		if seen != len(all) {
			t.Errorf("PullFrom read %d messages, sent %d", seen, len(all))
		}
	})
}

// TestPullPollDefaultBatch: the pull consumer's default batch size is 0
// (maxMsgNums 0 on the wire); the broker answers with messages anyway, as
// Apache RocketMQ's does.
func TestPullPollDefaultBatch(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "poll0", 2)
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 10 {
			msgs = append(msgs, testMessage(topic, i, "poll0"))
		}
		ss := sendAll(t, c, p, msgs)
		pc := startPullConsumer(t, c, uniq("poll0g"), topic, "*")
		got := map[string]int{}
		deadline := time.Now().Add(20 * time.Second)
		for len(got) < len(ss) && time.Now().Before(deadline) {
			cr, err := pc.Poll(context.Background(), time.Second)
			if errors.Is(err, consumer.ErrNoNewMsg) {
				continue
			}
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			for _, m := range cr.GetMsgList() {
				got[m.MsgId]++
			}
			pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		}
		for _, s := range ss {
			if got[s.res.MsgID] != 1 {
				t.Errorf("message %s polled %d times", s.res.MsgID, got[s.res.MsgID])
			}
		}
	})
}
