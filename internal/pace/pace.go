// Package pace sleeps until a scheduled time with sub-millisecond
// precision, for the benches that send on a fixed schedule and time each
// message from the moment it was scheduled.
package pace

import (
	"context"
	"syscall"
	"time"
)

// coarseSlack is how late a Go timer may fire when the process is
// otherwise idle: the runtime's poller sleeps in whole milliseconds, so a
// 100 µs sleep typically lasts about 1.1 ms.
const coarseSlack = 2 * time.Millisecond

// SleepUntil sleeps until t or until ctx is done. Go's timer covers all but
// the last coarseSlack of the wait; the rest is slept with nanosleep(2),
// which holds its thread for that stretch but wakes within tens of
// microseconds. With Go's timer alone, a sender at 10 000 msgs/s would wake
// a millisecond late and send ten messages at once, and that lateness of
// the harness would be counted as latency of the system under test.
func SleepUntil(ctx context.Context, t time.Time) {
	if d := time.Until(t) - coarseSlack; d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
	}
	if ctx.Err() != nil {
		return
	}
	if d := time.Until(t); d > 0 {
		preciseSleep(d)
	}
}

// preciseSleep sleeps for d with nanosleep(2), resuming after a signal.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
