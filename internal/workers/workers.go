// Package workers runs functions on goroutines that outlive them, so that
// the next function finds a stack already grown.
//
// A goroutine starts with a small stack (the runtime's adaptive start
// follows the average of all goroutines, most of them idle and shallow)
// and copies it to a bigger one each time a call goes deeper than it has
// room for. Code that starts a goroutine per request, where the request
// runs deep (decoding, the store, the answer's encoding), pays for those
// copies in every request: a tenth of a broker's CPU in sync-flush sends
// served one goroutine each. A Pool keeps a goroutine that finished for a
// while (its linger) and hands it the next function instead.
package workers

import (
	"slices"
	"sync"
	"time"
)

// Pool runs functions on goroutines of its own, as the go statement does,
// but keeps a goroutine that finished for a while and gives it the next
// function. A worker waits at most linger for a function, at most maxIdle
// wait at once, and Close ends the waiting ones and waits for every
// worker: the pool's goroutines are owned.
type Pool struct {
	linger  time.Duration
	maxIdle int

	// mu protects idle and closed.
	mu     sync.Mutex
	idle   []*worker // the waiting workers, the most recent last
	closed bool
	stop   chan struct{} // closed by close
	wg     sync.WaitGroup
}

// worker is one goroutine of a pool. next holds at most one function: the
// one given to it when it was taken off the idle list.
type worker struct {
	next chan func()
}

// New returns a pool whose idle workers wait at most linger for their next
// function, at most maxIdle of them at once.
func New(linger time.Duration, maxIdle int) *Pool {
	return &Pool{linger: linger, maxIdle: maxIdle, stop: make(chan struct{})}
}

// handlerLinger and handlerMaxIdle size a server's pool (ForHandlers):
// enough idle workers for a burst of sync-flush sends or long polls from
// many clients, each waiting a second for the next request.
const (
	handlerLinger  = time.Second
	handlerMaxIdle = 256
)

// ForHandlers returns the pool a server runs its requests on when it does
// not serve them on a connection's reader.
func ForHandlers() *Pool { return New(handlerLinger, handlerMaxIdle) }

// Go runs f on a worker: an idle one when there is one, else a new one;
// on a nil pool, on a goroutine of its own. It is not called once Close
// has begun.
func (wp *Pool) Go(f func()) {
	if wp == nil {
		go f()
		return
	}
	wp.mu.Lock()
	if n := len(wp.idle); n > 0 {
		w := wp.idle[n-1]
		wp.idle[n-1] = nil
		wp.idle = wp.idle[:n-1]
		wp.mu.Unlock()
		w.next <- f // a buffer of one, empty while the worker is idle
		return
	}
	wp.wg.Add(1)
	wp.mu.Unlock()
	go wp.run(f)
}

// run runs f, then the functions the worker is given, until it waited
// linger for none, the pool has enough idle workers or it is closed.
func (wp *Pool) run(f func()) {
	defer wp.wg.Done()
	w := &worker{next: make(chan func(), 1)}
	var t *time.Timer
	for {
		f()
		f = nil
		wp.mu.Lock()
		if wp.closed || len(wp.idle) >= wp.maxIdle {
			wp.mu.Unlock()
			return
		}
		wp.idle = append(wp.idle, w)
		wp.mu.Unlock()
		if t == nil {
			t = time.NewTimer(wp.linger)
		} else {
			t.Reset(wp.linger)
		}
		select {
		case f = <-w.next:
			t.Stop()
			continue
		case <-t.C:
		case <-wp.stop:
			t.Stop()
		}
		// Leave the idle list, unless a Go took the worker meanwhile: its
		// function is on the way and must run.
		if !wp.leave(w) {
			f = <-w.next
			continue
		}
		return
	}
}

// leave takes w off the idle list; false when it is no longer on it.
func (wp *Pool) leave(w *worker) bool {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for i, x := range wp.idle {
		if x == w {
			wp.idle = slices.Delete(wp.idle, i, i+1)
			return true
		}
	}
	return false
}

// Close ends the idle workers and waits for every worker to end, the
// functions they run included. A nil pool has nothing to close.
func (wp *Pool) Close() {
	if wp == nil {
		return
	}
	wp.mu.Lock()
	if !wp.closed {
		wp.closed = true
		close(wp.stop)
	}
	wp.mu.Unlock()
	wp.wg.Wait()
}

// Idle returns the count of idle workers (tests).
func (wp *Pool) Idle() int {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return len(wp.idle)
}
