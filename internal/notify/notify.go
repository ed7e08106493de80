// Package notify provides a broadcast signal: any number of goroutines wait
// for the next Notify without missing it and without a goroutine per waiter.
package notify

import "sync/atomic"

// Signal wakes every goroutine waiting on the channel returned by C when
// Notify is called. The zero value is ready to use. Both methods are
// lock-free: a sync-mode flush wakes dozens of appenders at once, and each
// of them takes the next channel right away.
type Signal struct {
	ch atomic.Pointer[chan struct{}]
}

// C returns a channel that is closed by the next call to Notify. Check the
// condition you wait for after taking the channel, then wait on it.
func (s *Signal) C() <-chan struct{} {
	for {
		if p := s.ch.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if s.ch.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// Notify wakes all current waiters.
func (s *Signal) Notify() {
	if p := s.ch.Swap(nil); p != nil {
		close(*p)
	}
}
