package pace

import (
	"context"
	"testing"
	"time"
)

// TestSleepUntil: it returns no earlier than the time asked for, and at
// once when the context is done.
func TestSleepUntil(t *testing.T) {
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 3 * time.Millisecond} {
		at := time.Now().Add(d)
		SleepUntil(context.Background(), at)
		if now := time.Now(); now.Before(at) {
			t.Errorf("asked to sleep until %v, returned %v early", at, at.Sub(now))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	SleepUntil(ctx, start.Add(time.Hour))
	if time.Since(start) > time.Minute {
		t.Error("a done context did not end the sleep")
	}
}
