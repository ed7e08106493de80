package client

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Retries of a push consumer (RocketMQ's send-back):
//
//   - A concurrent listener that returns ConsumeRetryLater, returns an error
//     (ErrorListener) or panics fails its messages. In clustering mode each
//     is sent back to the broker that holds it (DeadLetter.SendBack), which
//     stores a copy in %RETRY%<group>, delayed by level 3 + reconsume times
//     or the level the listener asked for (SetRetryDelayLevel); after the
//     maximum number of reconsumes (WithMaxReconsumeTimes, else the
//     broker's setting, 16 by default; 0: no retries) the copy goes to
//     %DLQ%<group>. The
//     consumer subscribes to %RETRY%<group> by itself, and the listener of
//     the original topic gets the copies with the original topic, the
//     reconsume count and the original MsgID (OriginOffsetMsgID gives the
//     first stored copy's offset message id).
//   - A message that cannot be sent back (broker unreachable) stays in
//     flight and is delivered again locally after WithRetryDelay, then sent
//     back again if it fails again: it is never dropped, and the committed
//     offset never passes it. Broadcasting consumers always retry locally.
//   - A message whose listener runs longer than WithConsumeTimeout (15 min)
//     is sent back as if it had failed; what the listener returns later is
//     ignored. The listener's context is done at that time.
//   - Orderly listeners retry in place: OrderlySuspend pauses the queue a
//     moment and delivers the same messages again, up to the maximum number
//     of reconsumes; then each is sent to %DLQ%<group> and the queue moves on.

// sendBackHook, set by tests, can fail send-backs.
var sendBackHook atomic.Pointer[func(group string, m *MessageExt) error]

// defaultMaxReconsumeTimes is the limit orderly consumers apply when
// WithMaxReconsumeTimes is not given (the broker's default for the others).
const defaultMaxReconsumeTimes = 16

// ErrorListener is a concurrent listener that reports failure with an
// error: nil consumes the messages, an error retries them with the error's
// text as the failure reason.
type ErrorListener func(ctx context.Context, msgs []*MessageExt) error

// WithMaxReconsumeTimes sets how many times a failed message is delivered
// again before it is dead-lettered: 0 means no retries (the first failure
// dead-letters the message), a negative n the default — the broker's
// setting for the group (16), and 16 for orderly consumers.
func WithMaxReconsumeTimes(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.maxReconsumeTimes = n })
}

// WithConsumeTimeout sets how long a concurrent listener may hold a message
// before it is sent back as failed. Default 15 min.
func WithConsumeTimeout(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.consumeTimeout = d })
}

// consumeOutcome is what a listener says about a failure through its
// context.
type consumeOutcome struct {
	mu     sync.Mutex
	level  int32
	reason string
}

type outcomeKey struct{}

func withOutcome(ctx context.Context) (context.Context, *consumeOutcome) {
	oc := &consumeOutcome{}
	return context.WithValue(ctx, outcomeKey{}, oc), oc
}

func (oc *consumeOutcome) get() (int32, string) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.level, oc.reason
}

// SetRetryDelayLevel, called by a concurrent listener before it returns
// ConsumeRetryLater, asks for this delay level (1 = 1 s, 2 = 5 s, 3 = 10 s,
// …) instead of 3 + reconsume times; a negative level dead-letters the
// messages at once. It does nothing outside a listener.
func SetRetryDelayLevel(ctx context.Context, level int) {
	if oc, ok := ctx.Value(outcomeKey{}).(*consumeOutcome); ok {
		oc.mu.Lock()
		oc.level = int32(level)
		oc.mu.Unlock()
	}
}

// SetConsumeFailureReason, called by a listener, records why its messages
// failed; the broker keeps the reason with them and shows it for dead
// letters. It does nothing outside a listener.
func SetConsumeFailureReason(ctx context.Context, reason string) {
	if oc, ok := ctx.Value(outcomeKey{}).(*consumeOutcome); ok {
		oc.mu.Lock()
		oc.reason = reason
		oc.mu.Unlock()
	}
}

// concurrent turns an ErrorListener into a ConcurrentListener.
func (l ErrorListener) concurrent() ConcurrentListener {
	return func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		if err := l(ctx, msgs); err != nil {
			SetConsumeFailureReason(ctx, err.Error())
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	}
}

// OriginOffsetMsgID returns the offset message id of the message's first
// stored copy: for a retried message, the id the broker kept in
// ORIGIN_MESSAGE_ID, else OffsetMsgID. (MsgID, the unique id, is the same
// for the message and its retries.)
func (m *MessageExt) OriginOffsetMsgID() string {
	if id := m.Properties[message.PropertyOriginMessageID]; id != "" {
		return id
	}
	return m.OffsetMsgID
}

// retryListener marks the subscription of the group's retry topic: its
// messages go to the listener of their original topic.
type retryListener struct{}

// subscribeRetry subscribes a clustering consumer to its retry topic.
func (p *PushConsumer) subscribeRetry() error {
	if p.orderly || p.c.opts.model != Clustering {
		return nil
	}
	return p.c.subscribe(message.RetryTopic(p.c.group), ByTag("*"), retryListener{})
}

// restoreRetried gives messages pulled from the retry topic their original
// topic back.
func restoreRetried(mq MessageQueue, msgs []*MessageExt) {
	if !message.IsRetryTopic(mq.Topic) {
		return
	}
	for _, m := range msgs {
		if t := m.Properties[message.PropertyRetryTopic]; t != "" {
			m.Topic = t
		}
	}
}

// batches cuts msgs into listener calls of at most n messages, each of one
// topic (retried messages of several topics share the retry queue).
func batches(msgs []*MessageExt, n int) [][]*MessageExt {
	var out [][]*MessageExt
	start := 0
	for i := 1; i <= len(msgs); i++ {
		if i == len(msgs) || i-start == n || msgs[i].Topic != msgs[start].Topic {
			out = append(out, msgs[start:i])
			start = i
		}
	}
	return out
}

// concurrentListener returns the listener for a task: the one of its
// queue's topic, or for the retry queue the one of the messages' original
// topic. subscribed is false when the queue's topic is no longer
// subscribed (the task is left to the next rebalance); a nil listener with
// subscribed true fails the messages for the reason why gives.
func (p *PushConsumer) concurrentListener(t *consumeTask) (l ConcurrentListener, subscribed bool, why string) {
	sub := p.c.subscription(t.q.mq.Topic)
	if sub == nil {
		return nil, false, ""
	}
	if _, retry := sub.listener.(retryListener); retry {
		orig := p.c.subscription(t.msgs[0].Topic)
		if orig == nil {
			return nil, true, fmt.Sprintf("topic %s is no longer subscribed", t.msgs[0].Topic)
		}
		sub = orig
	}
	l, _ = sub.listener.(ConcurrentListener)
	if l == nil {
		return nil, true, fmt.Sprintf("no concurrent listener for topic %s", sub.topic)
	}
	return l, true, ""
}

// Task states: a task is finished by its worker or expired by the
// consume-timeout watchdog, whichever comes first.
const (
	taskRunning int32 = iota
	taskFinished
	taskExpired
)

// runningTasks are the concurrent listener calls in progress.
type runningTasks struct {
	mu sync.Mutex
	m  map[*consumeTask]time.Time
}

func (r *runningTasks) add(t *consumeTask) {
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[*consumeTask]time.Time)
	}
	r.m[t] = time.Now()
	r.mu.Unlock()
}

func (r *runningTasks) remove(t *consumeTask) {
	r.mu.Lock()
	delete(r.m, t)
	r.mu.Unlock()
}

// expired returns the tasks started before cutoff.
func (r *runningTasks) expired(cutoff time.Time) []*consumeTask {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*consumeTask
	for t, at := range r.m {
		if at.Before(cutoff) {
			out = append(out, t)
		}
	}
	return out
}

// runListener calls a concurrent listener for a task, turning a panic
// into a failure, and reports whether the worker still owns the task (the
// watchdog did not expire it meanwhile).
func (p *PushConsumer) runListener(t *consumeTask, l ConcurrentListener) (ConsumeResult, *consumeOutcome, string, bool) {
	ctx, cancel := context.WithTimeout(p.workersCtx, p.c.opts.consumeTimeout)
	defer cancel()
	ctx, oc := withOutcome(ctx)
	p.running.add(t)
	defer p.running.remove(t)
	res, panicked := ConsumeRetryLater, ""
	func() {
		defer func() {
			if r := recover(); r != nil {
				p.c.log.Error("listener panicked; the messages will be retried", zap.Any("panic", r),
					zap.Stringer("queue", t.q.mq), zap.ByteString("stack", debug.Stack()))
				res, panicked = ConsumeRetryLater, fmt.Sprintf("panic: %v", r)
			}
		}()
		res = l(ctx, t.msgs)
	}()
	return res, oc, panicked, t.state.CompareAndSwap(taskRunning, taskFinished)
}

// timeoutLoop sends back the messages of listener calls that run longer
// than the consume timeout.
func (p *PushConsumer) timeoutLoop() {
	timeout := p.c.opts.consumeTimeout
	tick := time.NewTicker(min(max(timeout/4, 10*time.Millisecond), time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-p.c.loopCtx.Done():
			return
		case now := <-tick.C:
			for _, t := range p.running.expired(now.Add(-timeout)) {
				if !t.state.CompareAndSwap(taskRunning, taskExpired) {
					continue
				}
				p.c.log.Warn("listener exceeded the consume timeout; sending its messages back",
					zap.Stringer("queue", t.q.mq), zap.Duration("timeout", timeout), zap.Int("messages", len(t.msgs)))
				p.failed(t, 0, fmt.Sprintf("consume timeout: the listener ran longer than %v", timeout))
			}
		}
	}
}

// failed handles the messages of a failed listener call: sent back to the
// broker, or delivered again locally when they cannot be.
func (p *PushConsumer) failed(t *consumeTask, level int32, reason string) {
	var done, keep []*MessageExt
	if p.c.opts.model == Clustering {
		for _, m := range t.msgs {
			if t.q.pq.isDropped() {
				return // the queue's next owner consumes it from the committed offset
			}
			if err := p.c.sendBack(p.c.ctx, t.q.mq, m, level, m.ReconsumeTimes, reason); err != nil {
				if p.c.ctx.Err() == nil {
					p.c.log.Warn("send back failed; retrying the message locally", zap.Stringer("queue", t.q.mq),
						zap.String("msgId", m.MsgID), zap.Error(err))
				}
				keep = append(keep, m)
				continue
			}
			done = append(done, m)
		}
	} else {
		keep = t.msgs
	}
	if len(done) > 0 {
		t.q.pq.remove(done)
	}
	if len(keep) > 0 {
		p.retryLocally(&consumeTask{q: t.q, msgs: keep})
	}
}

// retryLocally delivers messages again after the retry delay. They stay in
// flight meanwhile, so the committed offset never passes them; if the queue
// is released first, its next owner consumes them from the committed
// offset.
func (p *PushConsumer) retryLocally(t *consumeTask) {
	for _, m := range t.msgs {
		m.ReconsumeTimes++
	}
	p.c.goRun(func() {
		if !sleepCtx(t.q.ctx, p.c.opts.retryDelay) {
			return
		}
		select {
		case p.tasks <- t:
		case <-t.q.ctx.Done():
		}
	})
}

// orderlyFailed handles a failed orderly batch: messages that reached the
// reconsume limit are dead-lettered (and leave the queue), the others count
// one more attempt. It reports whether any message is left to retry.
func (p *PushConsumer) orderlyFailed(q *pushQueue, batch []*MessageExt, reason string) bool {
	limit := p.c.opts.maxReconsumeTimes
	if limit < 0 {
		limit = defaultMaxReconsumeTimes
	}
	var dead []*MessageExt
	left := false
	for _, m := range batch {
		if int(m.ReconsumeTimes) < limit {
			m.ReconsumeTimes++
			left = true
			continue
		}
		if err := p.c.sendBack(q.ctx, q.mq, m, -1, m.ReconsumeTimes, reason); err != nil {
			if q.ctx.Err() == nil {
				p.c.log.Warn("dead-lettering an orderly message failed; retrying", zap.Stringer("queue", q.mq),
					zap.String("msgId", m.MsgID), zap.Error(err))
			}
			left = true
			continue
		}
		dead = append(dead, m)
	}
	if len(dead) > 0 {
		q.pq.remove(dead)
	}
	return left
}

// sendBack asks the master of mq's broker group to store a failed message
// in the group's retry (or dead-letter) topic. level < 0 dead-letters it;
// times is the client's count of failed attempts (the broker keeps the
// larger of it and the stored count).
func (c *consumerCore) sendBack(ctx context.Context, mq MessageQueue, m *MessageExt, level, times int32, reason string) error {
	if h := sendBackHook.Load(); h != nil {
		if err := (*h)(c.group, m); err != nil {
			return err
		}
	}
	_, addr, err := c.brokerFor(ctx, mq, true)
	if err != nil {
		return err
	}
	cc, err := c.pool.get(addr)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "the listener asked to retry later"
	}
	// The broker reads a maximum of 0 as its own setting; no retries is
	// asked for by the level that dead-letters at once.
	if c.opts.maxReconsumeTimes == 0 {
		level = -1
	}
	rctx, cancel := c.rpcContext(ctx)
	defer cancel()
	resp, err := pb.NewDeadLetterClient(cc).SendBack(rctx, &pb.SendBackRequest{
		Group: c.group, CommitLogOffset: m.CommitLogOffset, UniqueId: m.uniqKey(), OriginMsgId: m.OriginOffsetMsgID(),
		DelayLevel: level, MaxReconsumeTimes: int32(max(0, c.opts.maxReconsumeTimes)), ReconsumeTimes: times,
		Reason: reason,
	})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		c.routes.markStale(mq.Topic)
		return fmt.Errorf("send back %s to %s: %w", m.MsgID, addr, err)
	}
	return nil
}

// withoutRetryQueues drops the queues of retry topics.
func withoutRetryQueues(mqs []MessageQueue) []MessageQueue {
	out := mqs[:0]
	for _, mq := range mqs {
		if !message.IsRetryTopic(mq.Topic) {
			out = append(out, mq)
		}
	}
	return out
}
