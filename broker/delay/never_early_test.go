package delay

import (
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// Millisecond clocks: store timestamps, tag codes and TIMER_OUT_MS are ms,
// the clocks they come from are not. These tests put a virtual clock between
// two milliseconds and check that no delivery precedes the true due instant.

// TestTimerDelayRoundsUp: TIMER_DELAY_MS and TIMER_DELAY_SEC count from the
// broker's clock rounded up to the millisecond, so TIMER_OUT_MS is never
// before the instant of the send plus the delay.
func TestTimerDelayRoundsUp(t *testing.T) {
	o := DefaultBrokerOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	vc := NewVirtualClock(t0.Add(600 * time.Microsecond))
	o.Clock = vc
	for _, tc := range []struct {
		prop, value string
		delay       time.Duration
	}{
		{message.PropertyTimerDelayMS, "250", 250 * time.Millisecond},
		{message.PropertyTimerDelaySec, "3", 3 * time.Second},
	} {
		m := &message.Ext{Message: message.Message{Topic: "t", Properties: map[string]string{tc.prop: tc.value}}}
		if err := o.Schedule(m, "b"); err != nil {
			t.Fatal(err)
		}
		due, _ := strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
		if truth := vc.Now().Add(tc.delay); time.UnixMilli(due).Before(truth) {
			t.Errorf("%s=%s sent at %v: due %v, %v before %v", tc.prop, tc.value, vc.Now().Format(time.StampMicro),
				time.UnixMilli(due).Format(time.StampMicro), truth.Sub(time.UnixMilli(due)), truth.Format(time.StampMicro))
		}
	}
	// On a millisecond the due time is exact: no millisecond is added.
	vc.Set(t0.Add(time.Second))
	m := &message.Ext{Message: message.Message{Topic: "t", Properties: map[string]string{message.PropertyTimerDelayMS: "250"}}}
	if err := o.Schedule(m, "b"); err != nil {
		t.Fatal(err)
	}
	if got, want := m.Properties[message.PropertyTimerOutMS], strconv.FormatInt(t0.Add(1250*time.Millisecond).UnixMilli(), 10); got != want {
		t.Errorf("TIMER_DELAY_MS=250 on a millisecond: due %s, want %s", got, want)
	}
}

// TestLevelNeverEarlyWithinTheMillisecond: a delay-level message stored
// 0.6 ms into a millisecond has a store timestamp 0.6 ms before the instant
// it was stored; at store time + delay + 0.3 ms (past its tag code, before
// its true due instant) it is not delivered; 1 ms after the tag code it is.
func TestLevelNeverEarlyWithinTheMillisecond(t *testing.T) {
	vc := NewVirtualClock(t0.Add(600 * time.Microsecond))
	ts := startTestService(t, t.TempDir(), func(so *store.Options, o *BrokerOptions) {
		so.Now, so.CommitLog.Now = vc.Now, vc.Now
		o.Clock = vc
		o.Levels = "300ms"
	})
	stored := vc.Now()
	res := ts.send(t, &message.Ext{Message: message.Message{Topic: "lv", Body: []byte("x"),
		Properties: map[string]string{message.PropertyDelayLevel: "1"}}})
	if res.StoreTimestamp != t0.UnixMilli() {
		t.Fatalf("stored at %d ms, want %d (truncated)", res.StoreTimestamp, t0.UnixMilli())
	}
	vc.Set(t0.Add(300*time.Millisecond + 300*time.Microsecond)) // tag code + 0.3 ms
	// The runner reads the clock whenever it wakes; give it time to (wrongly)
	// deliver. A correct runner never does, so this cannot flake.
	time.Sleep(200 * time.Millisecond)
	if got := ts.pullAll(t, "lv", 0, 0); len(got) != 0 {
		t.Fatalf("delivered at %v, %v before it was due (stored at %v + 300 ms)", vc.Now().Format(time.StampMicro),
			stored.Add(300*time.Millisecond).Sub(vc.Now()), stored.Format(time.StampMicro))
	}
	vc.Set(t0.Add(301 * time.Millisecond))
	testutil.WaitFor(t, 5*time.Second, "the delayed message", func() error {
		if got := ts.pullAll(t, "lv", 0, 0); len(got) != 1 {
			return errNotYet(len(got))
		}
		return nil
	})
}

// TestLevelStatusNextDeliverNeverEarly: the next delivery a level reports
// is the instant the runner waits for, not the truncated tag code.
func TestLevelStatusNextDeliverNeverEarly(t *testing.T) {
	vc := NewVirtualClock(t0.Add(600 * time.Microsecond))
	ts := startTestService(t, t.TempDir(), func(so *store.Options, o *BrokerOptions) {
		so.Now, so.CommitLog.Now = vc.Now, vc.Now
		o.Clock = vc
		o.Levels = "300ms"
	})
	stored := vc.Now()
	ts.send(t, &message.Ext{Message: message.Message{Topic: "lv", Body: []byte("x"),
		Properties: map[string]string{message.PropertyDelayLevel: "1"}}})
	testutil.WaitFor(t, 5*time.Second, "the level's head", func() error {
		if st := ts.svc.levelStatus()[0]; st.NextDeliver.IsZero() {
			return errNotYet(int(st.Pending))
		}
		return nil
	})
	if next, truth := ts.svc.levelStatus()[0].NextDeliver, stored.Add(300*time.Millisecond); next.Before(truth) {
		t.Fatalf("next delivery reported at %v, before %v", next.Format(time.StampMicro), truth.Format(time.StampMicro))
	}
}

// TestEngineFiresAtDueNotBefore: the timer engine fires an entry due at D
// ms not at D − 0.5 ms (the clock reads D − 1 in whole ms), and at D.
func TestEngineFiresAtDueNotBefore(t *testing.T) {
	vc := NewVirtualClock(t0)
	h := newFakeHost(vc)
	e := testEngine(t, t.TempDir(), h)
	defer e.Close()
	due := t0.Add(2 * time.Second).UnixMilli()
	h.send(0, due)
	settle(t, e)
	vc.Set(time.UnixMilli(due).Add(-500 * time.Microsecond))
	settle(t, e)
	if n := h.deliveredCount(); n != 0 {
		t.Fatalf("fired at %v, 0.5 ms before its due time", vc.Now().Format(time.StampMicro))
	}
	vc.Set(time.UnixMilli(due))
	settle(t, e)
	checkDeliveries(t, h.deliveries(), map[int]int64{0: due}, 0, true)
}

type errNotYet int

func (n errNotYet) Error() string { return strconv.Itoa(int(n)) + " so far" }
