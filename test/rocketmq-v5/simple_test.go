package rocketmqv5

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// sendBatch sends n test messages with tag and returns them by id.
func sendBatch(t testing.TB, p rmq.Producer, topic string, n int, tag string) (map[string]v5msg, []string) {
	t.Helper()
	var msgs []v5msg
	for i := range n {
		msgs = append(msgs, testMsg(topic, i, tag))
	}
	ids := sendAll(t, p, msgs)
	byID := map[string]v5msg{}
	for i, id := range ids {
		byID[id] = msgs[i]
	}
	return byID, ids
}

// TestSimpleReceiveAck: a simple consumer receives every message once,
// with the producer's id, tag, keys and properties, delivery attempt 1 and
// a receipt handle; after the acks nothing comes again and the group's
// committed offsets reach the queues' ends.
func TestSimpleReceiveAck(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "simple", "NORMAL", 4)
		group := uniq("simpleg")
		p := newProducer(t, c, rmq.WithTopics(topic))
		sc := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		want, _ := sendBatch(t, p, topic, 30, "tagA")
		got, count := receiveAll(t, sc, want, 30*time.Second, 60*time.Second, true)
		for id, mv := range got {
			checkView(t, id, want[id], mv)
			if mv.GetDeliveryAttempt() != 1 || count[id] != 1 {
				t.Errorf("%s: delivered %d times, attempt %d", id, count[id], mv.GetDeliveryAttempt())
			}
			if mv.ReceiptHandle == "" {
				t.Errorf("%s: no receipt handle", id)
			}
		}
		expectNothing(t, sc, want)
		waitAcked(t, c, group, topic, 30*time.Second)
	})
}

// TestSimpleInvisibilityExpires: a message received and not acknowledged
// comes again once its invisible duration has run out, with delivery
// attempt 2 and a new receipt handle, which acknowledges it.
func TestSimpleInvisibilityExpires(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "expire", "NORMAL", 2)
		group := uniq("expireg")
		p := newProducer(t, c, rmq.WithTopics(topic))
		sc := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		want, ids := sendBatch(t, p, topic, 1, "x")
		first, _ := receiveAll(t, sc, want, 10*time.Second, 60*time.Second, false)
		mv1 := first[ids[0]]
		if mv1.GetDeliveryAttempt() != 1 {
			t.Errorf("first delivery attempt %d, want 1", mv1.GetDeliveryAttempt())
		}
		received := time.Now()
		again, _ := receiveAll(t, sc, want, 30*time.Second, 60*time.Second, false)
		mv2 := again[ids[0]]
		t.Logf("delivered again %v after the first receive (invisible 10 s)", time.Since(received).Round(100*time.Millisecond))
		if mv2.GetDeliveryAttempt() != 2 {
			t.Errorf("second delivery attempt %d, want 2", mv2.GetDeliveryAttempt())
		}
		if mv2.ReceiptHandle == mv1.ReceiptHandle || mv2.ReceiptHandle == "" {
			t.Errorf("receipt handle of the redelivery %q (first %q)", mv2.ReceiptHandle, mv1.ReceiptHandle)
		}
		checkView(t, ids[0], want[ids[0]], mv2)
		if err := sc.Ack(context.Background(), mv2); err != nil {
			t.Fatalf("ack: %v", err)
		}
		expectNothing(t, sc, want)
		waitAcked(t, c, group, topic, 30*time.Second)
	})
}

// TestSimpleChangeInvisible: ChangeInvisibleDuration returns a new handle:
// shortened, the message comes again (attempt 2); lengthened past the
// receive's invisible duration, it does not come when that runs out, and
// the new handle acknowledges it.
func TestSimpleChangeInvisible(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "chinv", "NORMAL", 2)
		group := uniq("chinvg")
		p := newProducer(t, c, rmq.WithTopics(topic))
		sc := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		needRPCs(t, c, "ChangeInvisibleDuration")
		want, ids := sendBatch(t, p, topic, 2, "x")
		got, _ := receiveAll(t, sc, want, 10*time.Second, 60*time.Second, false)
		short, long := got[ids[0]], got[ids[1]]
		oldShort, oldLong := short.ReceiptHandle, long.ReceiptHandle
		if err := sc.ChangeInvisibleDuration(short, time.Second); err != nil {
			t.Fatalf("change invisible duration to 1 s: %v", err)
		}
		if err := sc.ChangeInvisibleDuration(long, time.Minute); err != nil {
			t.Fatalf("change invisible duration to 1 min: %v", err)
		}
		if short.ReceiptHandle == oldShort || short.ReceiptHandle == "" || long.ReceiptHandle == oldLong || long.ReceiptHandle == "" {
			t.Errorf("handles after the change: %q, %q (before %q, %q)", short.ReceiptHandle, long.ReceiptHandle, oldShort, oldLong)
		}
		// Past the receive's 10 s: only the shortened one comes again.
		deadline := time.Now().Add(15 * time.Second)
		var again *rmq.MessageView
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			mvs, err := sc.Receive(ctx, 16, 30*time.Second)
			cancel()
			if err != nil && !isNotFound(err) {
				t.Logf("receive: %v", err)
				time.Sleep(200 * time.Millisecond)
			}
			for _, mv := range mvs {
				switch mv.GetMessageId() {
				case ids[0]:
					again = mv
					if mv.GetDeliveryAttempt() != 2 {
						t.Errorf("shortened message delivered again with attempt %d, want 2", mv.GetDeliveryAttempt())
					}
					if err := sc.Ack(context.Background(), mv); err != nil {
						t.Errorf("ack: %v", err)
					}
				case ids[1]:
					t.Errorf("lengthened message delivered again (attempt %d) before its new invisible duration ran out", mv.GetDeliveryAttempt())
				}
			}
		}
		if again == nil {
			t.Errorf("the shortened message did not come again within 15 s")
		}
		if err := sc.Ack(context.Background(), long); err != nil {
			t.Fatalf("ack with the changed handle: %v", err)
		}
		expectNothing(t, sc, want)
		waitAcked(t, c, group, topic, 30*time.Second)
	})
}

// TestSimpleTagFilter: a consumer subscribed with "a || b" gets the
// messages tagged a and b and never those tagged c; another group with
// "*" gets all.
func TestSimpleTagFilter(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "tagf", "NORMAL", 2)
		p := newProducer(t, c, rmq.WithTopics(topic))
		sc := newSimpleConsumer(t, c, uniq("tagfg"), topic, "a||b", 2*time.Second)
		all := newSimpleConsumer(t, c, uniq("tagall"), topic, "*", 2*time.Second)
		wantAB := map[string]v5msg{}
		wantAll := map[string]v5msg{}
		wantC := map[string]v5msg{}
		for _, tag := range []string{"a", "b", "c"} {
			m, _ := sendBatch(t, p, topic, 5, tag)
			for id, v := range m {
				wantAll[id] = v
				if tag == "c" {
					wantC[id] = v
				} else {
					wantAB[id] = v
				}
			}
		}
		got, _ := receiveAll(t, sc, wantAB, 30*time.Second, 60*time.Second, true)
		for id, mv := range got {
			checkView(t, id, wantAB[id], mv)
		}
		expectNothing(t, sc, wantC)
		receiveAll(t, all, wantAll, 30*time.Second, 60*time.Second, true)
	})
}
