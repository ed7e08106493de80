package rocketmqv5

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/bolide-mq/bolide/client"
)

// pushRecorder records the delivery attempts a push consumer's listener
// saw per message id and answers with result(id, attempt).
type pushRecorder struct {
	mu       sync.Mutex
	attempts map[string][]int32
	times    map[string][]time.Time
	views    map[string]*rmq.MessageView
	result   func(id string, attempt int32) rmq.ConsumerResult
}

func newPushRecorder(result func(id string, attempt int32) rmq.ConsumerResult) *pushRecorder {
	return &pushRecorder{attempts: map[string][]int32{}, times: map[string][]time.Time{}, views: map[string]*rmq.MessageView{}, result: result}
}

func (r *pushRecorder) consume(mv *rmq.MessageView) rmq.ConsumerResult {
	r.mu.Lock()
	id := mv.GetMessageId()
	r.attempts[id] = append(r.attempts[id], mv.GetDeliveryAttempt())
	r.times[id] = append(r.times[id], time.Now())
	r.views[id] = mv
	r.mu.Unlock()
	return r.result(id, mv.GetDeliveryAttempt())
}

// gaps returns the time between id's deliveries.
func (r *pushRecorder) gaps(id string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(r.times[id]); i++ {
		g = append(g, r.times[id][i].Sub(r.times[id][i-1]).Round(100*time.Millisecond))
	}
	return g
}

func (r *pushRecorder) get(id string) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts[id])
}

// waitAttempts waits until every id was delivered at least n times.
func (r *pushRecorder) waitAttempts(t testing.TB, ids []string, n int, d time.Duration) {
	t.Helper()
	short := func() map[string][]int32 {
		r.mu.Lock()
		defer r.mu.Unlock()
		m := map[string][]int32{}
		for _, id := range ids {
			if len(r.attempts[id]) < n {
				m[id] = slices.Clone(r.attempts[id])
			}
		}
		return m
	}
	if !waitFor(d, func() bool { return len(short()) == 0 }) {
		t.Fatalf("after %v, delivered fewer than %d times (id: attempts seen): %v", d, n, short())
	}
}

// TestPushSuccess: a push consumer gets every message once, with the
// producer's id, tag, keys and properties; its acks move the group's
// committed offsets to the queues' ends.
func TestPushSuccess(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "push", "NORMAL", 4)
		group := uniq("pushg")
		p := newProducer(t, c, rmq.WithTopics(topic))
		rec := newPushRecorder(func(string, int32) rmq.ConsumerResult { return rmq.SUCCESS })
		newPushConsumer(t, c, group, topic, rec.consume)
		want, ids := sendBatch(t, p, topic, 30, "push")
		rec.waitAttempts(t, ids, 1, 60*time.Second)
		waitAcked(t, c, group, topic, 30*time.Second)
		for _, id := range ids {
			if a := rec.get(id); !slices.Equal(a, []int32{1}) {
				t.Errorf("%s: attempts %v, want [1]", id, a)
			}
			rec.mu.Lock()
			checkView(t, id, want[id], rec.views[id])
			rec.mu.Unlock()
		}
	})
}

// TestPushRedelivery: a message whose consumption fails comes again after
// the group's backoff with a growing delivery attempt, until it succeeds
// (here on attempt 3).
func TestPushRedelivery(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "pushre", "NORMAL", 2)
		group := newGroup(t, c, "pushreg", "--retry-backoff", "1s,1s,1s")
		p := newProducer(t, c, rmq.WithTopics(topic))
		rec := newPushRecorder(func(_ string, attempt int32) rmq.ConsumerResult {
			if attempt < 3 {
				return rmq.FAILURE
			}
			return rmq.SUCCESS
		})
		newPushConsumer(t, c, group, topic, rec.consume)
		_, ids := sendBatch(t, p, topic, 5, "re")
		sent := time.Now()
		rec.waitAttempts(t, ids, 1, 90*time.Second)
		first := time.Now()
		rec.waitAttempts(t, ids, 3, 120*time.Second)
		third := time.Now()
		waitAcked(t, c, group, topic, 30*time.Second)
		t.Logf("first deliveries %v after the sends, third %v later, committed offsets %v later",
			first.Sub(sent).Round(100*time.Millisecond), third.Sub(first).Round(100*time.Millisecond), time.Since(third).Round(100*time.Millisecond))
		for _, id := range ids {
			if a := rec.get(id); !slices.Equal(a, []int32{1, 2, 3}) {
				t.Errorf("%s: attempts %v, want [1 2 3]", id, a)
			}
		}
		t.Logf("time between deliveries (backoff 1s): %v", rec.gaps(ids[0]))
	})
}

// TestPushDeadLetter: with a group of at most 3 delivery attempts, a
// message whose consumption always fails is delivered 3 times and then
// moved to the group's dead-letter queue, keeping its id.
func TestPushDeadLetter(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "pushdlq", "NORMAL", 2)
		group := newGroup(t, c, "pushdlqg", "--max-delivery-attempts", "3", "--retry-backoff", "1s,1s,1s")
		p := newProducer(t, c, rmq.WithTopics(topic))
		rec := newPushRecorder(func(string, int32) rmq.ConsumerResult { return rmq.FAILURE })
		newPushConsumer(t, c, group, topic, rec.consume)
		_, ids := sendBatch(t, p, topic, 3, "dlq")
		sent := time.Now()
		rec.waitAttempts(t, ids, 3, 120*time.Second)
		third := time.Now()
		defer func() {
			t.Logf("third deliveries %v after the sends, dead letters %v later; time between deliveries %v",
				third.Sub(sent).Round(100*time.Millisecond), time.Since(third).Round(100*time.Millisecond), rec.gaps(ids[0]))
		}()
		var (
			dl  []client.DeadLetter
			err error
		)
		if !waitFor(120*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			dl, err = c.Admin.DeadLetters(ctx, group, client.DeadLetterQuery{})
			return err == nil && len(dl) >= len(ids)
		}) {
			t.Fatalf("%d dead letters of %s, want %d (last error %v)", len(dl), group, len(ids), err)
		}
		dead := map[string]bool{}
		for _, d := range dl {
			dead[d.MsgID] = true
			if d.OriginTopic != topic {
				t.Errorf("dead letter %s: origin topic %q, want %s", d.MsgID, d.OriginTopic, topic)
			}
		}
		for _, id := range ids {
			if !dead[id] {
				t.Errorf("%s not among the dead letters %v", id, dead)
			}
		}
		// Once dead-lettered, no more deliveries.
		time.Sleep(3 * time.Second)
		for _, id := range ids {
			if a := rec.get(id); !slices.Equal(a, []int32{1, 2, 3}) {
				t.Errorf("%s: attempts %v, want [1 2 3]", id, a)
			}
		}
	})
}

// TestPushFIFO: a push consumer of a FIFO group gets each message group's
// messages in the order sent, each once, even when one of them fails
// once: the FIFO push consumer retries it locally (the broker keeps it
// invisible meanwhile: auto-renew) and the queue's next messages wait.
//
// The consumer caches one message per queue, so each receive asks for one:
// rocketmq-clients/golang v5.1.4's FIFO consume service goes on with the
// next message of a batch while a failed one waits for its local retry
// (consumer_service.go consumeIteratively), which breaks the order within
// a batch whatever the broker does.
func TestPushFIFO(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := newTopic(t, c, "pushfifo", "FIFO", 2)
		group := newGroup(t, c, "pushfifog", "--fifo", "--retry-backoff", "1s")
		p := newProducer(t, c, rmq.WithTopics(topic))
		var (
			mu     sync.Mutex
			order  = map[string][]int{}
			failed = map[string]bool{}
		)
		rec := newPushRecorder(func(string, int32) rmq.ConsumerResult { return rmq.SUCCESS })
		newPushConsumer(t, c, group, topic, func(mv *rmq.MessageView) rmq.ConsumerResult {
			g := deref(mv.GetMessageGroup())
			seq, _ := strconv.Atoi(mv.GetProperties()["seq"])
			mu.Lock()
			defer mu.Unlock()
			if seq == 3 && !failed[g] {
				failed[g] = true
				return rmq.FAILURE
			}
			order[g] = append(order[g], seq)
			return rec.consume(mv)
		}, rmq.WithPushMaxCacheMessageCount(1))
		groups := []string{"fa", "fb", "fc"}
		var ids []string
		for seq := range 8 {
			for _, g := range groups {
				m := testMsg(topic, seq, "fifo")
				m.group = g
				m.props["seq"] = strconv.Itoa(seq)
				ids = append(ids, sendAll(t, p, []v5msg{m})...)
			}
		}
		rec.waitAttempts(t, ids, 1, 90*time.Second)
		waitAcked(t, c, group, topic, 30*time.Second)
		mu.Lock()
		defer mu.Unlock()
		for _, g := range groups {
			if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order[g], want) {
				t.Errorf("message group %s consumed in the order %v, want %v", g, order[g], want)
			}
		}
	})
}
