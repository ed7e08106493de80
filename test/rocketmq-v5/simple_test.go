package rocketmqv5

import (
	"context"
	"slices"
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

// TestSimpleFIFOBlocks: in a FIFO group a queue hands out nothing more
// while messages it handed out are unacknowledged and invisible; when
// their invisibility runs out the same messages come again, in order,
// with delivery attempt 2.
func TestSimpleFIFOBlocks(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "sfifo", "FIFO", 1)
		group := newGroup(t, c, "sfifog", "--fifo")
		p := newProducer(t, c, rmq.WithTopics(topic))
		a := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		b := newSimpleConsumer(t, c, group, topic, "*", time.Second)
		var msgs []v5msg
		for i := range 10 {
			m := testMsg(topic, i, "fifo")
			m.group = "g"
			msgs = append(msgs, m)
		}
		ids := sendAll(t, p, msgs)
		// All ten in the queue (dispatched) before the first receive.
		if !waitFor(10*time.Second, func() bool {
			qs, err := c.Admin.QueueStatus(context.Background(), topic)
			var n int64
			for _, q := range qs {
				n += q.MaxOffset
			}
			return err == nil && n == int64(len(msgs))
		}) {
			t.Fatalf("the queue does not hold the %d messages", len(msgs))
		}
		seqOf := map[string]int{}
		for i, id := range ids {
			seqOf[id] = i
		}
		// A holds its messages 20 s: B's receives take their await and
		// about 1.5 s more in the client (v5.1.4), one per queue.
		const invisible = 20 * time.Second
		receive := func(sc rmq.SimpleConsumer) []*rmq.MessageView {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mvs, err := sc.Receive(ctx, 32, invisible)
			if err != nil && !isNotFound(err) {
				t.Fatalf("receive: %v", err)
			}
			return mvs
		}
		seqs := func(mvs []*rmq.MessageView) []int {
			var s []int
			for _, mv := range mvs {
				s = append(s, seqOf[mv.GetMessageId()])
			}
			return s
		}
		// A's first batch (the queue's messages from the start, in order).
		var first []*rmq.MessageView
		for len(first) == 0 {
			first = receive(a)
		}
		receivedAt := time.Now()
		got := seqs(first)
		for i, s := range got {
			if s != i {
				t.Fatalf("first batch in the order %v, want 0, 1, 2, ...", got)
			}
		}
		if len(first) < 4 {
			t.Fatalf("first batch %v: want at least 4 of the 10 messages to test the blocking", got)
		}
		// A acknowledges the first three and holds the rest: B gets nothing.
		for _, mv := range first[:3] {
			if err := a.Ack(context.Background(), mv); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		held := time.Now()
		// B's receives go round the route's queues (one per broker group).
		for range 2 * len(c.Brokers) {
			began := time.Now()
			mvs := receive(b)
			if len(mvs) > 0 && time.Since(receivedAt) < invisible {
				t.Fatalf("B received %v while A holds %v of the same queue (%v after A's receive, invisible 20 s)",
					seqs(mvs), got[3:], time.Since(receivedAt).Round(10*time.Millisecond))
			}
			if len(mvs) > 0 {
				t.Fatalf("B's receive took %v: past A's invisible duration before B tried every queue", time.Since(began))
			}
		}
		// Past A's invisible duration: the held ones again, in order, then
		// the rest.
		var again []int
		deadline := time.Now().Add(60 * time.Second)
		for len(again) < 10-3 && time.Now().Before(deadline) {
			for _, mv := range receive(b) {
				s := seqOf[mv.GetMessageId()]
				if s < 3 {
					t.Errorf("acknowledged message %d delivered again", s)
				}
				want := int32(1)
				if s < len(first) {
					want = 2
				}
				if mv.GetDeliveryAttempt() != want {
					t.Errorf("message %d: delivery attempt %d, want %d", s, mv.GetDeliveryAttempt(), want)
				}
				again = append(again, s)
				if err := b.Ack(context.Background(), mv); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
		}
		t.Logf("first batch %v; after %v B got %v", got, time.Since(held).Round(100*time.Millisecond), again)
		if want := []int{3, 4, 5, 6, 7, 8, 9}; !slices.Equal(again, want) {
			t.Errorf("after the invisibility ran out B got %v, want %v", again, want)
		}
		waitAcked(t, c, group, topic, 30*time.Second)
	})
}
