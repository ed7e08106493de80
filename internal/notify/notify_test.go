package notify

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestNoWakeUpLost: waiters that take the channel, check a condition and
// then wait never miss the Notify that follows a change, however the calls
// of many notifiers and waiters interleave.
func TestNoWakeUpLost(t *testing.T) {
	const (
		waiters   = 16
		notifiers = 4
		steps     = 2000
	)
	var s Signal
	var counter atomic.Int64
	var wg sync.WaitGroup
	stuck := make(chan int64, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ch := s.C()
				seen := counter.Load()
				if seen >= notifiers*steps {
					return
				}
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					stuck <- seen
					return
				}
			}
		}()
	}
	for range notifiers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range steps {
				counter.Add(1)
				s.Notify()
			}
		}()
	}
	wg.Wait()
	close(stuck)
	for seen := range stuck {
		t.Errorf("a waiter slept through a Notify after seeing %d of %d changes", seen, notifiers*steps)
	}
}

// TestZeroValueAndRepeatedNotify: Notify without waiters is harmless, and a
// channel taken before a Notify is closed by it while a later one is not.
func TestZeroValueAndRepeatedNotify(t *testing.T) {
	var s Signal
	s.Notify()
	s.Notify()
	a := s.C()
	if b := s.C(); a != b {
		t.Fatal("two C calls without a Notify between them gave different channels")
	}
	s.Notify()
	select {
	case <-a:
	default:
		t.Fatal("Notify did not close the channel taken before it")
	}
	select {
	case <-s.C():
		t.Fatal("a channel taken after the Notify is already closed")
	default:
	}
}
