// Package notify provides a broadcast signal: any number of goroutines wait
// for the next Notify without missing it and without a goroutine per waiter.
package notify

import "sync"

// Signal wakes every goroutine waiting on the channel returned by C when
// Notify is called. The zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns a channel that is closed by the next call to Notify. Check the
// condition you wait for after taking the channel, then wait on it.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	ch := s.ch
	s.mu.Unlock()
	return ch
}

// Notify wakes all current waiters.
func (s *Signal) Notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}
