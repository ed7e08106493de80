package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// POP errors a broker answers.
var (
	// ErrInvalidReceiptHandle: a receipt handle that is malformed, stale
	// (replaced by ChangeInvisibleDuration), expired (its invisibility ran
	// out: the message may have gone to another consumer) or of another
	// group.
	ErrInvalidReceiptHandle = wire.Errorf(pb.Code_INVALID_RECEIPT_HANDLE, "")
	// ErrIllegalInvisibleTime: an invisible duration out of range.
	ErrIllegalInvisibleTime = wire.Errorf(pb.Code_ILLEGAL_INVISIBLE_TIME, "")
)

// pollMargin is how long before the caller's deadline a long poll ends;
// pollSlice how long Receive long-polls one broker at a time when it
// receives from several.
const (
	pollMargin = 100 * time.Millisecond
	pollSlice  = time.Second
)

// MaxInvisibleDuration is the longest a received message can stay
// invisible.
const MaxInvisibleDuration = 12 * time.Hour

// MessageView is a message a SimpleConsumer received: the stored message,
// its delivery attempt and the receipt handle that acknowledges it.
type MessageView struct {
	MessageExt
	// DeliveryAttempt is 1 on the first delivery, +1 on each redelivery.
	DeliveryAttempt int32
	// ReceiptHandle identifies this delivery; ChangeInvisibleDuration
	// replaces it.
	ReceiptHandle string
	// VisibleAt is when the message is delivered again unless it is
	// acknowledged first.
	VisibleAt time.Time
}

// SimpleConsumer receives messages over POP: a broker hands each message
// to one consumer of the group and keeps it invisible to the group's other
// receives until it is acknowledged (Ack) or its invisibility runs out;
// then it is delivered again with DeliveryAttempt incremented. Nack asks
// for the redelivery after the group's retry backoff instead; after the
// group's maximum delivery attempts a message goes to %DLQ%<group>. The
// group's FIFO flag, maximum attempts and backoff are its subscription
// group settings (Admin.CreateSubscriptionGroup). No queues are assigned:
// any number of simple consumers share a group's messages. It is safe for
// concurrent use.
type SimpleConsumer struct {
	b     *base
	group string
	subs  map[string]Selector // by topic (tag expressions in canonical form)
	await time.Duration

	started atomic.Bool
	closed  atomic.Bool
	rr      atomic.Uint64
	// attempts numbers the receives (their attempt ids).
	attempts atomic.Uint64

	mu sync.Mutex // orders Start and Close
}

// popTarget is a broker group serving a subscribed topic.
type popTarget struct {
	topic, brokerName string
	sel               Selector
}

// NewSimpleConsumer returns a simple consumer of group for subscriptions
// (topic → tag expression: "*" or "" for all, or "a || b"). await is how
// long Receive waits for a message when none is ready (0: it answers at
// once); the brokers cap it at their long-poll maximum.
// It takes the options every client takes (WithNameServers, WithLogger,
// WithRPCTimeout, ...); the other consumers' options do not apply.
func NewSimpleConsumer(group string, subscriptions map[string]string, await time.Duration, opts ...Option) (*SimpleConsumer, error) {
	sels := make(map[string]Selector, len(subscriptions))
	for topic, expr := range subscriptions {
		sels[topic] = ByTag(expr)
	}
	return NewSimpleConsumerSelectors(group, sels, await, opts...)
}

// NewSimpleConsumerSelectors is NewSimpleConsumer with a Selector per
// topic: ByTag, or SQL92 (the brokers evaluate the condition; messages
// that do not match are never handed out).
func NewSimpleConsumerSelectors(group string, subscriptions map[string]Selector, await time.Duration, opts ...Option) (*SimpleConsumer, error) {
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	if len(subscriptions) == 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "a simple consumer needs at least one subscription")
	}
	if await < 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "await duration %s is negative", await)
	}
	o, err := buildOptions(opts, Option.applyConsumer)
	if err != nil {
		return nil, err
	}
	c := &SimpleConsumer{group: group, subs: make(map[string]Selector, len(subscriptions)), await: await}
	for topic, sel := range subscriptions {
		if err := message.ValidateTopic(topic); err != nil {
			return nil, codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
		}
		if sel.sql {
			if strings.TrimSpace(sel.expr) == "" {
				return nil, codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "empty SQL92 condition for %s", topic)
			}
		} else {
			f, err := message.ParseTagExpression(sel.expr)
			if err != nil {
				return nil, codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "%v", err)
			}
			sel.expr = f.String()
		}
		c.subs[topic] = sel
	}
	c.b = newBase(o, o.instanceName)
	return c, nil
}

// ClientID returns the consumer's client id.
func (c *SimpleConsumer) ClientID() string { return c.b.clientID }

// Group returns the consumer's group.
func (c *SimpleConsumer) Group() string { return c.group }

// Start looks up the routes of the subscribed topics (a topic that does
// not exist is an error matching ErrTopicNotExist) and starts refreshing
// them.
func (c *SimpleConsumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	if c.started.Load() {
		return ErrAlreadyStarted
	}
	for _, topic := range slices.Sorted(maps.Keys(c.subs)) {
		if _, err := c.b.routes.get(ctx, topic); err != nil {
			return fmt.Errorf("route of %s: %w", topic, err)
		}
	}
	c.b.startRouteRefresher()
	c.started.Store(true)
	return nil
}

// Close stops the consumer. Messages received and not acknowledged are
// delivered again once their invisibility runs out.
func (c *SimpleConsumer) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Swap(true) {
		return nil
	}
	return c.b.close()
}

func (c *SimpleConsumer) check() error {
	switch {
	case c.closed.Load():
		return ErrClosed
	case !c.started.Load():
		return ErrNotStarted
	}
	return nil
}

// targets lists the broker groups of the subscribed topics that have a
// readable queue and a master, in a stable order.
func (c *SimpleConsumer) targets(ctx context.Context) ([]popTarget, error) {
	var out []popTarget
	var errs []error
	for _, topic := range slices.Sorted(maps.Keys(c.subs)) {
		ri, err := c.b.routes.get(ctx, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("route of %s: %w", topic, err))
			continue
		}
		for _, q := range ri.route.Queues {
			if q.Perm.Readable() && q.ReadQueues > 0 && ri.brokers[q.BrokerName].MasterAddr() != "" {
				out = append(out, popTarget{topic: topic, brokerName: q.BrokerName, sel: c.subs[topic]})
			}
		}
	}
	if len(out) == 0 {
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("no broker serves %v with a master: %w", slices.Sorted(maps.Keys(c.subs)), ErrNoRoute)
	}
	return out, nil
}

// Receive returns up to maxMessages messages (0: 32), each invisible to
// the group's other receives for invisible (in (0, 12 h]). It asks the
// brokers of the subscribed topics in turn, starting with a different one
// on each call; when none has a message ready it waits up to the await
// duration (or until ctx is done) for one, long-polling the brokers in
// turn a second at a time (one broker: the whole await). No message is no
// error: it returns an empty slice.
func (c *SimpleConsumer) Receive(ctx context.Context, maxMessages int, invisible time.Duration) ([]*MessageView, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if maxMessages < 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "max messages %d is negative", maxMessages)
	}
	if maxMessages == 0 {
		maxMessages = 32
	}
	if invisible <= 0 || invisible > MaxInvisibleDuration {
		return nil, codeErr(pb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %s is not in (0, %s]", invisible, MaxInvisibleDuration)
	}
	ctx, cancel := c.b.mergeContext(ctx)
	defer cancel()
	targets, err := c.targets(ctx)
	if err != nil {
		return nil, err
	}
	start := int(c.rr.Add(1) % uint64(len(targets)))
	var out []*MessageView
	var errs []error
	failed := make([]bool, len(targets))
	// One pass without waiting, so that a message ready on any broker is
	// returned at once.
	for i := 0; i < len(targets) && len(out) < maxMessages; i++ {
		j := (start + i) % len(targets)
		msgs, err := c.receiveFrom(ctx, targets[j], maxMessages-len(out), invisible, 0)
		if err != nil {
			if ctxEnded(ctx) != nil {
				break
			}
			errs = append(errs, err)
			failed[j] = true
			continue
		}
		out = append(out, msgs...)
	}
	switch ended := ctxEnded(ctx); {
	case len(out) > 0:
		// Handed out: returned even when ctx is done, so that the caller
		// can acknowledge them.
		return out, nil
	case ended != nil:
		return nil, ended
	case len(errs) == len(targets):
		return nil, errors.Join(errs...)
	case c.await == 0:
		return nil, nil
	}
	// Nothing ready: long-poll the brokers that answered in turn, in
	// slices when there are several, so that a message arriving on any
	// of them waits at most a slice.
	end := time.Now().Add(c.await)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-pollMargin).Before(end) {
		// The broker answers when the poll ends: end it a little before
		// ctx does.
		end = dl.Add(-pollMargin)
	}
	for i := 0; ; i++ {
		j := (start + i) % len(targets)
		if failed[j] {
			continue
		}
		poll := time.Until(end)
		if poll <= 0 {
			return nil, nil
		}
		if len(targets)-len(errs) > 1 {
			poll = min(poll, pollSlice)
		}
		msgs, err := c.receiveFrom(ctx, targets[j], maxMessages, invisible, poll)
		switch ended := ctxEnded(ctx); {
		case len(msgs) > 0:
			return msgs, nil
		case ended != nil:
			return nil, ended
		case err != nil:
			errs = append(errs, err)
			failed[j] = true
			if len(errs) == len(targets) {
				return nil, errors.Join(errs...)
			}
		}
	}
}

// receiveFrom makes one receive on the master of t. A receive whose answer
// was lost (the connection broke or the call timed out) is made once more
// with the same attempt id: in a FIFO group the broker then hands out the
// same batch again instead of keeping the queue blocked until the lost
// batch's invisibility runs out.
func (c *SimpleConsumer) receiveFrom(ctx context.Context, t popTarget, maxMessages int, invisible, poll time.Duration) ([]*MessageView, error) {
	req := &pb.ReceiveRequest{
		Group: c.group, Topic: t.topic, QueueId: -1, MaxMessages: int32(maxMessages), InvisibleMs: invisible.Milliseconds(),
		TagExpression: t.sel.expr, ExpressionType: t.sel.exprType(), PollTimeoutMs: poll.Milliseconds(), ClientId: c.b.clientID,
		AttemptId: fmt.Sprintf("%s-%d", c.b.clientID, c.attempts.Add(1)),
	}
	msgs, lost, err := c.receiveOnce(ctx, t, req)
	if lost && ctxEnded(ctx) == nil {
		msgs, _, err = c.receiveOnce(ctx, t, req)
	}
	return msgs, err
}

// receiveOnce makes one Receive call; lost reports a transport failure
// (the broker may have handed out messages whose answer never came).
func (c *SimpleConsumer) receiveOnce(ctx context.Context, t popTarget, req *pb.ReceiveRequest) (msgs []*MessageView, lost bool, err error) {
	cli, addr, err := c.master(ctx, t.topic, t.brokerName)
	if err != nil {
		return nil, false, err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(req.PollTimeoutMs)*time.Millisecond+c.b.opts.rpcTimeout)
	defer cancel()
	resp, err := cli.Receive(rctx, req)
	if err != nil {
		lost = isTransport(err)
		err = brokerFailure(ctx, addr, err)
		if errors.Is(err, ErrBrokerUnreachable) {
			c.b.routes.markStale(t.topic)
		}
		return nil, lost, fmt.Errorf("receive %s from %s (%s): %w", t.topic, t.brokerName, addr, err)
	}
	if err := fromStatus(resp.GetStatus()); err != nil {
		if errors.Is(err, ErrNotMaster) {
			c.b.routes.markStale(t.topic)
		}
		return nil, false, fmt.Errorf("receive %s from %s (%s): %w", t.topic, t.brokerName, addr, err)
	}
	out := make([]*MessageView, 0, len(resp.GetMessages()))
	d := recordDecoder{brokerName: t.brokerName}
	for _, m := range resp.GetMessages() {
		ext, err := d.decode(m.GetRecord())
		if err != nil {
			return out, false, err
		}
		out = append(out, &MessageView{MessageExt: *ext, DeliveryAttempt: m.GetDeliveryAttempt(),
			ReceiptHandle: m.GetReceiptHandle(), VisibleAt: time.UnixMilli(m.GetVisibleAtMs())})
	}
	return out, false, nil
}

// master returns a client for the master of broker group name serving
// topic.
func (c *SimpleConsumer) master(ctx context.Context, topic, name string) (*brokerClient, string, error) {
	bd, ok := c.b.routes.broker(name)
	if !ok || bd.MasterAddr() == "" {
		ri, err := c.b.routes.get(ctx, topic)
		if err != nil {
			return nil, "", err
		}
		bd, ok = ri.brokers[name]
	}
	if !ok || bd.MasterAddr() == "" {
		return nil, "", codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", name)
	}
	cli, err := c.b.broker(bd.MasterAddr())
	return cli, bd.MasterAddr(), err
}

// handleCall makes one call about a received message on the master that
// handed it out.
func (c *SimpleConsumer) handleCall(ctx context.Context, what string, m *MessageView, fn func(ctx context.Context, cli pb.BrokerClient) (*pb.Status, error)) error {
	if err := c.check(); err != nil {
		return err
	}
	if m == nil || m.ReceiptHandle == "" {
		return codeErr(pb.Code_INVALID_RECEIPT_HANDLE, "%s: no receipt handle", what)
	}
	ctx, cancel := c.b.mergeContext(ctx)
	defer cancel()
	cli, addr, err := c.master(ctx, m.Topic, m.BrokerName)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, m.MsgID, err)
	}
	rctx, rcancel := c.b.rpcContext(ctx)
	defer rcancel()
	st, err := fn(rctx, cli)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", what, m.MsgID, addr, brokerFailure(ctx, addr, err))
	}
	if err := fromStatus(st); err != nil {
		return fmt.Errorf("%s %s on %s: %w", what, m.MsgID, addr, err)
	}
	return nil
}

// Ack acknowledges received messages: they are not delivered again. The
// messages of one topic and broker group go in one request. A message
// whose invisibility ran out (or whose handle was replaced) is not
// acknowledged: its error matches ErrInvalidReceiptHandle. The errors of
// the messages that failed are returned joined.
func (c *SimpleConsumer) Ack(ctx context.Context, msgs ...*MessageView) error {
	type key struct{ topic, broker string }
	var order []key
	batches := make(map[key][]*MessageView)
	for _, m := range msgs {
		if m == nil || m.ReceiptHandle == "" {
			return codeErr(pb.Code_INVALID_RECEIPT_HANDLE, "ack: a message without a receipt handle")
		}
		k := key{m.Topic, m.BrokerName}
		if batches[k] == nil {
			order = append(order, k)
		}
		batches[k] = append(batches[k], m)
	}
	var errs []error
	for _, k := range order {
		batch := batches[k]
		for len(batch) > 0 {
			n := min(len(batch), maxAckBatch)
			errs = append(errs, c.ackBatch(ctx, batch[:n])...)
			batch = batch[n:]
		}
	}
	return errors.Join(errs...)
}

// maxAckBatch bounds the receipt handles of one Ack request (the broker
// takes up to 1024).
const maxAckBatch = 256

// ackBatch acknowledges messages of one topic and broker group.
func (c *SimpleConsumer) ackBatch(ctx context.Context, msgs []*MessageView) []error {
	handles := make([]string, len(msgs))
	for i, m := range msgs {
		handles[i] = m.ReceiptHandle
	}
	var resp *pb.AckResponse
	err := c.handleCall(ctx, "ack", msgs[0], func(ctx context.Context, cli pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = cli.Ack(ctx, &pb.AckRequest{Group: c.group, Topic: msgs[0].Topic, ReceiptHandles: handles})
		return resp.GetStatus(), err
	})
	if err != nil {
		return []error{err}
	}
	var errs []error
	for i, m := range msgs {
		var st *pb.Status
		if i < len(resp.GetResults()) {
			st = resp.GetResults()[i]
		} else {
			st = &pb.Status{Code: pb.Code_SYSTEM_ERROR, Message: "the broker answered no result for this handle"}
		}
		if err := fromStatus(st); err != nil {
			errs = append(errs, fmt.Errorf("ack %s: %w", m.MsgID, err))
		}
	}
	return errs
}

// ChangeInvisibleDuration makes a received message visible again d from
// now (d in [0, 12 h]) unless it is acknowledged first. On success m's
// ReceiptHandle and VisibleAt are replaced (m must not be used
// concurrently meanwhile): the old handle is stale.
func (c *SimpleConsumer) ChangeInvisibleDuration(ctx context.Context, m *MessageView, d time.Duration) error {
	if d < 0 || d > MaxInvisibleDuration {
		return codeErr(pb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %s is not in [0, %s]", d, MaxInvisibleDuration)
	}
	var resp *pb.ChangeInvisibleResponse
	err := c.handleCall(ctx, "change invisible duration of", m, func(ctx context.Context, cli pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = cli.ChangeInvisible(ctx, &pb.ChangeInvisibleRequest{Group: c.group, Topic: m.Topic,
			ReceiptHandle: m.ReceiptHandle, InvisibleMs: d.Milliseconds()})
		return resp.GetStatus(), err
	})
	if err != nil {
		return err
	}
	m.ReceiptHandle, m.VisibleAt = resp.GetReceiptHandle(), time.UnixMilli(resp.GetVisibleAtMs())
	return nil
}

// Nack gives a received message back: it is delivered again after the
// group's retry backoff for its delivery attempt (or goes to %DLQ%<group>
// once it has had the group's maximum attempts). It returns the backoff.
func (c *SimpleConsumer) Nack(ctx context.Context, m *MessageView) (time.Duration, error) {
	var resp *pb.NackResponse
	err := c.handleCall(ctx, "nack", m, func(ctx context.Context, cli pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = cli.Nack(ctx, &pb.NackRequest{Group: c.group, Topic: m.Topic, ReceiptHandle: m.ReceiptHandle})
		return resp.GetStatus(), err
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(resp.GetBackoffMs()) * time.Millisecond, nil
}
