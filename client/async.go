package client

import (
	"context"
	"reflect"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Coalescing of asynchronous sends.
//
// SendAsync puts each message on a lane: the messages of one topic that are
// routed alike (by the producer's round robin, to one queue given with
// WithQueue, or by one sharding key). A lane has at most one request on the
// wire. A message that finds its lane idle goes at once, alone; the
// messages that arrive while the lane's request is in flight wait and go
// out together, in the order SendAsync took them, as one batch request
// when it returns (at most WithAsyncBatch's count and bytes, and only
// messages sent with the same context). So an idle producer adds no
// latency, and a busy one sends fewer, larger requests. A batch goes
// through send, the same attempts, retries and failover as Send; each
// message's callback gets its own result, or the batch's error.

// asyncLaneKey names a lane: the topic and how its messages are routed.
type asyncLaneKey struct {
	topic       string
	queue       MessageQueue // WithQueue; the zero value otherwise
	hasQueue    bool
	shardingKey string
}

// asyncItem is one message waiting on a lane.
type asyncItem struct {
	ctx  context.Context
	msg  *Message
	pm   *pb.Message
	cb   func(*SendResult, error)
	size int // estimated bytes on the wire
}

// asyncLane is the queue of one lane. A lane is in Producer.lanes exactly
// while it has a drainer: a goroutine sending its next request.
type asyncLane struct {
	key asyncLaneKey
	so  *sendOptions // the routing every message of the lane shares
	// Producer.laneMu protects pending.
	pending []*asyncItem
}

// laneKeyOf returns the lane of a message sent with so, false when it must
// be sent on its own: a QueueSelector (a function, so no two sends can be
// known to pick the same queue), a retry topic (it takes one message per
// request) or a half message of a transaction (never batched by brokers).
func laneKeyOf(msg *Message, pm *pb.Message, so *sendOptions) (asyncLaneKey, bool) {
	if so.selector != nil || message.IsRetryTopic(msg.Topic) ||
		pm.GetProperties()[message.PropertyTransactionPrepared] == "true" {
		return asyncLaneKey{}, false
	}
	k := asyncLaneKey{topic: msg.Topic}
	switch {
	case so.queue != nil:
		k.queue, k.hasQueue = *so.queue, true
		k.queue.Topic = msg.Topic
	case so.shardingKey != "":
		k.shardingKey = so.shardingKey
	}
	return k, true
}

// sameContext reports whether a and b are the same context, without the
// risk of comparing values of a type that is not comparable: contexts of
// package context are pointers, apart from Background and TODO.
func sameContext(a, b context.Context) bool {
	if a == nil || b == nil {
		return false
	}
	ta := reflect.TypeOf(a)
	if ta != reflect.TypeOf(b) {
		return false
	}
	if ta.Kind() == reflect.Pointer {
		return a == b
	}
	bg, todo := context.Background(), context.TODO()
	return (a == bg && b == bg) || (a == todo && b == todo)
}

// itemSize estimates a message's bytes in a request.
func itemSize(pm *pb.Message) int {
	n := len(pm.GetBody()) + len(pm.GetTopic()) + 64
	for k, v := range pm.GetProperties() {
		n += len(k) + len(v) + 4
	}
	return n
}

// enqueueAsync puts it on the lane of key, starting the lane's drainer when
// it has none.
func (p *Producer) enqueueAsync(key asyncLaneKey, so *sendOptions, it *asyncItem) {
	p.laneMu.Lock()
	l := p.lanes[key]
	start := l == nil
	if start {
		l = &asyncLane{key: key, so: so}
		p.lanes[key] = l
	}
	l.pending = append(l.pending, it)
	p.laneMu.Unlock()
	if start {
		p.goDrain(l)
	}
}

// goDrain starts a drainer of l on one of the producer's workers. It is
// owned: each message it holds keeps its count in asyncWG until its
// callback has run, which Close waits for before it ends the workers.
func (p *Producer) goDrain(l *asyncLane) {
	p.workers.Go(func() { p.drainLane(l) })
}

// takeBatch takes the lane's next batch: the oldest waiting message and
// those after it sent with the same context, within the batch limits.
func (p *Producer) takeBatch(l *asyncLane) []*asyncItem {
	p.laneMu.Lock()
	defer p.laneMu.Unlock()
	first := l.pending[0]
	n, bytes, bodies := 1, first.size, len(first.pm.GetBody())
	for n < len(l.pending) && n < p.b.opts.asyncBatchMsgs {
		it := l.pending[n]
		body := len(it.pm.GetBody())
		if bytes+it.size > p.b.opts.asyncBatchBytes || bodies+body > p.b.opts.maxBodySize || !sameContext(first.ctx, it.ctx) {
			break
		}
		n, bytes, bodies = n+1, bytes+it.size, bodies+body
	}
	batch := make([]*asyncItem, n)
	copy(batch, l.pending)
	// Shift rather than reslice, so that the backing array is reused and
	// does not hold the items sent.
	rest := copy(l.pending, l.pending[n:])
	clear(l.pending[rest:])
	l.pending = l.pending[:rest]
	return batch
}

// drainLane sends the lane's next request. Once it has the outcome it
// hands the lane to a new drainer when messages wait (or retires the lane
// when none does), then runs the batch's callbacks itself: a callback,
// even one that blocks or sends again, never holds up the lane.
func (p *Producer) drainLane(l *asyncLane) {
	batch := p.takeBatch(l)
	if p.testBeforeBatch != nil {
		p.testBeforeBatch(len(batch))
	}
	res, errs := p.sendAsyncBatch(l, batch)
	p.laneMu.Lock()
	more := len(l.pending) > 0
	if !more {
		delete(p.lanes, l.key)
	}
	p.laneMu.Unlock()
	if more {
		p.goDrain(l)
	}
	// The sends are done: their slots go before the callbacks run, so a
	// callback that sends again finds room (WithAsyncSendLimit bounds the
	// sends in flight, not the callbacks).
	for range batch {
		<-p.asyncSem
	}
	for i, it := range batch {
		p.safeCallback(it.cb, res[i], errs[i])
		p.asyncWG.Done()
	}
}

// finishAsync frees the slot of one SendAsync whose outcome is known (of
// WithAsyncSendLimit), calls its callback and releases its count in
// asyncWG.
func (p *Producer) finishAsync(cb func(*SendResult, error), res *SendResult, err error) {
	<-p.asyncSem
	p.safeCallback(cb, res, err)
	p.asyncWG.Done()
}

// sendAsyncBatch sends a batch as one request and returns each message's
// result or error. A batch of several messages that the broker refuses for
// what it holds (one message it will not take, more messages than its
// batch limit) is sent again one message at a time, so that each message
// meets the answer it would have met alone.
func (p *Producer) sendAsyncBatch(l *asyncLane, batch []*asyncItem) ([]*SendResult, []error) {
	res := make([]*SendResult, len(batch))
	errs := make([]error, len(batch))
	pms := make([]*pb.Message, len(batch))
	for i, it := range batch {
		pms[i] = it.pm
	}
	ctx := batch[0].ctx
	defer p.recycleWireProperties(pms)
	out, err := p.send(ctx, batch[0].msg, pms, l.so)
	if err == nil {
		copy(res, out)
		return res, errs
	}
	if len(batch) == 1 || !refusedForContent(err) || ctx.Err() != nil {
		for i := range errs {
			errs[i] = err
		}
		return res, errs
	}
	for i, it := range batch {
		out, err := p.send(ctx, it.msg, []*pb.Message{it.pm}, l.so)
		if err != nil {
			errs[i] = err
			continue
		}
		res[i] = out[0]
	}
	return res, errs
}

// refusedForContent reports whether a broker refused a batch for what it
// holds, before storing any of it: a message it does not accept (its body,
// properties or delivery time) or a batch over its limits.
func refusedForContent(err error) bool {
	if !isCoded(err) {
		return false
	}
	switch wire.CodeOf(err) {
	case pb.Code_MESSAGE_ILLEGAL, pb.Code_INVALID_PARAMETER, pb.Code_MESSAGE_TOO_LARGE,
		pb.Code_PROPERTIES_TOO_LARGE, pb.Code_ILLEGAL_DELIVERY_TIME:
		return true
	}
	return false
}
