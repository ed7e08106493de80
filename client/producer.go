package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/internal/workers"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// workerLinger is how long an idle worker of a producer's pool waits for
// its next function before it ends, and workerMaxIdle how many may wait at
// once. SendAsync starts one function per request (a lane's drainer, a
// send of its own, a callback), each running deep enough (protobuf
// marshalling, the route lookup) that a fresh goroutine would grow its
// stack in every request.
const (
	workerLinger  = 250 * time.Millisecond
	workerMaxIdle = 16
)

// Client lifecycle states.
const (
	stateNew int32 = iota
	stateStarted
	stateClosed
)

// Producer sends messages. It is safe for concurrent use.
type Producer struct {
	b        *base
	group    string
	faults   *faultTracker
	ids      *message.UniqueIDGenerator
	bornHost string
	// rr is each topic's round-robin position (topic → *atomic.Uint64),
	// as RocketMQ keeps one per topic: with one counter for all topics, a
	// producer sending to k topics in turn would use only every k-th
	// queue of each.
	rr    sync.Map
	state atomic.Int32

	// Lock order: muxMu and asyncMu are never held together. mux holds
	// muxMu while it takes the connection pool's lock (p.b.broker).
	// SendAsync and Close release asyncMu before they call a callback or
	// wait for asyncWG.
	muxMu sync.Mutex
	muxes map[string]*sendMux

	// asyncMu orders SendAsync's asyncWG.Add before Close's Wait.
	asyncMu  sync.RWMutex
	asyncWG  sync.WaitGroup
	asyncSem chan struct{}
	closed   bool

	// laneMu protects lanes and each lane's pending messages (async.go).
	// It is taken alone.
	laneMu sync.Mutex
	lanes  map[asyncLaneKey]*asyncLane
	// workers run the asynchronous sends' drainers, sends and callbacks
	// (async.go); Close ends them once asyncWG is done.
	workers *workers.Pool
	// testBeforeBatch, set by tests before the first send, is called
	// with the size of each coalesced request before it is sent.
	testBeforeBatch func(n int)
}

// NewProducer returns a producer of group. Nothing is contacted until
// Start.
func NewProducer(group string, opts ...ProducerOption) (*Producer, error) {
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "producer group: %v", err)
	}
	o, err := buildOptions(opts, ProducerOption.applyProducer)
	if err != nil {
		return nil, err
	}
	b := newBase(o, o.instanceName)
	b.log = b.log.With(zap.String("producer_group", group))
	ip := localAddr()
	return &Producer{
		b:        b,
		group:    group,
		faults:   newFaultTracker(o.faultIsolation),
		ids:      message.NewUniqueIDGenerator(ip),
		bornHost: netip.AddrPortFrom(ip, 0).String(),
		muxes:    make(map[string]*sendMux),
		asyncSem: make(chan struct{}, o.asyncSendsLimit),
		lanes:    make(map[asyncLaneKey]*asyncLane),
		workers:  workers.New(workerLinger, workerMaxIdle),
	}, nil
}

// ClientID returns the producer's client id.
func (p *Producer) ClientID() string { return p.b.clientID }

// Start starts the route refresher. Routes are fetched on first send.
func (p *Producer) Start(ctx context.Context) error {
	if !p.state.CompareAndSwap(stateNew, stateStarted) {
		if p.state.Load() == stateClosed {
			return ErrClosed
		}
		return ErrAlreadyStarted
	}
	p.b.startRouteRefresher()
	p.b.log.Info("producer started", zap.Strings("name_servers", p.b.opts.nameServers))
	return nil
}

// Close waits for the SendAsync callbacks in flight, then closes the
// streams and connections. Sends still waiting fail.
func (p *Producer) Close() error {
	p.asyncMu.Lock()
	if p.closed {
		p.asyncMu.Unlock()
		return nil
	}
	p.closed = true
	p.asyncMu.Unlock()
	p.asyncWG.Wait()
	p.workers.Close()
	p.state.Store(stateClosed)
	err := p.b.close()
	p.b.log.Info("producer closed")
	return err
}

func (p *Producer) checkState() error {
	switch p.state.Load() {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	return nil
}

// SendOption modifies one send.
type SendOption func(*sendOptions)

type sendOptions struct {
	shardingKey string
	selector    QueueSelector
	queue       *MessageQueue
	delay       *delaySpec // delay.go
}

// ordered reports whether the send must go to the queue it selects, with
// no retry elsewhere.
func (s *sendOptions) ordered() bool {
	return s.shardingKey != "" || s.selector != nil || s.queue != nil
}

// WithShardingKey sends the message to the queue selected by a hash of key
// (see HashQueueSelector), so that messages with the same key stay in
// order. It overrides Message.ShardingKey.
func WithShardingKey(key string) SendOption {
	return func(s *sendOptions) { s.shardingKey = key }
}

// WithQueueSelector sends the message to the queue sel picks among the
// topic's writable queues (sorted by broker name and queue id).
func WithQueueSelector(sel QueueSelector) SendOption {
	return func(s *sendOptions) { s.selector = sel }
}

// WithQueue sends the message to q.
func WithQueue(q MessageQueue) SendOption {
	return func(s *sendOptions) { s.queue = &q }
}

func buildSendOptions(msg *Message, opts []SendOption) *sendOptions {
	s := &sendOptions{}
	if msg != nil {
		s.shardingKey = msg.ShardingKey
	}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s
}

// Send sends one message and returns where it was stored. A retryable
// failure is retried on another broker (WithSendRetries), except for
// ordered sends.
func (p *Producer) Send(ctx context.Context, msg *Message, opts ...SendOption) (*SendResult, error) {
	if err := p.checkState(); err != nil {
		return nil, err
	}
	so := buildSendOptions(msg, opts)
	pm, err := p.toWire(msg, so.shardingKey)
	if err == nil {
		err = so.applyDelay(pm)
	}
	if err != nil {
		return nil, err
	}
	pms := []*pb.Message{pm}
	res, err := p.send(ctx, msg, pms, so)
	p.recycleWireProperties(pms)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// SendBatch sends messages of one topic to one queue in one request. The
// bodies together must not exceed the maximum body size.
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message, opts ...SendOption) ([]*SendResult, error) {
	if err := p.checkState(); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, codeErr(pb.Code_MESSAGE_ILLEGAL, "empty batch")
	}
	so := buildSendOptions(msgs[0], opts)
	total := 0
	wb := newWireBatch(len(msgs))
	defer p.recycleWireBatch(wb)
	born := time.Now().UnixMilli()
	ids := p.ids.NextN(len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, codeErr(pb.Code_MESSAGE_ILLEGAL, "batch message %d is nil", i)
		}
		if m.Topic != msgs[0].Topic {
			return nil, codeErr(pb.Code_MESSAGE_ILLEGAL, "batch mixes topics %q and %q", msgs[0].Topic, m.Topic)
		}
		pm := &wb.slab[i]
		err := p.fillWire(pm, m, so.shardingKey, born, ids[i])
		if err == nil {
			err = so.applyDelay(pm)
		}
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		total += len(m.Body)
		wb.ptrs = append(wb.ptrs, pm)
	}
	if total > p.b.opts.maxBodySize {
		return nil, codeErr(pb.Code_MESSAGE_TOO_LARGE, "batch bodies total %d bytes, at most %d", total, p.b.opts.maxBodySize)
	}
	return p.send(ctx, msgs[0], wb.ptrs, so)
}

// SendAsync sends one message in the background and calls callback exactly
// once with the outcome, on another goroutine — except on a closed producer,
// where it is called at once with ErrClosed. It returns at once unless
// WithAsyncSendLimit sends are already in flight. Close waits for the
// callbacks in flight.
//
// Asynchronous sends of one topic that are routed alike (the round robin,
// one WithQueue queue or one sharding key) are sent one request at a time,
// in the order SendAsync took them: a send that finds no request of its
// own kind in flight goes at once, the ones that arrive meanwhile go
// together as one batch request when it returns (WithAsyncBatch bounds
// it). Sends with a QueueSelector, to a retry topic, or of transactional
// half messages each go in a request of their own.
func (p *Producer) SendAsync(ctx context.Context, msg *Message, callback func(*SendResult, error), opts ...SendOption) {
	if callback == nil {
		callback = func(*SendResult, error) {}
	}
	p.asyncMu.RLock()
	if p.closed {
		p.asyncMu.RUnlock()
		p.safeCallback(callback, nil, ErrClosed)
		return
	}
	p.asyncWG.Add(1)
	p.asyncMu.RUnlock()

	select {
	case p.asyncSem <- struct{}{}:
	case <-ctx.Done():
		err := ctx.Err()
		go func() {
			defer p.asyncWG.Done()
			p.safeCallback(callback, nil, err)
		}()
		return
	}
	if err := p.checkState(); err != nil {
		p.workers.Go(func() { p.finishAsync(callback, nil, err) })
		return
	}
	so := buildSendOptions(msg, opts)
	pm, err := p.toWire(msg, so.shardingKey)
	if err == nil {
		err = so.applyDelay(pm)
	}
	if err != nil {
		p.workers.Go(func() { p.finishAsync(callback, nil, err) })
		return
	}
	key, ok := laneKeyOf(msg, pm, so)
	if !ok || p.b.opts.asyncBatchMsgs == 1 {
		p.workers.Go(func() {
			res, err := p.send(ctx, msg, []*pb.Message{pm}, so)
			if err != nil {
				p.finishAsync(callback, nil, err)
				return
			}
			p.finishAsync(callback, res[0], nil)
		})
		return
	}
	p.enqueueAsync(key, so, &asyncItem{ctx: ctx, msg: msg, pm: pm, cb: callback, size: itemSize(pm)})
}

func (p *Producer) safeCallback(cb func(*SendResult, error), res *SendResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.b.log.Error("SendAsync callback panicked", zap.Any("panic", r))
		}
	}()
	cb(res, err)
}

// SendOneway writes one message to a broker without waiting for the
// outcome and without retry.
func (p *Producer) SendOneway(ctx context.Context, msg *Message, opts ...SendOption) error {
	if err := p.checkState(); err != nil {
		return err
	}
	so := buildSendOptions(msg, opts)
	pm, err := p.toWire(msg, so.shardingKey)
	if err == nil {
		err = so.applyDelay(pm)
	}
	if err != nil {
		return err
	}
	ri, err := p.b.routes.get(ctx, msg.Topic)
	if err != nil {
		return err
	}
	q, err := p.selectQueue(ri, msg, so, "")
	if err != nil {
		return err
	}
	addr := ri.brokers[q.BrokerName].MasterAddr()
	if addr == "" {
		return codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", q.BrokerName)
	}
	pm.QueueId = q.QueueID
	m, err := p.mux(addr)
	if err == nil {
		_, err = m.do(ctx, 0, &pb.SendRequest{ProducerGroup: p.group, Messages: []*pb.Message{pm}}, true)
	}
	if err != nil {
		p.b.routes.markStale(msg.Topic)
		return fmt.Errorf("send oneway to %s (%s): %w", q, addr, err)
	}
	return nil
}

// toWire validates a message and converts it, with a new unique id.
func (p *Producer) toWire(m *Message, shardingKey string) (*pb.Message, error) {
	pm := new(pb.Message)
	if err := p.fillWire(pm, m, shardingKey, time.Now().UnixMilli(), p.ids.Next()); err != nil {
		return nil, err
	}
	return pm, nil
}

// fillWire is toWire into pm, of a message born at bornMs (Unix
// milliseconds) whose unique id, unless it has its own, is uniqueID (the
// producer's next).
func (p *Producer) fillWire(pm *pb.Message, m *Message, shardingKey string, bornMs int64, uniqueID string) error {
	if m == nil {
		return codeErr(pb.Code_MESSAGE_ILLEGAL, "nil message")
	}
	if err := message.ValidateTopic(m.Topic); err != nil {
		return codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if len(m.Body) == 0 {
		return codeErr(pb.Code_MESSAGE_ILLEGAL, "message body is empty")
	}
	if len(m.Body) > p.b.opts.maxBodySize {
		return codeErr(pb.Code_MESSAGE_TOO_LARGE, "message body is %d bytes, at most %d", len(m.Body), p.b.opts.maxBodySize)
	}
	for _, k := range m.Keys {
		if k == "" || strings.Contains(k, message.KeySeparator) {
			return codeErr(pb.Code_MESSAGE_ILLEGAL, "message key %q is empty or contains a space", k)
		}
	}
	n, err := wirePropertiesLen(m, shardingKey, uniqueID)
	if err != nil {
		return codeErr(pb.Code_MESSAGE_ILLEGAL, "%v", err)
	}
	if n > message.MaxPropertiesSize-32 {
		return codeErr(pb.Code_PROPERTIES_TOO_LARGE, "properties take %d bytes, at most %d", n, message.MaxPropertiesSize-32)
	}
	props := wireProperties(m, shardingKey, uniqueID)
	pm.Topic, pm.Body, pm.Properties = m.Topic, m.Body, props
	pm.BornTimestamp, pm.BornHost = bornMs, p.bornHost
	return nil
}

// selectQueue picks the queue of one attempt. avoid is the broker the
// previous attempt failed on.
func (p *Producer) selectQueue(ri *routeInfo, msg *Message, so *sendOptions, avoid string) (MessageQueue, error) {
	switch {
	case so.queue != nil:
		q := *so.queue
		q.Topic = msg.Topic
		return q, nil
	case so.selector != nil || so.shardingKey != "":
		if len(ri.ordered) == 0 {
			return MessageQueue{}, ri.noWritableQueue()
		}
		sel := so.selector
		m := msg
		if sel == nil {
			sel = HashQueueSelector
			if msg.ShardingKey != so.shardingKey {
				cp := *msg
				cp.ShardingKey = so.shardingKey
				m = &cp
			}
		}
		return sel(append([]MessageQueue(nil), ri.ordered...), m), nil
	}
	if len(ri.publish) == 0 {
		return MessageQueue{}, ri.noWritableQueue()
	}
	var avail func(string) bool
	if p.b.opts.faultTolerance {
		avail = p.faults.available
	}
	return pickQueue(ri.publish, p.nextPosition(msg.Topic), avoid, avail), nil
}

// nextPosition takes topic's next round-robin position.
func (p *Producer) nextPosition(topic string) uint64 {
	c, ok := p.rr.Load(topic)
	if !ok {
		c, _ = p.rr.LoadOrStore(topic, new(atomic.Uint64))
	}
	return c.(*atomic.Uint64).Add(1) - 1
}

// send runs the attempts of one send (one attempt for ordered sends). A
// failed attempt marks the topic's route stale, so the next one fetches it
// afresh from the NameServers: a send that met a failover (the master
// unreachable, no longer the master, too few in-sync replicas, or no
// master at all) goes to the group's new master as soon as the NameServers
// name it, without waiting for the periodic route refresh.
func (p *Producer) send(ctx context.Context, msg *Message, pms []*pb.Message, so *sendOptions) ([]*SendResult, error) {
	attempts := 1 + p.b.opts.sendRetries
	if so.ordered() {
		attempts = 1
	}
	var lastErr error
	avoid, failedAddr := "", ""
	for i := 0; i < attempts; i++ {
		if i > 0 && failoverError(lastErr) {
			p.awaitFailover(ctx, msg.Topic, avoid, failedAddr, i)
		}
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("send to topic %q: %w (after %w)", msg.Topic, err, lastErr)
			}
			return nil, err
		}
		ri, err := p.b.routes.get(ctx, msg.Topic)
		if err != nil {
			if errors.Is(err, ErrBrokerUnreachable) && ctx.Err() == nil {
				lastErr = err // no broker registered yet: try again
				continue
			}
			if lastErr != nil {
				return nil, fmt.Errorf("%w (after %w)", err, lastErr)
			}
			return nil, err
		}
		q, err := p.selectQueue(ri, msg, so, avoid)
		if err != nil {
			if !errors.Is(err, errNoMaster) {
				return nil, err
			}
			// The group is between masters: the next send or attempt asks
			// the NameServers again.
			p.b.routes.markStale(msg.Topic)
			if i+1 == attempts {
				return nil, err
			}
			lastErr = err
			continue
		}
		addr := ri.brokers[q.BrokerName].MasterAddr()
		res, err := p.sendToQueue(ctx, ri, q, pms)
		if err == nil {
			return res, nil
		}
		lastErr = fmt.Errorf("send to %s: %w", q, err)
		if ctx.Err() != nil || !retryableSend(err) {
			return nil, lastErr
		}
		p.b.routes.markStale(msg.Topic)
		avoid, failedAddr = q.BrokerName, addr
		if i+1 < attempts {
			p.b.log.Debug("send failed, retrying", zap.Stringer("queue", q), zap.Error(err))
		}
	}
	return nil, lastErr
}

// awaitFailover runs before attempt i (≥ 1) of a send whose last attempt
// met a failover on broker group avoid, whose master was failedAddr. It
// fetches the route now: when it names a new master for the group, or
// another group to try, the attempt goes at once; otherwise the group is
// given a moment (a restart, an election: unreachableBackoff) and the route
// is fetched again for the attempt.
func (p *Producer) awaitFailover(ctx context.Context, topic, avoid, failedAddr string, i int) {
	if ri, err := p.b.routes.get(ctx, topic); err == nil {
		if m := ri.brokers[avoid].MasterAddr(); m != "" && m != failedAddr || otherBroker(ri, avoid) {
			return
		}
	}
	sleepCtx(ctx, unreachableBackoff(i))
	p.b.routes.markStale(topic)
}

// unreachableBackoff is the pause before attempt i (≥ 1) when the brokers
// to try are unreachable or failing over: 200 ms, 400 ms, 800 ms, then 1 s.
func unreachableBackoff(i int) time.Duration {
	return min(200*time.Millisecond<<(i-1), time.Second)
}

// otherBroker reports whether route ri has a writable queue on a broker
// group other than avoid.
func otherBroker(ri *routeInfo, avoid string) bool {
	for _, q := range ri.publish {
		if q.BrokerName != avoid {
			return true
		}
	}
	return false
}

// sendToQueue makes one attempt.
func (p *Producer) sendToQueue(ctx context.Context, ri *routeInfo, q MessageQueue, pms []*pb.Message) ([]*SendResult, error) {
	addr := ri.brokers[q.BrokerName].MasterAddr()
	if addr == "" {
		if p.b.opts.faultTolerance {
			p.faults.update(q.BrokerName, 0, true)
		}
		return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", q.BrokerName)
	}
	for _, pm := range pms {
		pm.QueueId = q.QueueID
	}
	m, err := p.mux(addr)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := m.do(ctx, p.b.opts.sendTimeout, &pb.SendRequest{ProducerGroup: p.group, Messages: pms}, false)
	defer putSendResponse(resp)
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err == nil && len(resp.GetResults()) != len(pms) {
		err = codeErr(pb.Code_SYSTEM_ERROR, "broker %s answered %d results for %d messages", addr, len(resp.GetResults()), len(pms))
	}
	if wire.CodeOf(err) == pb.Code_NO_PERMISSION && isCoded(err) && ctx.Err() == nil && p.brokerNotWritable(ctx, addr) {
		err = &notWritableError{broker: q.BrokerName, err: err}
	}
	if p.b.opts.faultTolerance && ctx.Err() == nil {
		p.faults.update(q.BrokerName, time.Since(start), err != nil && retryableSend(err))
	}
	if err != nil {
		if err := brokerFailure(ctx, addr, err); errors.Is(err, ErrBrokerUnreachable) {
			return nil, err
		}
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	brokerName := resp.GetBrokerName()
	if brokerName == "" {
		brokerName = q.BrokerName
	}
	out := make([]*SendResult, len(pms))
	slab := make([]SendResult, len(pms))
	for i, r := range resp.GetResults() {
		// On the wire msg_id is the offset message id, unique_id UNIQ_KEY.
		uid := r.GetUniqueId()
		if uid == "" {
			uid = pms[i].GetProperties()[message.PropertyUniqueKey]
		}
		slab[i] = SendResult{
			MsgID: uid, OffsetMsgID: r.GetMsgId(), BrokerName: brokerName,
			QueueID: r.GetQueueId(), QueueOffset: r.GetQueueOffset(), CommitLogOffset: r.GetCommitLogOffset(),
		}
		out[i] = &slab[i]
	}
	return out, nil
}

// brokerNotWritable asks the broker at addr, after it refused a send
// NO_PERMISSION, whether its own write permission is taken away: the
// broker's word (its brokerPermission in GetBrokerRuntime, a read any
// known user may make), not the refusal's text, tells a draining broker
// from a refusal of the caller's permissions. Any failure to ask counts as
// no (the refusal stands).
func (p *Producer) brokerNotWritable(ctx context.Context, addr string) bool {
	c, err := p.b.broker(addr)
	if err != nil {
		return false
	}
	actx, cancel := withTimeout(ctx, p.b.opts.sendTimeout)
	defer cancel()
	resp, err := c.GetBrokerRuntime(actx, &pb.GetBrokerRuntimeRequest{})
	if err != nil || fromStatus(resp.GetStatus()) != nil {
		return false
	}
	return Perm(resp.GetBrokerPermission())&PermWrite == 0
}

// mux returns the send multiplexer of a broker address.
func (p *Producer) mux(addr string) (*sendMux, error) {
	p.muxMu.Lock()
	defer p.muxMu.Unlock()
	if m := p.muxes[addr]; m != nil {
		return m, nil
	}
	c, err := p.b.broker(addr)
	if err != nil {
		return nil, err
	}
	m := &sendMux{addr: addr, client: c, parent: p.b.ctx, goRun: p.b.goRun, log: p.b.log}
	p.muxes[addr] = m
	return m, nil
}

// maxRecycledProperties is the most properties a recycled map held: a map
// that grew for a message with many keeps its room, which the next
// messages (most have a few) would not use.
const maxRecycledProperties = 8

// sentProperties holds the property maps of sent messages, cleared, for
// wireProperties. A batched producer would otherwise make one map a
// message, about 300 bytes, and collect it again a moment later.
var sentProperties sync.Pool

// wireBatch holds the wire messages of a SendBatch. A batch's wire
// messages take about 140 bytes each (pb.Message); once its send is over
// they are cleared and kept for the next batch (recycleWireBatch), on the
// same terms as the property maps.
type wireBatch struct {
	slab []pb.Message
	ptrs []*pb.Message // into slab, in order
}

// maxRecycledBatch is the largest batch whose wire messages are kept.
const maxRecycledBatch = 1024

// wireBatches holds cleared wireBatches for newWireBatch.
var wireBatches sync.Pool

// newWireBatch returns a wireBatch of n zero messages and no pointers.
func newWireBatch(n int) *wireBatch {
	if wb, _ := wireBatches.Get().(*wireBatch); wb != nil {
		if cap(wb.slab) >= n {
			wb.slab, wb.ptrs = wb.slab[:n], wb.ptrs[:0]
			return wb
		}
		wireBatches.Put(wb) // for a smaller batch
	}
	return &wireBatch{slab: make([]pb.Message, n), ptrs: make([]*pb.Message, 0, n)}
}

// recycleWireBatch recycles the property maps of a batch whose send is
// over (recycleWireProperties) and, on the same terms, the batch itself,
// cleared so that it holds on to no message body.
func (p *Producer) recycleWireBatch(wb *wireBatch) {
	p.recycleWireProperties(wb.ptrs)
	if !p.b.frames.framesOnly() || cap(wb.slab) > maxRecycledBatch {
		return
	}
	clear(wb.slab) // ptrs point into slab: nothing more to let go
	wireBatches.Put(wb)
}

// recycleWireProperties gives the property maps of messages whose send is
// over (every attempt has returned) back to wireProperties, and takes them
// from pms. Only when every request may have gone over the frame
// transport: its client encodes a request before the call returns, while
// gRPC's streams may read a message after sending it (their stats
// handlers), so maps that may have gone over gRPC are left to the
// collector.
func (p *Producer) recycleWireProperties(pms []*pb.Message) {
	if !p.b.frames.framesOnly() {
		return
	}
	for _, pm := range pms {
		if props := pm.Properties; props != nil && len(props) <= maxRecycledProperties {
			clear(props)
			sentProperties.Put(props)
		}
		pm.Properties = nil
	}
}
