package delay

import (
	"strconv"
	"testing"
	"time"

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
