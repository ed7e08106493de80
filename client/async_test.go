package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// asyncOutcome is what one SendAsync callback got.
type asyncOutcome struct {
	body  string
	res   *SendResult
	err   error
	calls int
}

// asyncRecorder records the outcome of every SendAsync of a test.
type asyncRecorder struct {
	t     *testing.T
	topic string // of verifyStored
	done  atomic.Int64
	mu    sync.Mutex
	wg    sync.WaitGroup
	by    map[string]*asyncOutcome // body → outcome
}

func newAsyncRecorder(t *testing.T) *asyncRecorder {
	return &asyncRecorder{t: t, by: make(map[string]*asyncOutcome)}
}

// send sends a message with body through p.SendAsync and records its
// outcome.
func (r *asyncRecorder) send(ctx context.Context, p *Producer, topic, body string, opts ...SendOption) {
	r.mu.Lock()
	if r.by[body] != nil {
		r.mu.Unlock()
		r.t.Fatalf("body %q sent twice", body)
	}
	o := &asyncOutcome{body: body}
	r.by[body] = o
	r.mu.Unlock()
	r.wg.Add(1)
	p.SendAsync(ctx, &Message{Topic: topic, Body: []byte(body)}, func(res *SendResult, err error) {
		r.mu.Lock()
		o.calls++
		if o.calls == 1 {
			r.done.Add(1)
			r.wg.Done()
		}
		o.res, o.err = res, err
		r.mu.Unlock()
	}, opts...)
}

// wait waits for every callback, then for stray second calls.
func (r *asyncRecorder) wait() {
	r.t.Helper()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		r.t.Fatal("callbacks missing after 60s")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for body, o := range r.by {
		if o.calls != 1 {
			r.t.Errorf("callback of %q called %d times", body, o.calls)
		}
		if (o.res == nil) == (o.err == nil) {
			r.t.Errorf("callback of %q: result %v and error %v", body, o.res, o.err)
		}
	}
}

// verifyStored checks every successful send against its broker: the
// message at the queue and offset its result names has its body and id,
// and no two results name the same place.
func (r *asyncRecorder) verifyStored(e *env) (ok int) {
	r.t.Helper()
	ctx := context.Background()
	type place struct {
		q   MessageQueue
		off int64
	}
	want := map[place]*asyncOutcome{}
	queues := map[MessageQueue]int64{} // queue → highest offset + 1
	r.mu.Lock()
	for _, o := range r.by {
		if o.err != nil {
			continue
		}
		q := MessageQueue{Topic: "", BrokerName: o.res.BrokerName, QueueID: o.res.QueueID}
		pl := place{q, o.res.QueueOffset}
		if prev := want[pl]; prev != nil {
			r.t.Errorf("%q and %q both stored at %v offset %d", prev.body, o.body, q, pl.off)
		}
		want[pl] = o
		queues[q] = max(queues[q], o.res.QueueOffset+1)
	}
	r.mu.Unlock()
	for q, end := range queues {
		mq := q
		mq.Topic = r.topic
		var got []*MessageExt
		// An acknowledged message reaches its queue's index a moment
		// later (the broker dispatches after the append): poll.
		from := int64(0)
		e.waitFor(10*time.Second, fmt.Sprintf("%v up to offset %d", mq, end), func() error {
			for from < end {
				msgs, next, err := e.admin.BrowseQueue(ctx, mq, from, 256)
				if err != nil {
					return fmt.Errorf("browse from %d: %w", from, err)
				}
				if len(msgs) == 0 {
					return fmt.Errorf("browse from %d: nothing yet", from)
				}
				got = append(got, msgs...)
				from = next
			}
			return nil
		})
		for _, m := range got {
			o := want[place{q, m.QueueOffset}]
			if o == nil {
				continue // another test message (a failed send may still be stored)
			}
			if string(m.Body) != o.body || m.MsgID != o.res.MsgID {
				r.t.Errorf("%v offset %d holds %q id %s, the callback of %q was told id %s",
					q, m.QueueOffset, m.Body, m.MsgID, o.body, o.res.MsgID)
			}
			delete(want, place{q, m.QueueOffset})
			ok++
		}
	}
	for pl, o := range want {
		r.t.Errorf("%q: result names %v offset %d, not found there", o.body, pl.q, pl.off)
	}
	return ok
}

// topic is set by the tests that verify what was stored.
func (r *asyncRecorder) withTopic(topic string) *asyncRecorder {
	r.topic = topic
	return r
}

// TestSendAsyncCoalesces: many goroutines send asynchronously to one
// topic; every callback is called once with its own message's result,
// fewer requests than messages were made, and each queue holds the
// messages of each goroutine in the order it sent them.
func TestSendAsyncCoalesces(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ProducerOption
	}{
		{"frame", nil},
		{"grpc", []ProducerOption{WithTransport(TransportGRPC)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, 1, 1)
			topic := e.topic(4)
			p := e.producer(tc.opts...)
			var requests, merged atomic.Int64
			p.testBeforeBatch = func(n int) {
				requests.Add(1)
				if n > 1 {
					merged.Add(1)
				}
			}
			r := newAsyncRecorder(t).withTopic(topic)
			const senders, each = 8, 400
			var wg sync.WaitGroup
			for g := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						r.send(context.Background(), p, topic, fmt.Sprintf("g%d-%05d", g, i))
					}
				}()
			}
			wg.Wait()
			r.wait()
			for body, o := range r.by {
				if o.err != nil {
					t.Fatalf("%s: %v", body, o.err)
				}
			}
			if n := r.verifyStored(e); n != senders*each {
				t.Fatalf("%d messages found where their results say, want %d", n, senders*each)
			}
			if requests.Load() >= senders*each || merged.Load() == 0 {
				t.Fatalf("%d requests (%d of several messages) for %d messages", requests.Load(), merged.Load(), senders*each)
			}
			// Per queue, each goroutine's messages are in its order.
			last := map[string]int64{} // queue and goroutine → last offset
			for g := range senders {
				for i := range each {
					o := r.by[fmt.Sprintf("g%d-%05d", g, i)]
					k := fmt.Sprintf("%d/%d", o.res.QueueID, g)
					if prev, ok := last[k]; ok && o.res.QueueOffset <= prev {
						t.Fatalf("g%d message %d at offset %d of queue %d, after an earlier one at %d", g, i, o.res.QueueOffset, o.res.QueueID, prev)
					}
					last[k] = o.res.QueueOffset
				}
			}
			t.Logf("%d messages in %d requests", senders*each, requests.Load())
		})
	}
}

// TestSendAsyncOrderPerQueue: sends to one queue (WithQueue) and with one
// sharding key are stored in the order SendAsync took them, in batches.
func TestSendAsyncOrderPerQueue(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(4)
	p := e.producer()
	var merged atomic.Int64
	p.testBeforeBatch = func(n int) {
		if n > 1 {
			merged.Add(1)
		}
	}
	r := newAsyncRecorder(t).withTopic(topic)
	q := MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 2}
	const n = 1000
	for i := range n {
		r.send(context.Background(), p, topic, fmt.Sprintf("q-%05d", i), WithQueue(q))
		r.send(context.Background(), p, topic, fmt.Sprintf("k-%05d", i), WithShardingKey("order-7"))
	}
	r.wait()
	if r.verifyStored(e) != 2*n {
		t.Fatal("not every message where its result says")
	}
	for _, prefix := range []string{"q", "k"} {
		queue := int32(-1)
		prev := int64(-1)
		for i := range n {
			o := r.by[fmt.Sprintf("%s-%05d", prefix, i)]
			if o.err != nil {
				t.Fatalf("%s: %v", o.body, o.err)
			}
			if queue >= 0 && o.res.QueueID != queue {
				t.Fatalf("%s went to queue %d, the ones before to %d", o.body, o.res.QueueID, queue)
			}
			if o.res.QueueOffset <= prev {
				t.Fatalf("%s at offset %d, after one at %d", o.body, o.res.QueueOffset, prev)
			}
			queue, prev = o.res.QueueID, o.res.QueueOffset
		}
		if prefix == "q" && queue != 2 {
			t.Fatalf("WithQueue sends went to queue %d", queue)
		}
	}
	if merged.Load() == 0 {
		t.Fatal("no request held several messages")
	}
}

// holdFirst makes p's first coalesced request wait until release is
// closed, so that everything sent meanwhile waits behind it.
func holdFirst(p *Producer) (sizes func() []int, release func()) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var seen []int
	p.testBeforeBatch = func(n int) {
		mu.Lock()
		first := len(seen) == 0
		seen = append(seen, n)
		mu.Unlock()
		if first {
			<-gate
		}
	}
	var once sync.Once
	return func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), seen...)
		}, func() {
			once.Do(func() { close(gate) })
		}
}

// waitFirstRequest waits until the request holdFirst holds is on its way.
func waitFirstRequest(e *env, sizes func() []int) {
	e.waitFor(5*time.Second, "first request", func() error {
		if len(sizes()) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}

// TestSendAsyncBatchLimits: what waits behind a request goes in batches
// within WithAsyncBatch's count and bytes; a message larger than the byte
// bound goes alone.
func TestSendAsyncBatchLimits(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p := e.producer(WithAsyncBatch(10, 8<<10))
	sizes, release := holdFirst(p)
	defer release()
	r := newAsyncRecorder(t).withTopic(topic)
	r.send(context.Background(), p, topic, "first")
	waitFirstRequest(e, sizes)
	// 25 small messages: 10 a request; the last 5 share one with two of
	// the five 3 KiB ones (about 7 KiB), two more go together (a third
	// would pass 8 KiB), then the last and the 20 KiB one each alone.
	for i := range 25 {
		r.send(context.Background(), p, topic, fmt.Sprintf("small-%02d", i))
	}
	big := make([]byte, 3<<10)
	for i := range 5 {
		for j := range big {
			big[j] = byte('a' + i)
		}
		r.send(context.Background(), p, topic, string(big))
	}
	r.send(context.Background(), p, topic, string(make([]byte, 20<<10))) // alone
	release()
	r.wait()
	for _, o := range r.by {
		if o.err != nil {
			t.Fatalf("%.10q: %v", o.body, o.err)
		}
	}
	if r.verifyStored(e) != 32 {
		t.Fatal("not every message where its result says")
	}
	want := []int{1, 10, 10, 7, 2, 1, 1}
	if got := sizes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests of %v messages, want %v", got, want)
	}
}

// TestSendAsyncContexts: only messages sent with the same context share
// a request; one whose context was cancelled while it waited fails with
// the context's error and the others are sent.
func TestSendAsyncContexts(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p := e.producer()
	sizes, release := holdFirst(p)
	defer release()
	r := newAsyncRecorder(t).withTopic(topic)
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	r.send(ctxA, p, topic, "a0")
	waitFirstRequest(e, sizes)
	r.send(ctxA, p, topic, "a1")
	r.send(ctxA, p, topic, "a2")
	r.send(ctxB, p, topic, "b0")
	r.send(ctxB, p, topic, "b1")
	r.send(ctxA, p, topic, "a3")
	r.send(context.Background(), p, topic, "bg0")
	r.send(context.Background(), p, topic, "bg1")
	cancelB()
	release()
	r.wait()
	for body, o := range r.by {
		switch {
		case body[0] == 'b' && body[1] != 'g':
			if !errors.Is(o.err, context.Canceled) {
				t.Errorf("%s: %v, want the cancellation", body, o.err)
			}
		case o.err != nil:
			t.Errorf("%s: %v", body, o.err)
		}
	}
	if r.verifyStored(e) != 6 {
		t.Fatal("not every message where its result says")
	}
	if got := fmt.Sprint(sizes()); got != "[1 2 2 1 2]" {
		t.Fatalf("requests of %s messages, want [1 2 2 1 2]", got)
	}
}

// TestSendAsyncBatchRefused: a broker that refuses a coalesced batch for
// what it holds (more messages than its batch limit, one body above its
// size limit) has the messages sent again one by one, so each gets the
// answer it would have had alone.
func TestSendAsyncBatchRefused(t *testing.T) {
	e := startEnvWith(t, cluster.Options{Broker: func(o *broker.Options) {
		o.MaxBatchMessages = 4
		o.MaxMessageSize = 2048
	}})
	topic := e.topic(2)
	p := e.producer()
	sizes, release := holdFirst(p)
	defer release()
	r := newAsyncRecorder(t).withTopic(topic)
	r.send(context.Background(), p, topic, "first")
	waitFirstRequest(e, sizes)
	for i := range 20 {
		body := fmt.Sprintf("m-%02d", i)
		if i == 13 {
			body = string(make([]byte, 4096)) // above the broker's limit
		}
		r.send(context.Background(), p, topic, body)
	}
	release()
	r.wait()
	failed := 0
	for body, o := range r.by {
		if o.err == nil {
			continue
		}
		failed++
		if len(body) != 4096 || !errors.Is(o.err, ErrMessageTooLarge) {
			t.Errorf("%.10q: %v", body, o.err)
		}
	}
	if failed != 1 {
		t.Fatalf("%d sends failed, want the one too large", failed)
	}
	if r.verifyStored(e) != 20 {
		t.Fatal("not every message where its result says")
	}
	if got := sizes(); len(got) != 2 || got[1] != 20 {
		t.Fatalf("requests of %v messages, want [1 20] (then one by one)", got)
	}
}

// TestSendAsyncBrokerStops: a broker stopped while asynchronous sends are
// queued and in flight: every callback is called once, each success is
// stored where its result says (on the other broker, or on the stopped
// one once it is back), and Close returns.
func TestSendAsyncBrokerStops(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	p, err := NewProducer("pg", e.popts(WithSendTimeout(2*time.Second), WithAsyncSendLimit(256))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := newAsyncRecorder(t).withTopic(topic)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		// Stop broker-a once a quarter of the sends have their outcome.
		_ = cluster.Poll(30*time.Second, func() error {
			if n := r.done.Load(); n < 1000 {
				return fmt.Errorf("%d callbacks", n)
			}
			return nil
		})
		e.c.StopBroker(0)
	}()
	const n = 4000
	for i := range n {
		r.send(context.Background(), p, topic, fmt.Sprintf("m-%05d", i))
	}
	<-stopped
	r.wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	okA, okB, failed := 0, 0, 0
	for _, o := range r.by {
		switch {
		case o.err != nil:
			failed++
		case o.res.BrokerName == "broker-a":
			okA++
		default:
			okB++
		}
	}
	t.Logf("broker-a %d, broker-b %d, failed %d", okA, okB, failed)
	if okB == 0 {
		t.Fatal("nothing went to the broker left running")
	}
	e.c.StartBroker(0)
	e.waitFor(20*time.Second, "broker-a routed again", func() error {
		ri, err := e.admin.Route(context.Background(), topic)
		if err != nil {
			return err
		}
		if len(ri.Brokers) != 2 {
			return fmt.Errorf("%d brokers in the route", len(ri.Brokers))
		}
		return nil
	})
	if got := r.verifyStored(e); got != okA+okB {
		t.Fatalf("%d successes found where their results say, want %d", got, okA+okB)
	}
}

// TestSendAsyncOnlyBrokerStops: with the only broker gone, every message
// queued behind the failing request gets the failure, and Close waits for
// them all.
func TestSendAsyncOnlyBrokerStops(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p, err := NewProducer("pg", e.popts(WithSendTimeout(300*time.Millisecond), WithSendRetries(1))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sizes, release := holdFirst(p)
	r := newAsyncRecorder(t).withTopic(topic)
	r.send(context.Background(), p, topic, "first")
	waitFirstRequest(e, sizes)
	for i := range 300 {
		r.send(context.Background(), p, topic, fmt.Sprintf("m-%03d", i))
	}
	e.c.StopBroker(0)
	release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	for body, o := range r.by {
		if o.calls != 1 {
			t.Errorf("%s: %d callbacks when Close returned", body, o.calls)
		}
		if o.err == nil {
			t.Errorf("%s: stored on a stopped broker: %+v", body, o.res)
		}
	}
	r.mu.Unlock()
	if got := sizes(); len(got) < 2 || got[1] < 2 {
		t.Fatalf("requests of %v messages: the waiting ones did not share one", got)
	}
}

// TestSendAsyncFromCallbacks: callbacks that send again, with a small
// WithAsyncSendLimit and several messages per request, all complete: a
// callback holds neither a slot nor its lane.
func TestSendAsyncFromCallbacks(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p := e.producer(WithAsyncSendLimit(4))
	var merged atomic.Int64
	p.testBeforeBatch = func(n int) {
		if n > 1 {
			merged.Add(1)
		}
	}
	const n = 200
	var wg sync.WaitGroup
	var failed atomic.Int64
	wg.Add(2 * n)
	for i := range n {
		p.SendAsync(context.Background(), &Message{Topic: topic, Body: []byte(fmt.Sprintf("m-%d", i))}, func(_ *SendResult, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
			}
			// A resend from the callback, as an application might do.
			p.SendAsync(context.Background(), &Message{Topic: topic, Body: []byte(fmt.Sprintf("again-%d", i))}, func(_ *SendResult, err error) {
				defer wg.Done()
				if err != nil {
					failed.Add(1)
				}
			})
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callbacks stuck")
	}
	if failed.Load() != 0 {
		t.Fatalf("%d sends failed", failed.Load())
	}
	t.Logf("%d requests of several messages", merged.Load())
}

func TestWithAsyncBatchValidated(t *testing.T) {
	for _, o := range []ProducerOption{WithAsyncBatch(0, 1<<20), WithAsyncBatch(16, 0), WithAsyncBatch(-1, -1)} {
		if _, err := NewProducer("g", o); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("accepted: %v", err)
		}
	}
	p, err := NewProducer("g", WithAsyncBatch(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
}
