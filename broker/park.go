package broker

import (
	"context"
	"sync"
	"time"
)

// A parked pull is a long poll held without a goroutine of its own: it
// waits in its queue's set of parked pulls, and whoever reports a message
// arriving on the queue (onArrival: the connection reader that stored it,
// or the dispatcher) reads for it and answers it there. A held pull on a
// goroutine of its own costs two goroutine wake-ups per answer, its own
// and its worker's, each of which may wake an idle thread; at rates low
// enough for each message to be answered alone, those wake-ups are most of
// the broker's CPU a message.

// parkedInline is how many of a queue's parked pulls an arrival answers on
// the goroutine that reports it; the rest are answered on other
// goroutines, parkedChunk on each, so that a topic read by many groups
// does not hold up the connection whose send arrived.
const (
	parkedInline = 4
	parkedChunk  = 16
)

// ParkedPull is a pull that PullOrPark holds. Its done function is called
// exactly once.
type ParkedPull struct {
	pl    *pullPlan
	ctx   context.Context
	start time.Time
	w     *queueWaiters
	timer *time.Timer

	// mu serializes the pull's reads and its end; done is nil once it
	// ended.
	mu   sync.Mutex
	done func(PullResult, error)
}

// PullWouldWait reports whether a pull of the queue from offset finds
// nothing yet, as far as a look at the queue's bounds tells: it says
// nothing of the request's validity or its filter. Front ends that park
// pulls (PullOrPark) serve the others on goroutines of their own.
func (b *Broker) PullWouldWait(topic string, queueID int32, offset int64) bool {
	_, maxOff := b.store.QueueOffsets(topic, queueID)
	return offset >= maxOff
}

// PullOrPark is Pull for a front end that holds its long polls without a
// goroutine each. A pull that need not wait (it found messages, failed, or
// asks for no hold) is answered by the return values, and parked is nil.
// Otherwise the pull is parked (parked is not nil, res and err are
// unset): done is called once with its result, on whichever goroutine ends
// it (a message's arrival, the end of its hold, Cancel, the broker's
// stop), perhaps before PullOrPark returns; the caller ends it early with
// parked.Cancel. ctx is not watched: it carries the front end for the
// metrics.
func (b *Broker) PullOrPark(ctx context.Context, req PullRequest, done func(PullResult, error)) (parked *ParkedPull, res PullResult, err error) {
	start := time.Now()
	pl, err := b.planPull(req)
	if err == nil {
		var wait bool
		if res, wait, err = pl.read(); err == nil && wait {
			if parked, res, err = b.park(ctx, pl, start, done); parked != nil {
				return parked, PullResult{}, nil
			}
		}
	}
	b.countPull(ctx, req, start, res, err)
	return nil, res, err
}

// park parks a pull that found nothing to answer. It registers the pull
// before reading again, so that an arrival between the first read and the
// registration is not missed; when that read finds what to answer, nothing
// is parked (nil) and out and err are the answer.
func (b *Broker) park(ctx context.Context, pl *pullPlan, start time.Time, done func(PullResult, error)) (_ *ParkedPull, out PullResult, err error) {
	w := b.waiters(Queue{pl.req.Topic, pl.req.QueueID})
	p := &ParkedPull{pl: pl, ctx: ctx, start: start, w: w, done: done}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.mu.Lock()
	if w.parked == nil {
		w.parked = make(map[*ParkedPull]struct{})
	}
	w.parked[p] = struct{}{}
	w.mu.Unlock()
	// Quiesce cancels b.ctx before it ends the parked pulls, and
	// forgetWaiters marks a deleted topic's queues gone before it wakes
	// theirs: a pull registered after either sweep sees it here.
	if b.ctx.Err() != nil {
		out, _, err := pl.read()
		p.endLocked(out, err)
		return p, PullResult{}, nil
	}
	if w.gone.Load() {
		p.endLocked(PullResult{}, b.gone(pl.req.Topic))
		return p, PullResult{}, nil
	}
	out, wait, err := pl.read()
	if err != nil || !wait {
		w.unpark(p)
		p.done = nil
		return nil, out, err
	}
	p.timer = time.AfterFunc(pl.hold, p.Cancel)
	return p, PullResult{}, nil
}

// Cancel ends the pull with what it would answer now, if it has not ended.
// It is safe to call at any time and more than once.
func (p *ParkedPull) Cancel() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return
	}
	out, _, err := p.pl.read()
	p.endLocked(out, err)
}

// arrived reads for the pull after an arrival on its queue, and ends it
// when the read has something to answer.
func (p *ParkedPull) arrived() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return
	}
	if p.w.gone.Load() {
		p.endLocked(PullResult{}, p.pl.b.gone(p.pl.req.Topic))
		return
	}
	if err := p.pl.refusal(); err != nil {
		p.endLocked(PullResult{}, err)
		return
	}
	if out, wait, err := p.pl.read(); err != nil || !wait {
		p.endLocked(out, err)
	}
}

// endLocked ends the pull with out or err; p.mu is held.
func (p *ParkedPull) endLocked(out PullResult, err error) {
	done := p.done
	p.done = nil
	if p.timer != nil {
		p.timer.Stop()
	}
	p.w.unpark(p)
	p.pl.b.countPull(p.ctx, p.pl.req, p.start, out, err)
	done(out, err)
}

// unpark takes p out of the queue's parked pulls.
func (w *queueWaiters) unpark(p *ParkedPull) {
	w.mu.Lock()
	delete(w.parked, p)
	w.mu.Unlock()
}

// ParkedPulls is how many pulls are parked now (PullOrPark), counted when
// asked (a metrics scrape), so that parking and answering count nothing.
func (b *Broker) ParkedPulls() int64 {
	var n int64
	b.arrivals.Range(func(_, v any) bool {
		w := v.(*queueWaiters)
		w.mu.Lock()
		n += int64(len(w.parked))
		w.mu.Unlock()
		return true
	})
	return n
}

// parkedNow returns the pulls parked on the queue now.
func (w *queueWaiters) parkedNow() []*ParkedPull {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*ParkedPull, 0, len(w.parked))
	for p := range w.parked {
		out = append(out, p)
	}
	return out
}

// wakeParked reads for the pulls parked on a queue after an arrival on it:
// the first parkedInline on this goroutine, the others on goroutines of
// their own, parkedChunk on each.
func (b *Broker) wakeParked(w *queueWaiters) {
	var buf [parkedInline]*ParkedPull // the common case: on the stack
	inline := buf[:0]
	var rest []*ParkedPull
	w.mu.Lock()
	for p := range w.parked {
		if len(inline) < parkedInline {
			inline = append(inline, p)
		} else {
			rest = append(rest, p)
		}
	}
	w.mu.Unlock()
	for len(rest) > 0 {
		chunk := rest[:min(parkedChunk, len(rest))]
		rest = rest[len(chunk):]
		b.parkedWG.Add(1)
		go func() {
			defer b.parkedWG.Done()
			for _, p := range chunk {
				p.arrived()
			}
		}()
	}
	for _, p := range inline {
		p.arrived()
	}
}

// endParked ends every parked pull (the broker is stopping).
func (b *Broker) endParked() {
	b.arrivals.Range(func(_, v any) bool {
		for _, p := range v.(*queueWaiters).parkedNow() {
			p.Cancel()
		}
		return true
	})
}
