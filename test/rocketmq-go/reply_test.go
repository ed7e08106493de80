package rocketmqgo_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestRequestReply: Producer.Request sends a request and waits for the
// reply that a consumer builds with consumer.CreateReplyMessage and sends
// (SEND_REPLY_MESSAGE, 324); the broker pushes it to the requester on its
// connection (PUSH_REPLY_MESSAGE_TO_CLIENT, 326).
func TestRequestReply(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "request", 2)
		replyTopic := clusterName + "_REPLY_TOPIC"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Apache RocketMQ's broker creates <cluster>_REPLY_TOPIC when it
		// starts; the replier's producer needs its route.
		if r, err := c.Admin.Route(ctx, replyTopic); err != nil || len(r.Queues) != len(c.Brokers) {
			t.Errorf("%s is not routed on every broker (%v): the replier cannot send", replyTopic, err)
			c.CreateTopic(t, replyTopic, 1)
		}
		replier := newProducer(t, c)
		var finished atomic.Bool // the listener may run on after the test
		defer finished.Store(true)
		errorf := func(format string, args ...any) {
			if !finished.Load() {
				t.Errorf(format, args...)
			}
		}
		startPushConsumer(t, c, uniq("replyg"), topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				reply, err := consumer.CreateReplyMessage(m, nil)
				if err != nil {
					errorf("CreateReplyMessage: %v (properties %v)", err, m.GetProperties())
					continue
				}
				// CreateReplyMessage parses its body argument as properties:
				// set the body here.
				reply.Body = []byte("re: " + string(m.Body))
				reply.WithProperty("answer", m.GetProperty("seq"))
				if _, err := replier.SendSync(context.Background(), reply); err != nil {
					errorf("send the reply: %v", err)
				}
			}
			return consumer.ConsumeSuccess, nil
		})
		// The broker pushes a reply on the connection of the requester's
		// clientID, which it learns from the requester's heartbeat. The Go
		// client heartbeats 1 s after it starts, to the brokers it knows by
		// then, and next 30 s later (the Java client heartbeats before its
		// first request): so the requester sends something first.
		warm := c.NewTopic(t, "warm", 1)
		requester := newProducer(t, c) // sends at once: its heartbeat ticks 1 s after it starts
		if _, err := requester.SendSync(context.Background(), primitive.NewMessage(warm, []byte("warm-up"))); err != nil {
			t.Fatalf("warm-up send: %v", err)
		}
		time.Sleep(1500 * time.Millisecond)
		for i := range 3 {
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("question-%d", i)))
			m.WithProperty("seq", fmt.Sprint(i))
			start := time.Now()
			reply, err := requester.Request(context.Background(), 10*time.Second, m)
			if err != nil {
				t.Fatalf("Request %d: %v", i, err)
			}
			if string(reply.Body) != fmt.Sprintf("re: question-%d", i) || reply.GetProperty("answer") != fmt.Sprint(i) {
				t.Errorf("reply %d: body %q answer %q", i, reply.Body, reply.GetProperty("answer"))
			}
			t.Logf("request %d answered in %v", i, time.Since(start).Round(time.Millisecond))
		}
	})
}
