package client

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ConsumeResult is what a ConcurrentListener returns.
type ConsumeResult int

const (
	// ConsumeSuccess: the messages are consumed.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: deliver the messages again later.
	ConsumeRetryLater
)

// OrderlyResult is what an OrderlyListener returns.
type OrderlyResult int

const (
	// OrderlySuccess: the messages are consumed.
	OrderlySuccess OrderlyResult = iota
	// OrderlySuspend: pause the queue a moment, then deliver the same
	// messages again.
	OrderlySuspend
)

// ConcurrentListener consumes messages of any queue, from several
// goroutines at once. A panic counts as ConsumeRetryLater.
type ConcurrentListener func(ctx context.Context, msgs []*MessageExt) ConsumeResult

// OrderlyListener consumes the messages of one queue at a time, in queue
// order. A panic counts as OrderlySuspend.
type OrderlyListener func(ctx context.Context, msgs []*MessageExt) OrderlyResult

// Listener is what PushConsumer.Subscribe takes: a ConcurrentListener, an
// ErrorListener or an OrderlyListener. No other type implements it, so a
// listener of the wrong type is a compile error.
type Listener interface {
	// forms returns the listener as a concurrent or an orderly one (the
	// other nil; both nil for a nil listener).
	forms() (ConcurrentListener, OrderlyListener)
}

func (l ConcurrentListener) forms() (ConcurrentListener, OrderlyListener) { return l, nil }

func (l OrderlyListener) forms() (ConcurrentListener, OrderlyListener) { return nil, l }

func (l ErrorListener) forms() (ConcurrentListener, OrderlyListener) {
	if l == nil {
		return nil, nil
	}
	return l.concurrent(), nil
}

// PushConsumer pulls messages in the background and hands them to the
// listener of their topic.
type PushConsumer struct {
	c       *consumerCore
	state   atomic.Int32
	orderly bool
	kindSet bool

	tasks         chan *consumeTask
	workersCtx    context.Context
	workersCancel context.CancelFunc
	workersWG     sync.WaitGroup
	lockNow       signal
	lockDone      chan struct{}

	// Lock order: closeMu, then mu, then a pushQueue's lockMu. Close (and
	// Start when it fails) holds closeMu through consumerCore.close, which
	// calls removeQueues; lockLoop checks lockValid under mu. removeQueues
	// releases mu before it waits for the queues' loops and the listeners.
	mu     sync.Mutex
	queues map[MessageQueue]*pushQueue
	// running are the listener calls in progress (retry.go).
	running runningTasks
	// closeMu makes Subscribe and Close exclusive.
	closeMu sync.Mutex
}

// pushQueue is one assigned queue: its pull loop, its in-flight messages
// and (orderly) its broker lock and consume loop.
type pushQueue struct {
	mq          MessageQueue
	pq          *processQueue
	ctx         context.Context
	cancel      context.CancelFunc
	pullDone    chan struct{}
	consumeDone chan struct{} // orderly only

	lockMu   sync.Mutex
	locked   bool
	lockedAt time.Time
	lockSig  signal
}

type consumeTask struct {
	q     *pushQueue
	msgs  []*MessageExt
	state atomic.Int32 // taskRunning, taskFinished or taskExpired (retry.go)
}

// lockLease is how long the client trusts a broker lock since it was last
// (re)acquired; the broker keeps it for 60 s.
const lockLease = 30 * time.Second

// NewPushConsumer returns a push consumer of group.
func NewPushConsumer(group string, opts ...ConsumerOption) (*PushConsumer, error) {
	o, err := buildOptions(opts, ConsumerOption.applyConsumer)
	if err != nil {
		return nil, err
	}
	c, err := newConsumerCore(group, o, pb.ConsumeType_CONSUME_PASSIVELY)
	if err != nil {
		return nil, err
	}
	p := &PushConsumer{c: c, queues: make(map[MessageQueue]*pushQueue), lockNow: newSignal(), lockDone: make(chan struct{})}
	c.handler = p
	p.workersCtx, p.workersCancel = context.WithCancel(c.ctx)
	return p, nil
}

// ClientID returns the consumer's client id.
func (p *PushConsumer) ClientID() string { return p.c.clientID }

// Subscribe subscribes to topic with a tag expression ("*" or "" for all,
// or "a || b") and a listener: a ConcurrentListener, an ErrorListener or an
// OrderlyListener (a func literal is converted to one of them:
// client.ConcurrentListener(func(...) ...)). All subscriptions of one
// consumer use the same kind of listener. Subscribing again to a topic
// replaces its expression and listener.
func (p *PushConsumer) Subscribe(topic, expression string, listener Listener) error {
	return p.SubscribeSelector(topic, ByTag(expression), listener)
}

// SubscribeSelector is Subscribe with a selector: ByTag or SQL92, e.g.
//
//	c.SubscribeSelector("orders", client.SQL92("region = 'eu' AND amount > 100"), listener)
//
// An SQL92 condition is checked with the topic's brokers (when the route
// can be read; else at Start): one they refuse is an error matching
// ErrSubscriptionParse (with the position of the error) or ErrNoPermission
// (a broker that does not filter by properties).
func (p *PushConsumer) SubscribeSelector(topic string, sel Selector, listener Listener) error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.state.Load() == stateClosed {
		return ErrClosed
	}
	var l any // what the subscription keeps: a ConcurrentListener or an OrderlyListener
	orderly := false
	if listener != nil {
		switch c, o := listener.forms(); {
		case o != nil:
			l, orderly = o, true
		case c != nil:
			l = c
		}
	}
	if l == nil {
		return codeErr(pb.Code_INVALID_PARAMETER, "nil listener")
	}
	if p.kindSet && orderly != p.orderly {
		return codeErr(pb.Code_INVALID_PARAMETER, "a consumer's listeners must all be concurrent or all orderly")
	}
	if p.state.Load() == stateStarted && orderly != p.orderly {
		return codeErr(pb.Code_INVALID_PARAMETER, "cannot change the listener kind after Start")
	}
	if err := p.c.subscribe(topic, sel, l); err != nil {
		return err
	}
	if !p.kindSet {
		// Only before Start: goroutines read p.orderly afterwards.
		p.kindSet, p.orderly = true, orderly
	}
	if p.state.Load() == stateStarted {
		p.c.subscriptionsChanged()
	}
	return nil
}

// Unsubscribe stops consuming topic.
func (p *PushConsumer) Unsubscribe(topic string) {
	p.c.unsubscribe(topic)
	if p.state.Load() == stateStarted {
		p.c.subscriptionsChanged()
	}
}

// Start registers with the brokers of the subscribed topics and starts
// consuming.
func (p *PushConsumer) Start(ctx context.Context) error {
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
	p.c.orderly = p.orderly
	if err := p.subscribeRetry(); err != nil {
		return err
	}
	if p.orderly {
		p.c.goRun(p.lockLoop)
	} else {
		close(p.lockDone)
		p.tasks = make(chan *consumeTask, p.c.opts.consumeGoroutines)
		for i := 0; i < p.c.opts.consumeGoroutines; i++ {
			p.workersWG.Add(1)
			go p.worker()
		}
		p.c.goRun(p.timeoutLoop)
	}
	p.c.goRun(p.commitLoop)
	p.state.Store(stateStarted)
	if err := p.c.start(ctx); err != nil {
		_ = p.closeLocked()
		return err
	}
	return nil
}

// Assignment returns the queues of the subscribed topics this consumer
// currently holds (the group's retry queues it also holds are not listed).
func (p *PushConsumer) Assignment() []MessageQueue { return withoutRetryQueues(p.c.assignment()) }

// Close stops pulling, waits for the listeners to return, commits offsets,
// releases orderly locks and closes the connections.
func (p *PushConsumer) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	return p.closeLocked()
}

func (p *PushConsumer) closeLocked() error {
	prev := p.state.Swap(stateClosed)
	if prev == stateClosed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*p.c.opts.rpcTimeout)
	defer cancel()
	if prev == stateStarted {
		p.c.stopLoops()
		<-p.lockDone
	}
	return p.c.close(ctx, prev == stateStarted)
}

// addQueues starts pulling (and, orderly, locking) new queues.
func (p *PushConsumer) addQueues(mqs []MessageQueue) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, mq := range mqs {
		if p.queues[mq] != nil {
			continue
		}
		qctx, cancel := context.WithCancel(p.c.ctx)
		q := &pushQueue{mq: mq, ctx: qctx, cancel: cancel, pullDone: make(chan struct{}), lockSig: newSignal()}
		store := p.c.offsets
		q.pq = newProcessQueue(func(off int64) { store.update(mq, off) })
		p.queues[mq] = q
		if !p.c.goRun(func() { p.pullLoop(q) }) {
			close(q.pullDone)
		}
		if p.orderly {
			q.consumeDone = make(chan struct{})
			if !p.c.goRun(func() { p.orderlyLoop(q) }) {
				close(q.consumeDone)
			}
		}
	}
	if p.orderly {
		p.lockNow.notify()
	}
}

// removeQueues stops the queues, commits their offsets and, orderly, waits
// for their listeners and unlocks them.
func (p *PushConsumer) removeQueues(ctx context.Context, mqs []MessageQueue) {
	p.mu.Lock()
	var qs []*pushQueue
	for _, mq := range mqs {
		if q := p.queues[mq]; q != nil {
			qs = append(qs, q)
			delete(p.queues, mq)
		}
	}
	p.mu.Unlock()
	// Releasing commits even when the caller is shutting down.
	ctx, cancel := withTimeout(context.WithoutCancel(ctx), p.c.opts.rpcTimeout)
	defer cancel()
	for _, q := range qs {
		q.cancel()
	}
	for _, q := range qs {
		<-q.pullDone
		if q.consumeDone != nil {
			<-q.consumeDone
		}
	}
	if !p.orderly && p.state.Load() == stateClosed {
		// Closing: let the listeners running finish so that their
		// messages are committed.
		p.workersCancel()
		p.workersWG.Wait()
	}
	var commit []MessageQueue
	for _, q := range qs {
		if started, _ := q.pq.drop(); started {
			commit = append(commit, q.mq)
		}
	}
	if err := p.c.offsets.persist(ctx, commit); err != nil {
		p.c.log.Warn("commit offsets of released queues failed", zap.Error(err))
	}
	for _, q := range qs {
		p.c.offsets.forget(q.mq)
	}
	if p.orderly {
		var locked []MessageQueue
		for _, q := range qs {
			if q.isLocked() {
				locked = append(locked, q.mq)
			}
		}
		p.unlock(ctx, locked)
	}
}

// commitLoop persists offsets periodically.
func (p *PushConsumer) commitLoop() {
	t := time.NewTicker(p.c.opts.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-p.c.loopCtx.Done():
			return
		case <-t.C:
			if err := p.c.offsets.persist(p.c.loopCtx, p.c.assignment()); err != nil && p.c.loopCtx.Err() == nil {
				p.c.log.Warn("commit offsets failed", zap.Error(err))
			}
		}
	}
}

// pullLoop pulls one queue with long polling until the queue is removed.
func (p *PushConsumer) pullLoop(q *pushQueue) {
	defer close(q.pullDone)
	ctx := q.ctx
	if p.orderly && !q.waitLocked(ctx) {
		return
	}
	// Orderly queues read the committed offset only once locked: the
	// previous owner commits before it unlocks.
	offset, ok := p.c.resolveStart(ctx, q.mq)
	if !ok {
		return
	}
	q.pq.start(offset)
	opts := &p.c.opts
	backoff := opts.pullBackoff / 8
	for ctx.Err() == nil {
		for q.pq.overLimit(opts.queueMaxMessages, opts.queueMaxBytes) {
			select {
			case <-q.pq.space:
			case <-ctx.Done():
				return
			}
		}
		if p.orderly && !q.lockValid() {
			if !q.waitLocked(ctx) {
				return
			}
			continue
		}
		sub := p.c.subscription(q.mq.Topic)
		if sub == nil {
			// Unsubscribed: the next rebalance removes the queue.
			if !sleepCtx(ctx, opts.pullBackoff) {
				return
			}
			continue
		}
		commit := int64(-1)
		if opts.model == Clustering {
			commit = p.c.offsets.current(q.mq)
		}
		res, err := p.c.pull(ctx, q.mq, sub, offset, commit, opts.pullBatchSize)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if p.c.noteFailure(err) {
				// Credentials, permissions, TLS: no use asking again soon.
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
			restoreRetried(q.mq, res.msgs)
			msgs := q.pq.put(res.msgs, res.next)
			offset = max(res.next, offset)
			if !p.orderly && len(msgs) > 0 && !p.submit(q, msgs) {
				return
			}
		case pb.PullStatus_NO_NEW_MESSAGE, pb.PullStatus_NO_MATCHED_MESSAGE:
			offset = max(res.next, offset)
			q.pq.setNext(offset)
		case pb.PullStatus_OFFSET_ILLEGAL:
			p.c.log.Warn("pull offset illegal, moving", zap.Stringer("queue", q.mq), zap.Int64("offset", offset),
				zap.Int64("next", res.next), zap.Int64("min", res.min), zap.Int64("max", res.max))
			offset = res.next
			q.pq.setNext(offset)
		}
	}
}

// submit hands pulled messages to the worker pool in batches.
func (p *PushConsumer) submit(q *pushQueue, msgs []*MessageExt) bool {
	for _, b := range batches(msgs, p.c.opts.consumeBatchSize) {
		t := &consumeTask{q: q, msgs: b}
		select {
		case p.tasks <- t:
		case <-q.ctx.Done():
			return false
		}
	}
	return true
}

func (p *PushConsumer) worker() {
	defer p.workersWG.Done()
	for {
		select {
		case <-p.workersCtx.Done():
			return
		case t := <-p.tasks:
			p.consumeConcurrently(t)
		}
	}
}

func (p *PushConsumer) consumeConcurrently(t *consumeTask) {
	if t.q.pq.isDropped() {
		return
	}
	l, subscribed, why := p.concurrentListener(t)
	if !subscribed {
		return // unsubscribed: the next rebalance releases the queue
	}
	if l == nil {
		t.state.Store(taskFinished)
		p.failed(t, 0, why)
		return
	}
	res, oc, panicked, owned := p.runListener(t, l)
	if !owned {
		return // expired: the watchdog sent the messages back
	}
	if res == ConsumeSuccess {
		t.q.pq.remove(t.msgs)
		return
	}
	level, reason := oc.get()
	if reason == "" {
		reason = panicked
	}
	p.failed(t, level, reason)
}

// orderlyLoop consumes one queue in order while its lock is held.
func (p *PushConsumer) orderlyLoop(q *pushQueue) {
	defer close(q.consumeDone)
	ctx := q.ctx
	for ctx.Err() == nil {
		if !q.lockValid() {
			if !q.waitLocked(ctx) {
				return
			}
			continue
		}
		batch := q.pq.peek(p.c.opts.consumeBatchSize)
		if len(batch) == 0 {
			select {
			case <-q.pq.arrived:
			case <-ctx.Done():
				return
			}
			continue
		}
		sub := p.c.subscription(q.mq.Topic)
		if sub == nil {
			if !sleepCtx(ctx, p.c.opts.suspendDelay) {
				return
			}
			continue
		}
		l, _ := sub.listener.(OrderlyListener)
		res, reason := OrderlySuspend, ""
		lctx, oc := withOutcome(ctx)
		func() {
			defer func() {
				if r := recover(); r != nil {
					p.c.log.Error("orderly listener panicked; suspending the queue", zap.Any("panic", r),
						zap.Stringer("queue", q.mq), zap.ByteString("stack", debug.Stack()))
					res, reason = OrderlySuspend, fmt.Sprintf("panic: %v", r)
				}
			}()
			res = l(lctx, batch)
		}()
		if res == OrderlySuccess {
			q.pq.remove(batch)
			continue
		}
		if _, r := oc.get(); r != "" {
			reason = r
		}
		// Retried in place up to the limit, then dead-lettered.
		if !p.orderlyFailed(q, batch, reason) {
			continue
		}
		if !sleepCtx(ctx, p.c.opts.suspendDelay) {
			return
		}
	}
}

func (q *pushQueue) lockValid() bool {
	q.lockMu.Lock()
	defer q.lockMu.Unlock()
	return q.locked && time.Since(q.lockedAt) < lockLease
}

func (q *pushQueue) isLocked() bool {
	q.lockMu.Lock()
	defer q.lockMu.Unlock()
	return q.locked
}

func (q *pushQueue) setLocked(locked bool, at time.Time) {
	q.lockMu.Lock()
	q.locked = locked
	if locked {
		q.lockedAt = at
	}
	q.lockMu.Unlock()
	if locked {
		q.lockSig.notify()
	}
}

// waitLocked waits until the queue's lock is held; false when ctx is done.
func (q *pushQueue) waitLocked(ctx context.Context) bool {
	for !q.lockValid() {
		select {
		case <-q.lockSig:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// lockLoop keeps the broker locks of orderly queues: queues not yet locked
// are tried every lock retry interval, held ones renewed every lock
// interval.
func (p *PushConsumer) lockLoop() {
	defer close(p.lockDone)
	ctx := p.c.loopCtx
	t := time.NewTicker(p.c.opts.lockRetryInterval)
	defer t.Stop()
	var lastRenew time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.lockNow:
		}
		renew := time.Since(lastRenew) >= p.c.opts.lockInterval
		p.mu.Lock()
		var want []*pushQueue
		for _, q := range p.queues {
			if renew || !q.lockValid() {
				want = append(want, q)
			}
		}
		p.mu.Unlock()
		if renew {
			lastRenew = time.Now()
		}
		p.lock(ctx, want)
	}
}

// lock asks each broker for the locks of its queues among qs.
func (p *PushConsumer) lock(ctx context.Context, qs []*pushQueue) {
	byBroker := make(map[string][]*pushQueue)
	for _, q := range qs {
		byBroker[q.mq.BrokerName] = append(byBroker[q.mq.BrokerName], q)
	}
	for _, group := range byBroker {
		cli, addr, err := p.c.brokerFor(ctx, group[0].mq, true)
		if err != nil {
			p.c.log.Warn("lock queues: no broker", zap.String("broker", group[0].mq.BrokerName), zap.Error(err))
			continue
		}
		req := &pb.LockQueuesRequest{Group: p.c.group, ClientId: p.c.clientID}
		for _, q := range group {
			req.Queues = append(req.Queues, &pb.QueueRef{Topic: q.mq.Topic, QueueId: q.mq.QueueID})
		}
		at := time.Now()
		rctx, cancel := p.c.rpcContext(ctx)
		resp, err := cli.LockQueues(rctx, req)
		cancel()
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil {
			if ctx.Err() == nil {
				p.c.log.Warn("lock queues failed", zap.String("broker", addr), zap.Error(err))
			}
			continue
		}
		got := make(map[MessageQueue]bool, len(resp.GetLocked()))
		for _, r := range resp.GetLocked() {
			got[MessageQueue{Topic: r.GetTopic(), BrokerName: group[0].mq.BrokerName, QueueID: r.GetQueueId()}] = true
		}
		for _, q := range group {
			if got[q.mq] {
				q.setLocked(true, at)
			} else if q.isLocked() {
				p.c.log.Warn("lost the lock of an orderly queue", zap.Stringer("queue", q.mq))
				q.setLocked(false, time.Time{})
			}
		}
	}
}

// unlock releases the broker locks of mqs.
func (p *PushConsumer) unlock(ctx context.Context, mqs []MessageQueue) {
	byBroker := make(map[string][]MessageQueue)
	for _, mq := range mqs {
		byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], mq)
	}
	for _, group := range byBroker {
		cli, addr, err := p.c.brokerFor(ctx, group[0], true)
		if err != nil {
			continue
		}
		req := &pb.UnlockQueuesRequest{Group: p.c.group, ClientId: p.c.clientID}
		for _, mq := range group {
			req.Queues = append(req.Queues, &pb.QueueRef{Topic: mq.Topic, QueueId: mq.QueueID})
		}
		rctx, cancel := p.c.rpcContext(ctx)
		resp, err := cli.UnlockQueues(rctx, req)
		cancel()
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil {
			p.c.log.Warn("unlock queues failed", zap.String("broker", addr), zap.Error(fmt.Errorf("unlock: %w", err)))
		}
	}
}
