package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// PullConsumer (lite pull) fetches the messages of its assigned queues in
// the background; Poll hands them out and Commit commits what Poll
// returned. In clustering mode queues are allocated as for a PushConsumer.
type PullConsumer struct {
	c     *consumerCore
	state atomic.Int32

	// Lock order: closeMu, then mu: Close holds closeMu through
	// consumerCore.close, which calls removeQueues. removeQueues releases
	// mu before it waits for the fetch loops, and they take mu themselves.
	mu      sync.Mutex
	queues  map[MessageQueue]*liteQueue
	order   []*liteQueue // queues in sortQueues order; nil when they changed
	rr      int
	avail   broadcast
	closeMu sync.Mutex
}

// liteQueue is one assigned queue; the fields below done are guarded by
// PullConsumer.mu.
type liteQueue struct {
	mq     MessageQueue
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	space  signal

	buf      []*MessageExt
	bufBytes int64
	next     int64 // next offset to pull
	started  bool
	gen      uint64 // bumped by Seek: results of older pulls are discarded
	// pullCtx is the context of the queue's pulls, one for all of them
	// until a Seek cancels the pull in flight with pullCancel (both nil
	// then, and made anew for the next pull).
	pullCtx    context.Context
	pullCancel context.CancelFunc
}

// cancelPullLocked cancels the queue's pulls' context, if there is one:
// the next pull makes a new one. PullConsumer.mu is held.
func (q *liteQueue) cancelPullLocked() {
	if q.pullCancel != nil {
		q.pullCancel()
		q.pullCtx, q.pullCancel = nil, nil
	}
}

// commitPoint is the lowest offset Poll has not returned.
func (q *liteQueue) commitPoint() int64 {
	if len(q.buf) > 0 {
		return q.buf[0].QueueOffset
	}
	return q.next
}

// NewPullConsumer returns a lite pull consumer of group.
func NewPullConsumer(group string, opts ...ConsumerOption) (*PullConsumer, error) {
	o, err := buildOptions(opts, ConsumerOption.applyConsumer)
	if err != nil {
		return nil, err
	}
	c, err := newConsumerCore(group, o, pb.ConsumeType_CONSUME_ACTIVELY)
	if err != nil {
		return nil, err
	}
	p := &PullConsumer{c: c, queues: make(map[MessageQueue]*liteQueue)}
	c.handler = p
	c.onRefusal = append(c.onRefusal, func(error) { p.avail.notify() })
	return p, nil
}

// ClientID returns the consumer's client id.
func (p *PullConsumer) ClientID() string { return p.c.clientID }

// Subscribe subscribes to topic with a tag expression ("*" or "" for all,
// or "a || b").
func (p *PullConsumer) Subscribe(topic, expression string) error {
	return p.SubscribeSelector(topic, ByTag(expression))
}

// SubscribeSelector subscribes to topic with a selector: ByTag or SQL92.
// An SQL92 condition is checked with the topic's brokers (when the route
// can be read; else at Start): one they refuse is an error matching
// ErrSubscriptionParse (with the position of the error) or ErrNoPermission
// (a broker that does not filter by properties).
func (p *PullConsumer) SubscribeSelector(topic string, sel Selector) error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.state.Load() == stateClosed {
		return ErrClosed
	}
	if err := p.c.subscribe(topic, sel, nil); err != nil {
		return err
	}
	if p.state.Load() == stateStarted {
		p.c.subscriptionsChanged()
	}
	return nil
}

// Unsubscribe stops fetching topic.
func (p *PullConsumer) Unsubscribe(topic string) {
	p.c.unsubscribe(topic)
	if p.state.Load() == stateStarted {
		p.c.subscriptionsChanged()
	}
}

// Start registers with the brokers and starts fetching.
func (p *PullConsumer) Start(ctx context.Context) error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	switch p.state.Load() {
	case stateStarted:
		return ErrAlreadyStarted
	case stateClosed:
		return ErrClosed
	}
	if !p.c.hasSubscriptions() {
		return errNoSubscription
	}
	p.state.Store(stateStarted)
	if p.c.opts.autoCommit {
		p.c.goRun(p.autoCommitLoop)
	}
	return p.c.start(ctx)
}

// Close stops fetching, commits (with auto-commit on) what Poll returned,
// and closes the connections. Messages fetched and not polled are dropped.
func (p *PullConsumer) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	prev := p.state.Swap(stateClosed)
	if prev == stateClosed {
		return nil
	}
	p.avail.notify()
	ctx, cancel := context.WithTimeout(context.Background(), 2*p.c.opts.rpcTimeout)
	defer cancel()
	return p.c.close(ctx, prev == stateStarted)
}

// Assignment returns the queues this consumer currently holds.
func (p *PullConsumer) Assignment() []MessageQueue { return p.c.assignment() }

// Poll returns fetched messages (at most WithPollBatchSize), blocking until
// there are some or ctx is done. Messages of one queue come in order.
//
// When there is nothing to return and the consumer's background calls were
// refused since the last Poll — UNAUTHENTICATED or NO_PERMISSION
// (ErrUnauthenticated, ErrNoPermission), or a broker that accepts TLS only
// spoken to in plain text — Poll returns that error (once per refusal:
// the consumer keeps asking, slowly, and a later Poll returns messages
// once the daemons let it through).
func (p *PullConsumer) Poll(ctx context.Context) ([]*MessageExt, error) {
	switch p.state.Load() {
	case stateNew:
		return nil, ErrNotStarted
	case stateClosed:
		return nil, ErrClosed
	}
	for {
		p.mu.Lock()
		msgs := p.takeLocked(p.c.opts.pollBatchSize)
		if len(msgs) > 0 {
			p.mu.Unlock()
			return msgs, nil
		}
		wait := p.avail.wait()
		p.mu.Unlock()
		if err := p.c.takeRefusal(); err != nil {
			return nil, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.c.loopCtx.Done():
			return nil, ErrClosed
		}
	}
}

// takeLocked takes up to n buffered messages, starting with a different
// queue on each call.
func (p *PullConsumer) takeLocked(n int) []*MessageExt {
	if len(p.queues) == 0 {
		return nil
	}
	if p.order == nil {
		mqs := make([]MessageQueue, 0, len(p.queues))
		for mq := range p.queues {
			mqs = append(mqs, mq)
		}
		sortQueues(mqs)
		p.order = make([]*liteQueue, len(mqs))
		for i, mq := range mqs {
			p.order[i] = p.queues[mq]
		}
	}
	p.rr++
	var out []*MessageExt
	for i := 0; i < len(p.order) && len(out) < n; i++ {
		q := p.order[(p.rr+i)%len(p.order)]
		k := min(n-len(out), len(q.buf))
		if k == 0 {
			continue
		}
		if out == nil {
			out = make([]*MessageExt, 0, min(n, p.buffered()))
		}
		for _, m := range q.buf[:k] {
			q.bufBytes -= m.size()
		}
		out = append(out, q.buf[:k]...)
		clear(q.buf[:k])
		q.buf = q.buf[k:]
		q.space.notify()
	}
	return out
}

// buffered counts the messages buffered in every queue. p.mu is held.
func (p *PullConsumer) buffered() int {
	n := 0
	for _, q := range p.order {
		n += len(q.buf)
	}
	return n
}

// Commit commits, for every assigned queue, the offsets of all messages
// Poll has returned.
func (p *PullConsumer) Commit(ctx context.Context) error {
	if err := p.checkStarted(); err != nil {
		return err
	}
	return p.commit(ctx)
}

func (p *PullConsumer) commit(ctx context.Context) error {
	p.mu.Lock()
	var mqs []MessageQueue
	for mq, q := range p.queues {
		if q.started {
			p.c.offsets.update(mq, q.commitPoint())
			mqs = append(mqs, mq)
		}
	}
	p.mu.Unlock()
	if len(mqs) == 0 {
		return nil
	}
	return p.c.offsets.persist(ctx, mqs)
}

// Seek makes the next messages of mq, an assigned queue, start at offset.
// Messages fetched and not yet polled from mq are dropped.
func (p *PullConsumer) Seek(ctx context.Context, mq MessageQueue, offset int64) error {
	if err := p.checkStarted(); err != nil {
		return err
	}
	if offset < 0 {
		return codeErr(pb.Code_INVALID_PARAMETER, "seek %s to negative offset %d", mq, offset)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queues[mq]
	if q == nil {
		return codeErr(pb.Code_INVALID_PARAMETER, "queue %s is not assigned to this consumer", mq)
	}
	clear(q.buf)
	q.buf, q.bufBytes = nil, 0
	q.next, q.started = offset, true
	q.gen++
	q.cancelPullLocked()
	q.space.notify()
	return nil
}

func (p *PullConsumer) checkStarted() error {
	switch p.state.Load() {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	return nil
}

func (p *PullConsumer) autoCommitLoop() {
	t := time.NewTicker(p.c.opts.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-p.c.loopCtx.Done():
			return
		case <-t.C:
			if err := p.commit(p.c.loopCtx); err != nil && p.c.loopCtx.Err() == nil {
				p.c.log.Warn("auto-commit failed", zap.Error(err))
			}
		}
	}
}

func (p *PullConsumer) addQueues(mqs []MessageQueue) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, mq := range mqs {
		if p.queues[mq] != nil {
			continue
		}
		qctx, cancel := context.WithCancel(p.c.ctx)
		q := &liteQueue{mq: mq, ctx: qctx, cancel: cancel, done: make(chan struct{}), space: newSignal()}
		p.queues[mq] = q
		p.order = nil
		if !p.c.goRun(func() { p.fetchLoop(q) }) {
			close(q.done)
		}
	}
}

// removeQueues stops fetching mqs and, with auto-commit, commits what Poll
// returned of them.
func (p *PullConsumer) removeQueues(ctx context.Context, mqs []MessageQueue) {
	p.mu.Lock()
	var qs []*liteQueue
	for _, mq := range mqs {
		if q := p.queues[mq]; q != nil {
			qs = append(qs, q)
			q.cancel()
		}
	}
	p.mu.Unlock()
	for _, q := range qs {
		<-q.done
	}
	p.mu.Lock()
	var commit []MessageQueue
	for _, q := range qs {
		if p.c.opts.autoCommit && q.started {
			p.c.offsets.update(q.mq, q.commitPoint())
			commit = append(commit, q.mq)
		}
		delete(p.queues, q.mq)
		p.order = nil
	}
	p.mu.Unlock()
	ctx, cancel := withTimeout(context.WithoutCancel(ctx), p.c.opts.rpcTimeout)
	defer cancel()
	if err := p.c.offsets.persist(ctx, commit); err != nil {
		p.c.log.Warn("commit offsets of released queues failed", zap.Error(err))
	}
	for _, q := range qs {
		p.c.offsets.forget(q.mq)
	}
}

// fetchLoop pulls one queue into its buffer until the queue is removed.
func (p *PullConsumer) fetchLoop(q *liteQueue) {
	defer close(q.done)
	ctx := q.ctx
	opts := &p.c.opts
	p.mu.Lock()
	seeked := q.started
	p.mu.Unlock()
	if !seeked {
		off, ok := p.c.resolveStart(ctx, q.mq)
		if !ok {
			return
		}
		p.mu.Lock()
		if !q.started {
			q.next, q.started = off, true
		}
		p.mu.Unlock()
	}
	defer func() {
		p.mu.Lock()
		q.cancelPullLocked()
		p.mu.Unlock()
	}()
	backoff := opts.pullBackoff / 8
	for ctx.Err() == nil {
		p.mu.Lock()
		if len(q.buf) > opts.queueMaxMessages || q.bufBytes > opts.queueMaxBytes {
			p.mu.Unlock()
			select {
			case <-q.space:
			case <-ctx.Done():
				return
			}
			continue
		}
		offset, gen := q.next, q.gen
		if q.pullCtx == nil {
			q.pullCtx, q.pullCancel = context.WithCancel(ctx)
		}
		pctx := q.pullCtx
		p.mu.Unlock()

		sub := p.c.subscription(q.mq.Topic)
		var res *pullResult
		var err error
		if sub == nil {
			err = codeErr(pb.Code_INVALID_PARAMETER, "topic %q is not subscribed", q.mq.Topic)
		} else {
			res, err = p.c.pull(pctx, q.mq, sub, offset, -1, opts.pullBatchSize)
		}

		p.mu.Lock()
		if q.gen != gen {
			p.mu.Unlock()
			continue // a Seek moved the queue while we pulled
		}
		if err != nil {
			p.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			if p.c.noteFailure(err) {
				// Credentials, permissions, TLS: Poll reports it; no use
				// asking again soon.
				p.c.log.Error("pull refused", zap.Stringer("queue", q.mq), zap.Error(err))
				backoff = 3 * opts.pullBackoff
			} else {
				p.c.log.Warn("pull failed", zap.Stringer("queue", q.mq), zap.Error(err))
				p.c.routes.markStale(q.mq.Topic)
			}
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 3*opts.pullBackoff)
			continue
		}
		backoff = opts.pullBackoff / 8
		switch res.status {
		case pb.PullStatus_FOUND:
			for _, m := range res.msgs {
				q.buf = append(q.buf, m)
				q.bufBytes += m.size()
			}
			q.next = max(res.next, offset)
			if len(res.msgs) > 0 {
				p.avail.notify()
			}
		case pb.PullStatus_NO_NEW_MESSAGE, pb.PullStatus_NO_MATCHED_MESSAGE:
			q.next = max(res.next, offset)
		case pb.PullStatus_OFFSET_ILLEGAL:
			p.c.log.Warn("pull offset illegal, moving", zap.Stringer("queue", q.mq),
				zap.Int64("offset", offset), zap.Int64("next", res.next))
			q.next = res.next
		}
		p.mu.Unlock()
	}
}

// broadcast wakes every goroutine waiting on the channel returned by wait
// when notify is called.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
}
