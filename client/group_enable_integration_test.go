package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConsumeEnableStopsAndResumesGroup: a group stopped with
// SubscriptionGroupSpec.ConsumeEnable=false receives nothing more — its
// push consumer's pulls and a simple consumer's receives are refused with
// ErrNoPermission, and the push consumer backs off instead of asking again
// at once — while sends go on; enabled again, it receives everything sent
// meanwhile: nothing is lost.
func TestConsumeEnableStopsAndResumesGroup(t *testing.T) {
	e := startEnv(t, 1, 1)
	ctx := context.Background()
	const queues = 2
	topic := e.topic(queues)
	p := e.producer()
	off, on := false, true

	var mu sync.Mutex
	got := map[string]int{}
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	var refusals atomic.Int64
	var firstRefusal atomic.Int64 // unix ns
	var lastErr atomic.Pointer[error]
	e.push("billing", topic, "*", ConcurrentListener(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)]++
		}
		return ConsumeSuccess
	}), WithRefusalHandler(func(err error) {
		if refusals.Add(1) == 1 {
			firstRefusal.Store(time.Now().UnixNano())
		}
		lastErr.Store(&err)
	}), WithConsumeFrom(ConsumeFromFirst))
	send := func(prefix string, n int) {
		e.sendN(p, topic, n, func(i int) *Message { return &Message{Topic: topic, Body: []byte(fmt.Sprint(prefix, i))} })
	}
	send("a", 10)
	e.waitFor(30*time.Second, "the first 10 consumed", func() error {
		if n := received(); n != 10 {
			return fmt.Errorf("%d consumed", n)
		}
		return nil
	})

	if err := e.admin.UpdateSubscriptionGroup(ctx, SubscriptionGroupSpec{Name: "billing", ConsumeEnable: &off}); err != nil {
		t.Fatal(err)
	}
	gs, err := e.admin.SubscriptionGroup(ctx, "billing")
	if err != nil || len(gs) != 1 || gs[0].ConsumeEnable {
		t.Fatalf("declaration after stopping: %+v %v", gs, err)
	}
	e.waitFor(30*time.Second, "a pull refused", func() error {
		if refusals.Load() == 0 {
			return errors.New("no refusal yet")
		}
		return nil
	})
	if err := *lastErr.Load(); !errors.Is(err, ErrNoPermission) ||
		!strings.Contains(err.Error(), "consumer group billing is stopped: its consumption was disabled (bolide group update billing --consume-enable)") {
		t.Fatalf("refusal: %v", err)
	}

	// Sends go on; the stopped group receives none of them, pull after pull.
	send("b", 10)
	seen := refusals.Load()
	e.waitFor(30*time.Second, "more pulls refused after the sends", func() error {
		if n := refusals.Load(); n < seen+2*queues {
			return fmt.Errorf("%d refusals since the sends", n-seen)
		}
		return nil
	})
	if n := received(); n != 10 {
		t.Fatalf("the stopped group consumed %d messages, want the first 10", n)
	}
	// No hot loop: after a refusal each queue waits at least the pull
	// backoff (1s) before it asks again.
	elapsed := time.Duration(time.Now().UnixNano() - firstRefusal.Load())
	if n, bound := refusals.Load(), int64(queues)*(int64(elapsed/time.Second)+2); n > bound {
		t.Fatalf("%d refusals in %v: the consumer does not back off (at most %d)", n, elapsed, bound)
	}

	// A simple consumer (POP receive) of a stopped group is refused too.
	if err := e.admin.UpdateSubscriptionGroup(ctx, SubscriptionGroupSpec{Name: "audit", ConsumeEnable: &off}); err != nil {
		t.Fatal(err)
	}
	sc := e.simple("audit", map[string]string{topic: "*"}, time.Second)
	if _, err := sc.Receive(ctx, 16, time.Minute); !errors.Is(err, ErrNoPermission) || !strings.Contains(err.Error(), "consumer group audit is stopped") {
		t.Fatalf("receive of a stopped group: %v", err)
	}

	// Enabled again: both resume; nothing is lost.
	for _, g := range []string{"billing", "audit"} {
		if err := e.admin.UpdateSubscriptionGroup(ctx, SubscriptionGroupSpec{Name: g, ConsumeEnable: &on}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor(30*time.Second, "all 20 consumed after enabling", func() error {
		if n := received(); n != 20 {
			return fmt.Errorf("%d consumed", n)
		}
		return nil
	})
	popped := map[string]bool{}
	e.receiveUntil(sc, time.Minute, func(m *MessageView) {
		popped[string(m.Body)] = true
		if err := sc.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}, func() error {
		if len(popped) != 20 {
			return fmt.Errorf("%d received", len(popped))
		}
		return nil
	})
}
