package membership

import "sync"

type event struct {
	join bool
	m    Member
}

// eventQueue hands membership events from memberlist (which holds its node
// lock while it notifies) to the user's callbacks on a goroutine of its
// own. The queue is unbounded so memberlist never waits on a slow callback.
type eventQueue struct {
	onJoin, onLeave func(Member)

	mu      sync.Mutex // mu protects pending and stopped
	pending []event
	stopped bool

	wake chan struct{} // cap 1: pending has events
	quit chan struct{}
	done chan struct{}
}

func newEventQueue(onJoin, onLeave func(Member)) *eventQueue {
	q := &eventQueue{
		onJoin:  onJoin,
		onLeave: onLeave,
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go q.run()
	return q
}

func (q *eventQueue) push(e event) {
	if (e.join && q.onJoin == nil) || (!e.join && q.onLeave == nil) {
		return
	}
	q.mu.Lock()
	if !q.stopped {
		q.pending = append(q.pending, e)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) run() {
	defer close(q.done)
	for {
		select {
		case <-q.quit:
			return
		case <-q.wake:
		}
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		for _, e := range batch {
			select {
			case <-q.quit:
				return
			default:
			}
			if e.join {
				q.onJoin(e.m)
			} else {
				q.onLeave(e.m)
			}
		}
	}
}

// stop drops pending events and waits for a running callback to return.
func (q *eventQueue) stop() {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return
	}
	q.stopped = true
	q.pending = nil
	q.mu.Unlock()
	close(q.quit)
	<-q.done
}
