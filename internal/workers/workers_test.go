package workers

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestPoolReuses: functions given one after the other run on one
// goroutine, which waits between them; every function runs exactly once.
func TestPoolReuses(t *testing.T) {
	wp := New(time.Minute, 4)
	defer wp.Close()
	var ran atomic.Int64
	for i := range 100 {
		done := make(chan struct{})
		wp.Go(func() {
			ran.Add(1)
			close(done)
		})
		<-done
		// The worker goes back to the idle list after its function.
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("worker %d idle", i), func() bool { return wp.Idle() == 1 })
	}
	if n := ran.Load(); n != 100 {
		t.Fatalf("%d functions ran, want 100", n)
	}
}

// TestPoolConcurrent: many functions at once each run once, on at
// most as many goroutines as ran at once, and no more than maxIdle stay.
func TestPoolConcurrent(t *testing.T) {
	wp := New(time.Minute, 3)
	const n = 2000
	var ran atomic.Int64
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		wp.Go(func() {
			ran.Add(1)
			if ran.Load()%7 == 0 {
				time.Sleep(time.Microsecond)
			}
			wg.Done()
		})
	}
	wg.Wait()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("idle workers %d, want ≤ 3", wp.Idle()), func() bool { return wp.Idle() <= 3 })
	wp.Close()
	if got := ran.Load(); got != n {
		t.Fatalf("%d functions ran, want %d", got, n)
	}
	if got := wp.Idle(); got != 0 {
		t.Fatalf("%d idle workers after close", got)
	}
}

// TestPoolLinger: an idle worker ends after linger; a later
// function gets a new one.
func TestPoolLinger(t *testing.T) {
	wp := New(20*time.Millisecond, 4)
	defer wp.Close()
	done := make(chan struct{})
	wp.Go(func() { close(done) })
	<-done
	testutil.Eventually(t, 10*time.Second, "the idle worker to end", func() bool { return wp.Idle() == 0 })
	done = make(chan struct{})
	wp.Go(func() { close(done) })
	<-done
}

// TestPoolCloseWaits: close waits for a running function and ends
// the idle workers (goleak in TestMain checks that none is left).
func TestPoolCloseWaits(t *testing.T) {
	wp := New(time.Hour, 4)
	idle := make(chan struct{})
	wp.Go(func() { close(idle) })
	<-idle
	release := make(chan struct{})
	var finished atomic.Bool
	started := make(chan struct{})
	wp.Go(func() {
		close(started)
		<-release
		finished.Store(true)
	})
	<-started
	closed := make(chan struct{})
	go func() {
		wp.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("close returned while a function ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if !finished.Load() {
		t.Fatal("close returned before the running function ended")
	}
}

// TestNilPool: a nil pool runs each function on a goroutine of its own and
// has nothing to close.
func TestNilPool(t *testing.T) {
	var wp *Pool
	done := make(chan struct{})
	wp.Go(func() { close(done) })
	<-done
	wp.Close()
}
