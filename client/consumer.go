package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

var errNoSubscription = codeErr(pb.Code_INVALID_PARAMETER, "no subscription: call Subscribe before Start")

// subscription is one topic a consumer subscribes to.
type subscription struct {
	topic    string
	sel      Selector
	filter   *message.TagExpression // the tag filter; "*" for SQL92
	listener any                    // ConcurrentListener or OrderlyListener (push consumer)
}

// queueHandler is what the core asks a consumer to do when its assignment
// changes. Both calls run on the rebalance goroutine (or in Close, after
// it stopped).
type queueHandler interface {
	addQueues(mqs []MessageQueue)
	// removeQueues stops work on mqs, commits their offsets and releases
	// them (unlocks orderly queues).
	removeQueues(ctx context.Context, mqs []MessageQueue)
}

// consumerCore is what push and pull consumers share: subscriptions, the
// Connect sessions that register the client with brokers and carry
// heartbeats, rebalancing, offsets and pulling.
type consumerCore struct {
	*base
	group       string
	consumeType pb.ConsumeType
	orderly     bool
	handler     queueHandler
	offsets     offsetStore
	reads       *readSelector // master or slave, per broker group (readfrom.go)

	mu          sync.Mutex
	subs        map[string]*subscription
	assigned    map[MessageQueue]bool
	sessions    *brokerSessions
	rebalanced  int // completed rebalances, for tests
	loopStarted bool

	rebalanceNow signal
	// refusal is the last permanent refusal (isPermanentRefusal) met in
	// the background and not reported yet (PullConsumer.Poll); onRefusal,
	// when set, is told of each (WithRefusalHandler, and Poll's wake-up).
	refusal   atomic.Pointer[error]
	onRefusal []func(error)
	// loopCtx stops the rebalance loop before the queues are released.
	loopCtx    context.Context
	loopCancel context.CancelFunc
	loopDone   chan struct{}
}

func newConsumerCore(group string, o options, consumeType pb.ConsumeType) (*consumerCore, error) {
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "consumer group: %v", err)
	}
	instance := o.instanceName
	if instance == "" && o.model == Broadcasting {
		instance = "DEFAULT"
	}
	c := &consumerCore{
		base: newBase(o, instance), group: group, consumeType: consumeType,
		subs: make(map[string]*subscription), assigned: make(map[MessageQueue]bool),
		rebalanceNow: newSignal(), loopDone: make(chan struct{}),
	}
	c.sessions = newBrokerSessions(c.base, "broker session", c.heartbeat, c.onBrokerMessage)
	// The broker forgot us while the stream was down: others may have
	// rebalanced without us.
	c.sessions.onReconnect = c.rebalanceNow.notify
	c.sessions.refused = c.noteFailure
	c.log = c.log.With(zap.String("group", group))
	if o.refusalHandler != nil {
		c.onRefusal = append(c.onRefusal, o.refusalHandler)
	}
	c.reads = newReadSelector(o.masterRetry, c.log)
	c.loopCtx, c.loopCancel = context.WithCancel(c.ctx)
	if o.model == Broadcasting {
		path, err := o.offsetFile(c.clientID, group)
		if err == nil {
			c.offsets, err = newLocalOffsetStore(path, group)
		}
		if err != nil {
			_ = c.base.close()
			return nil, err
		}
	} else {
		c.offsets = newRemoteOffsetStore(c)
	}
	return c, nil
}

// subscribe adds or replaces the subscription of a topic. An SQL92
// condition is checked with the topic's brokers when they can be asked.
func (c *consumerCore) subscribe(topic string, sel Selector, listener any) error {
	if err := message.ValidateTopic(topic); err != nil {
		return codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	tags := sel.expr
	if sel.sql {
		ctx, cancel := c.rpcContext(c.ctx)
		err := c.checkSQL(ctx, topic, sel.expr)
		cancel()
		if err != nil {
			return err
		}
		tags = "*"
	}
	f, err := message.ParseTagExpression(tags)
	if err != nil {
		return codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "%v", err)
	}
	c.mu.Lock()
	c.subs[topic] = &subscription{topic: topic, sel: sel, filter: f, listener: listener}
	c.mu.Unlock()
	return nil
}

// expression is what the brokers filter with: the normalised tag
// expression, or the SQL92 condition.
func (s *subscription) expression() string {
	if s.sel.sql {
		return s.sel.expr
	}
	return s.filter.String()
}

func (c *consumerCore) unsubscribe(topic string) {
	c.mu.Lock()
	delete(c.subs, topic)
	c.mu.Unlock()
}

func (c *consumerCore) subscription(topic string) *subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[topic]
}

func (c *consumerCore) topics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.subs))
	for t := range c.subs {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// noteFailure records err, a failure met in the background, when it is a
// permanent refusal; it reports whether it was one (then whoever retries
// should wait long: nothing changes until the configuration does).
func (c *consumerCore) noteFailure(err error) bool {
	if !isPermanentRefusal(err) {
		return false
	}
	c.refusal.Store(&err)
	for _, f := range c.onRefusal {
		f(err)
	}
	return true
}

// takeRefusal returns the refusal noted and not reported yet, and forgets
// it.
func (c *consumerCore) takeRefusal() error {
	if p := c.refusal.Swap(nil); p != nil {
		return *p
	}
	return nil
}

// assignment returns the queues this consumer holds, sorted.
func (c *consumerCore) assignment() []MessageQueue {
	c.mu.Lock()
	out := make([]MessageQueue, 0, len(c.assigned))
	for mq := range c.assigned {
		out = append(out, mq)
	}
	c.mu.Unlock()
	slices.SortFunc(out, compareQueue)
	return out
}

// start fetches routes, opens sessions (waiting briefly for the first
// heartbeats) and starts the rebalance and route loops.
func (c *consumerCore) start(ctx context.Context) error {
	if !c.hasSubscriptions() {
		return errNoSubscription
	}
	if err := c.checkSQLSubscriptions(ctx); err != nil {
		return err
	}
	// Credentials the NameServers refuse, or plain text to NameServers
	// that accept TLS only, fail Start, rather than a consumer that
	// retries in the background for ever.
	for _, t := range c.topics() {
		if _, err := c.routes.get(ctx, t); isPermanentRefusal(err) {
			return fmt.Errorf("consumer group %s: %w", c.group, err)
		}
	}
	c.startRouteRefresher()
	c.syncSessions(ctx)
	c.sessions.waitFirstHeartbeats(ctx)
	c.mu.Lock()
	c.loopStarted = true
	c.mu.Unlock()
	c.goRun(c.rebalanceLoop)
	c.rebalanceNow.notify()
	c.log.Info("consumer started", zap.String("model", c.opts.model.String()),
		zap.Bool("orderly", c.orderly), zap.Strings("topics", c.topics()))
	return nil
}

// stopLoops stops the rebalance loop and waits for it.
func (c *consumerCore) stopLoops() {
	c.loopCancel()
	c.mu.Lock()
	started := c.loopStarted
	c.mu.Unlock()
	if started {
		<-c.loopDone
	}
}

// hasSubscriptions reports whether Subscribe was called.
func (c *consumerCore) hasSubscriptions() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs) > 0
}

// close releases every queue, persists offsets, closes the sessions and
// the connections. The handler's goroutines must be stopped by then except
// those removeQueues stops.
func (c *consumerCore) close(ctx context.Context, started bool) error {
	var errs []error
	if started {
		c.stopLoops()
		mqs := c.assignment()
		c.handler.removeQueues(ctx, mqs)
		c.mu.Lock()
		clear(c.assigned)
		c.mu.Unlock()
		if err := c.offsets.persist(ctx, nil); err != nil {
			errs = append(errs, fmt.Errorf("persist offsets: %w", err))
		}
		c.sessions.close()
	}
	if err := c.base.close(); err != nil {
		errs = append(errs, err)
	}
	c.log.Info("consumer closed")
	return errors.Join(errs...)
}

func (c *consumerCore) rebalanceLoop() {
	defer close(c.loopDone)
	ctx := c.loopCtx
	tick := time.NewTicker(c.opts.rebalanceInterval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.rebalanceNow:
		case <-retry.C:
		}
		c.syncSessions(ctx)
		if c.rebalance(ctx) {
			backoff = 100 * time.Millisecond
			continue
		}
		// An incomplete rebalance (a route or the member list could not be
		// read, or the broker does not list us yet) is retried soon.
		retry.Reset(backoff)
		backoff = min(2*backoff, c.opts.rebalanceInterval)
	}
}

// rebalance computes the queues this consumer should hold and applies the
// difference. It reports whether the computation was complete.
func (c *consumerCore) rebalance(ctx context.Context) bool {
	complete := true
	desired := make(map[MessageQueue]bool)
	c.mu.Lock()
	current := make(map[MessageQueue]bool, len(c.assigned))
	for mq := range c.assigned {
		current[mq] = true
	}
	c.mu.Unlock()
	keep := func(topic string) {
		for mq := range current {
			if mq.Topic == topic {
				desired[mq] = true
			}
		}
	}
	for _, topic := range c.topics() {
		ri, err := c.routes.get(ctx, topic)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("rebalance: no route", zap.String("topic", topic), zap.Error(err))
			}
			complete = false
			if !errors.Is(err, ErrTopicNotExist) {
				keep(topic)
			}
			continue
		}
		var mine []MessageQueue
		if c.opts.model == Broadcasting {
			mine = ri.subscribe
		} else {
			cids, err := c.consumerList(ctx, ri)
			if err != nil {
				switch {
				case ctx.Err() != nil:
				case errors.Is(err, ErrGroupNotExist):
					// Our first heartbeat has not been applied yet.
					c.log.Debug("rebalance: group not yet known to the broker", zap.String("topic", topic))
				case c.noteFailure(err):
					c.log.Error("rebalance: consumer list refused", zap.String("topic", topic), zap.Error(err))
				default:
					c.log.Warn("rebalance: no consumer list", zap.String("topic", topic), zap.Error(err))
				}
				complete = false
				keep(topic)
				continue
			}
			if !slices.Contains(cids, c.clientID) {
				c.log.Debug("rebalance: broker does not list this client yet", zap.String("topic", topic))
				complete = false
			}
			mine = c.opts.allocate.Allocate(c.group, c.clientID, ri.subscribe, cids)
		}
		for _, mq := range mine {
			desired[mq] = true
		}
	}
	var added, removed []MessageQueue
	for mq := range current {
		if !desired[mq] {
			removed = append(removed, mq)
		}
	}
	for mq := range desired {
		if !current[mq] {
			added = append(added, mq)
		}
	}
	slices.SortFunc(added, compareQueue)
	slices.SortFunc(removed, compareQueue)
	if len(removed) > 0 {
		c.handler.removeQueues(ctx, removed)
	}
	c.mu.Lock()
	for _, mq := range removed {
		delete(c.assigned, mq)
	}
	for _, mq := range added {
		c.assigned[mq] = true
	}
	if complete {
		c.rebalanced++
	}
	c.mu.Unlock()
	if len(added) > 0 {
		c.handler.addQueues(added)
	}
	if len(added) > 0 || len(removed) > 0 {
		c.log.Info("rebalanced", zap.Stringers("added", added), zap.Stringers("removed", removed),
			zap.Int("holding", len(desired)))
	}
	return complete
}

// consumerList returns the group's client ids, sorted, from the first
// broker of the topic (in name order, so that every member asks the same
// broker; within a group the one read from first) that answers.
func (c *consumerCore) consumerList(ctx context.Context, ri *routeInfo) ([]string, error) {
	var errs []error
	for _, bd := range ri.route.Brokers {
		for _, addr := range c.listAddrs(bd) {
			cli, err := c.broker(addr)
			if err != nil {
				return nil, err
			}
			rctx, cancel := c.rpcContext(ctx)
			resp, err := cli.GetConsumerList(rctx, &pb.GetConsumerListRequest{Group: c.group})
			cancel()
			if err == nil {
				err = fromStatus(resp.GetStatus())
			}
			if err == nil {
				cids := append([]string(nil), resp.GetClientIds()...)
				sort.Strings(cids)
				return slices.Compact(cids), nil
			}
			errs = append(errs, fmt.Errorf("%s (%s): %w", bd.BrokerName, addr, err))
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w %q: no broker address", ErrNoRoute, ri.route.Topic)
	}
	return nil, fmt.Errorf("get consumer list: %w", errors.Join(errs...))
}

// brokerFor returns a client for the broker group of mq: its master, or
// with master=false the broker the group is read from (readfrom.go): the
// master, or a slave while the master is unavailable; offsets are read and
// committed there too. The route is looked up in the cache first.
func (c *consumerCore) brokerFor(ctx context.Context, mq MessageQueue, master bool) (pb.BrokerClient, string, error) {
	bd, ok := c.brokerData(ctx, mq)
	addr := ""
	if ok {
		if master {
			addr = bd.MasterAddr()
		} else {
			_, addr = c.reads.pick(bd, c.orderly)
		}
	}
	if addr == "" {
		return nil, "", codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no reachable address", mq.BrokerName)
	}
	cli, err := c.broker(addr)
	return cli, addr, err
}

// startOffset returns where to start consuming mq: the committed offset, or
// the one WithConsumeFrom says.
func (c *consumerCore) startOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	off, err := c.offsets.read(ctx, mq)
	if err != nil || off >= 0 {
		return off, err
	}
	cli, addr, err := c.brokerFor(ctx, mq, false)
	if err != nil {
		return -1, err
	}
	rctx, cancel := c.rpcContext(ctx)
	defer cancel()
	cf := c.opts.consumeFrom
	if message.IsRetryTopic(mq.Topic) {
		cf = ConsumeFromFirst
	}
	if cf.kind == fromTimestamp {
		resp, err := cli.SearchOffset(rctx, &pb.SearchOffsetRequest{Topic: mq.Topic, QueueId: mq.QueueID, TimestampMs: cf.at.UnixMilli()})
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil {
			return -1, fmt.Errorf("search offset of %s at %s: %w", mq, addr, err)
		}
		return resp.GetOffset(), nil
	}
	resp, err := cli.GetQueueOffsets(rctx, &pb.GetQueueOffsetsRequest{Topic: mq.Topic, QueueId: mq.QueueID})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return -1, fmt.Errorf("queue offsets of %s at %s: %w", mq, addr, err)
	}
	if cf.kind == fromFirst {
		return resp.GetMinOffset(), nil
	}
	return resp.GetMaxOffset(), nil
}

// resolveStart retries startOffset until it succeeds or ctx is done.
func (c *consumerCore) resolveStart(ctx context.Context, mq MessageQueue) (int64, bool) {
	backoff := 100 * time.Millisecond
	for {
		off, err := c.startOffset(ctx, mq)
		if err == nil {
			c.log.Debug("start offset", zap.Stringer("queue", mq), zap.Int64("offset", off))
			return off, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		if c.noteFailure(err) {
			c.log.Error("start offset refused", zap.Stringer("queue", mq), zap.Error(err))
			backoff = 3 * time.Second
		} else {
			c.log.Warn("cannot find the start offset", zap.Stringer("queue", mq), zap.Error(err))
			c.routes.markStale(mq.Topic)
		}
		if !sleepCtx(ctx, backoff) {
			return 0, false
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

// pullResult is a decoded pull response; msgs are the messages that pass
// the subscription's exact tag check.
type pullResult struct {
	status pb.PullStatus
	msgs   []*MessageExt
	next   int64
	min    int64
	max    int64
}

// pull makes one (long polling) pull of mq from offset. commitOffset, when
// ≥ 0, is committed by the broker first (the broker read from holds the
// offsets). A pull the master cannot serve is made again on a slave.
func (c *consumerCore) pull(ctx context.Context, mq MessageQueue, sub *subscription, offset, commitOffset int64, maxMsgs int) (*pullResult, error) {
	res, id, err := c.pullOnce(ctx, mq, sub, offset, commitOffset, maxMsgs)
	if err != nil && c.readFailed(ctx, mq, id, err) {
		res, _, err = c.pullOnce(ctx, mq, sub, offset, commitOffset, maxMsgs)
	}
	return res, err
}

// pullOnce is one pull; it returns the id of the broker asked (-1: none).
func (c *consumerCore) pullOnce(ctx context.Context, mq MessageQueue, sub *subscription, offset, commitOffset int64, maxMsgs int) (*pullResult, int64, error) {
	t, err := c.readFrom(ctx, mq)
	if err != nil {
		return nil, t.id, err
	}
	cli, addr := t.cli, t.addr
	suspend := c.reads.suspend(t.id, c.opts.longPollTimeout)
	resp, err := c.pullFrom(ctx, suspend+c.opts.rpcTimeout+5*time.Second, addr, cli, &pb.PullRequest{
		Group: c.group, Topic: mq.Topic, QueueId: mq.QueueID, Offset: offset,
		MaxMessages: int32(maxMsgs), MaxBytes: int32(c.opts.pullMaxBytes),
		TagExpression: sub.expression(), ExpressionType: sub.sel.exprType(), SuspendTimeoutMs: suspend.Milliseconds(), CommitOffset: commitOffset,
	})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, t.id, fmt.Errorf("pull %s at %d from %s: %w", mq, offset, addr, err)
	}
	res := &pullResult{status: resp.GetPullStatus(), next: resp.GetNextOffset(), min: resp.GetMinOffset(), max: resp.GetMaxOffset()}
	if t.id > 0 && res.status == pb.PullStatus_OFFSET_ILLEGAL {
		// A slave behind its master must not move the consumer's offset:
		// only a master's queue bounds are authoritative.
		return nil, t.id, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "slave %d of %s cannot serve offset %d of queue %d (it holds %d..%d)",
			t.id, mq.BrokerName, offset, mq.QueueID, res.min, res.max)
	}
	if res.status != pb.PullStatus_FOUND {
		return res, t.id, nil
	}
	res.msgs = make([]*MessageExt, 0, len(resp.GetRecords()))
	d := recordDecoder{brokerName: mq.BrokerName}
	d.expect(len(resp.GetRecords()))
	for _, rec := range resp.GetRecords() {
		m, err := d.decode(rec)
		if err != nil {
			return nil, t.id, fmt.Errorf("pull %s at %d from %s: %w", mq, offset, addr, err)
		}
		if m.QueueOffset < offset || !sub.filter.Match(m.Tag) {
			continue
		}
		res.msgs = append(res.msgs, m)
	}
	return res, t.id, nil
}

// heartbeat is this consumer's registration.
func (c *consumerCore) heartbeat() *pb.ClientMessage {
	cd := &pb.ConsumerData{
		Group: c.group, ConsumeType: c.consumeType, MessageModel: c.opts.model.proto(), Orderly: c.orderly,
	}
	for _, t := range c.topics() {
		if s := c.subscription(t); s != nil {
			cd.Subscriptions = append(cd.Subscriptions, &pb.Subscription{Topic: t, Expression: s.expression(), ExpressionType: s.sel.exprType()})
		}
	}
	return &pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{
		ClientId: c.clientID, Consumers: []*pb.ConsumerData{cd},
	}}}
}

// subscriptionsChanged tells the brokers of a started consumer's new
// subscriptions at once and rebalances.
func (c *consumerCore) subscriptionsChanged() {
	c.sessions.heartbeatNow()
	c.rebalanceNow.notify()
}

// syncSessions opens a session to every broker address of the subscribed
// topics and closes the others.
func (c *consumerCore) syncSessions(ctx context.Context) {
	want := make(map[string]bool)
	for _, t := range c.topics() {
		ri, err := c.routes.get(ctx, t)
		if err != nil {
			continue
		}
		for _, bd := range ri.route.Brokers {
			for _, a := range bd.Addrs {
				want[a] = true
			}
		}
	}
	c.sessions.sync(want)
}

// onBrokerMessage handles what a broker sends on a session: a change of
// the group's members starts a rebalance.
func (c *consumerCore) onBrokerMessage(_ context.Context, addr string, m *pb.BrokerMessage) {
	if ch := m.GetConsumerIdsChanged(); ch != nil && (ch.GetGroup() == "" || ch.GetGroup() == c.group) {
		c.log.Debug("consumer ids changed", zap.String("broker", addr))
		c.rebalanceNow.notify()
	}
}
