package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// LocalTransactionState is a producer's answer about its local
// transaction.
type LocalTransactionState int

const (
	// Unknown: not decided yet. Nothing is sent to the broker, which
	// checks back later (CheckLocalTransaction).
	Unknown LocalTransactionState = iota
	// CommitMessage: the local transaction committed; the message is
	// delivered to consumers.
	CommitMessage
	// RollbackMessage: the local transaction rolled back; the message is
	// never delivered.
	RollbackMessage
)

// String names the state.
func (s LocalTransactionState) String() string {
	switch s {
	case CommitMessage:
		return "commit"
	case RollbackMessage:
		return "rollback"
	}
	return "unknown"
}

func (s LocalTransactionState) proto() pb.TransactionState {
	switch s {
	case CommitMessage:
		return pb.TransactionState_TRANSACTION_STATE_COMMIT
	case RollbackMessage:
		return pb.TransactionState_TRANSACTION_STATE_ROLLBACK
	}
	return pb.TransactionState_TRANSACTION_STATE_UNKNOWN
}

// PropertyTransactionID is the property holding a transaction's id (the
// message's unique id) in the messages given to a TransactionListener.
const PropertyTransactionID = message.PropertyTransactionID

// TransactionListener runs and checks a producer's local transactions.
type TransactionListener interface {
	// ExecuteLocalTransaction runs the local transaction of a half message
	// the broker has stored. msg is a copy of the sent message whose
	// property PropertyTransactionID holds the transaction id; arg is
	// SendInTransaction's. A panic counts as Unknown.
	ExecuteLocalTransaction(ctx context.Context, msg *Message, arg any) LocalTransactionState
	// CheckLocalTransaction answers a broker's check of a half message
	// whose outcome it does not know (Unknown, or the producer died before
	// telling it). msg.MsgID is the transaction id; msg.Topic and
	// msg.QueueID are the real ones. It may run on any producer of the
	// group, concurrently with other checks. A panic counts as Unknown.
	CheckLocalTransaction(ctx context.Context, msg *MessageExt) LocalTransactionState
}

// Transaction errors.
var (
	// ErrTransactionConflict: an end contradicts how the transaction
	// already ended (committed, rolled back, or discarded after the
	// maximum number of checks).
	ErrTransactionConflict = wire.Errorf(pb.Code_TRANSACTION_STATE_CONFLICT, "")
	// ErrTransactionNotFound: the broker holds no such half message.
	ErrTransactionNotFound = wire.Errorf(pb.Code_TRANSACTION_NOT_FOUND, "")
)

// TransactionSendResult is the outcome of SendInTransaction.
type TransactionSendResult struct {
	// SendResult is where the half message was stored: MsgID is the
	// message's unique id (kept by the committed message), OffsetMsgID,
	// QueueOffset and CommitLogOffset are the half message's; QueueID is
	// the real queue the message goes to on commit.
	SendResult
	// TransactionID is the transaction id (the message's unique id, MsgID).
	TransactionID string
	// State is what ExecuteLocalTransaction returned.
	State LocalTransactionState
	// Committed is where the real message was stored when State is
	// CommitMessage and the broker wrote it (nil if the commit was a
	// repeat or failed).
	Committed *SendResult
	// EndErr is the failure to tell the broker the outcome. The
	// transaction is not lost: the broker checks back later.
	EndErr error
}

// TransactionProducer sends transactional messages: a half message,
// invisible to consumers, then the outcome of a local transaction. It
// keeps a Connect stream to every master broker, announcing its producer
// group, and answers their checks with CheckLocalTransaction. It is also a
// Producer (Send, SendAsync, ...). It is safe for concurrent use.
type TransactionProducer struct {
	*Producer
	listener TransactionListener

	sessions *brokerSessions
	checks   chan struct{} // bounds concurrent check answers
	inCheck  sync.Map      // transaction id → struct{}: being answered

	// retried remembers the transactions whose half message was stored
	// after a send to another broker had failed: that broker may hold a
	// stray copy, which its checks roll back. retriedMu is never held
	// with the embedded Producer's locks or the sessions' lock.
	retriedMu sync.Mutex
	retried   map[string]retriedHalf
	retriedQ  []retriedKey
}

type retriedHalf struct {
	broker string
	at     time.Time
}

type retriedKey struct {
	id string
	at time.Time
}

const (
	// maxConcurrentChecks bounds the check answers in progress; beyond it
	// the stream is not read, and the broker retries later.
	maxConcurrentChecks = 32
	retriedTTL          = time.Hour
	retriedMax          = 100_000
)

// NewTransactionProducer returns a transaction producer of group whose
// local transactions listener runs and checks. Nothing is contacted until
// Start.
func NewTransactionProducer(group string, listener TransactionListener, opts ...ProducerOption) (*TransactionProducer, error) {
	if listener == nil {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "transaction producer needs a listener")
	}
	p, err := NewProducer(group, opts...)
	if err != nil {
		return nil, err
	}
	tp := &TransactionProducer{
		Producer: p, listener: listener,
		checks: make(chan struct{}, maxConcurrentChecks), retried: make(map[string]retriedHalf),
	}
	tp.sessions = newBrokerSessions(p.b, "transaction session", tp.heartbeat, tp.onBrokerMessage)
	return tp, nil
}

// Start starts the producer and opens a Connect stream to every master
// broker the NameServers know (and keeps that set up to date), waiting
// briefly for the first heartbeats so that checks can reach it at once.
func (p *TransactionProducer) Start(ctx context.Context) error {
	if err := p.Producer.Start(ctx); err != nil {
		return err
	}
	p.syncSessions(ctx)
	p.sessions.waitFirstHeartbeats(ctx)
	p.b.goRun(p.sessionLoop)
	return nil
}

// Close closes the Connect streams (waiting for check answers in
// progress), then the producer.
func (p *TransactionProducer) Close() error {
	return p.Producer.Close()
}

// SendInTransaction sends msg as a half message, runs the listener's
// ExecuteLocalTransaction with arg, then tells the broker to commit or
// roll back (nothing for Unknown: the broker checks back). The error is
// about the half message: when it is not nil, the local transaction did
// not run. A failure to tell the outcome is in the result's EndErr.
func (p *TransactionProducer) SendInTransaction(ctx context.Context, msg *Message, arg any) (*TransactionSendResult, error) {
	if err := p.checkState(); err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, codeErr(pb.Code_MESSAGE_ILLEGAL, "nil message")
	}
	for _, k := range []string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS,
		message.PropertyTimerDelaySec, message.PropertyTimerDelayMS} {
		if v := msg.Properties[k]; v != "" && v != "0" {
			return nil, codeErr(pb.Code_MESSAGE_ILLEGAL, "a transactional message cannot be delayed (property %s)", k)
		}
	}
	so := buildSendOptions(msg, nil)
	pm, err := p.toWire(msg, so.shardingKey)
	if err != nil {
		return nil, err
	}
	pm.Properties[message.PropertyTransactionPrepared] = "true"
	pm.Properties[message.PropertyProducerGroup] = p.group
	pm.SysFlag = message.SysFlagTransPrepared
	id := pm.Properties[message.PropertyUniqueKey]
	half, q, err := p.sendHalf(ctx, msg, pm, so)
	if err != nil {
		return nil, err
	}
	p.ensureSession(half.BrokerName)
	res := &TransactionSendResult{SendResult: *half, TransactionID: id}
	res.QueueID = q.QueueID

	local := *msg
	local.Properties = make(map[string]string, len(msg.Properties)+1)
	for k, v := range msg.Properties {
		local.Properties[k] = v
	}
	local.Properties[PropertyTransactionID] = id
	res.State = p.execute(ctx, &local, arg)
	if res.State == Unknown {
		return res, nil
	}
	res.Committed, res.EndErr = p.endTransaction(ctx, half, msg.Topic, id, res.State)
	return res, nil
}

// execute runs ExecuteLocalTransaction; a panic is Unknown.
func (p *TransactionProducer) execute(ctx context.Context, msg *Message, arg any) (st LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			p.b.log.Error("ExecuteLocalTransaction panicked; the broker will check back", zap.Any("panic", r))
			st = Unknown
		}
	}()
	return p.listener.ExecuteLocalTransaction(ctx, msg, arg)
}

// check runs CheckLocalTransaction; a panic is Unknown.
func (p *TransactionProducer) check(ctx context.Context, msg *MessageExt) (st LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			p.b.log.Error("CheckLocalTransaction panicked", zap.Any("panic", r))
			st = Unknown
		}
	}()
	return p.listener.CheckLocalTransaction(ctx, msg)
}

// sendHalf sends the half message like Producer.send (retrying another
// broker on retryable failures), remembering a transaction whose half
// message was stored after a failed attempt on another broker.
func (p *TransactionProducer) sendHalf(ctx context.Context, msg *Message, pm *pb.Message, so *sendOptions) (*SendResult, MessageQueue, error) {
	attempts := 1 + p.b.opts.sendRetries
	if so.ordered() {
		attempts = 1
	}
	var lastErr error
	var failedOn []string
	avoid, failedAddr := "", ""
	for i := 0; i < attempts; i++ {
		if i > 0 && failoverError(lastErr) {
			p.awaitFailover(ctx, msg.Topic, avoid, failedAddr, i)
		}
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				return nil, MessageQueue{}, fmt.Errorf("send half message to topic %q: %w (after %w)", msg.Topic, err, lastErr)
			}
			return nil, MessageQueue{}, err
		}
		ri, err := p.b.routes.get(ctx, msg.Topic)
		if err != nil {
			if lastErr != nil {
				return nil, MessageQueue{}, fmt.Errorf("%w (after %w)", err, lastErr)
			}
			return nil, MessageQueue{}, err
		}
		q, err := p.selectQueue(ri, msg, so, avoid)
		if err != nil {
			return nil, MessageQueue{}, err
		}
		addr := ri.brokers[q.BrokerName].MasterAddr()
		res, err := p.sendToQueue(ctx, ri, q, []*pb.Message{pm})
		if err == nil {
			for _, b := range failedOn {
				if b != res[0].BrokerName {
					p.rememberRetried(pm.Properties[message.PropertyUniqueKey], res[0].BrokerName)
					break
				}
			}
			return res[0], q, nil
		}
		lastErr = fmt.Errorf("send half message to %s: %w", q, err)
		if ctx.Err() != nil || !retryableSend(err) {
			return nil, MessageQueue{}, lastErr
		}
		p.b.routes.markStale(msg.Topic)
		avoid, failedAddr = q.BrokerName, addr
		failedOn = append(failedOn, q.BrokerName)
	}
	return nil, MessageQueue{}, lastErr
}

func (p *TransactionProducer) rememberRetried(id, broker string) {
	now := time.Now()
	p.retriedMu.Lock()
	defer p.retriedMu.Unlock()
	for len(p.retriedQ) > 0 && (now.Sub(p.retriedQ[0].at) > retriedTTL || len(p.retriedQ) >= retriedMax) {
		k := p.retriedQ[0]
		if r, ok := p.retried[k.id]; ok && r.at.Equal(k.at) {
			delete(p.retried, k.id)
		}
		p.retriedQ = p.retriedQ[1:]
	}
	p.retried[id] = retriedHalf{broker: broker, at: now}
	p.retriedQ = append(p.retriedQ, retriedKey{id: id, at: now})
}

// strayCopy reports whether a check from broker is about a half message
// this producer knows was stored on another broker.
func (p *TransactionProducer) strayCopy(id, broker string) bool {
	p.retriedMu.Lock()
	defer p.retriedMu.Unlock()
	r, ok := p.retried[id]
	return ok && broker != "" && r.broker != broker
}

// endTransaction tells the broker that stored the half message its
// outcome, retrying transport failures (an end is idempotent).
func (p *TransactionProducer) endTransaction(ctx context.Context, half *SendResult, topic, id string, st LocalTransactionState) (*SendResult, error) {
	bd, ok := p.b.routes.broker(half.BrokerName)
	addr := bd.MasterAddr()
	if !ok || addr == "" {
		return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master to end transaction %s", half.BrokerName, id)
	}
	req := &pb.EndTransactionRequest{
		ProducerGroup: p.group, Topic: topic, CommitLogOffset: half.CommitLogOffset,
		TranStateTableOffset: half.QueueOffset, MsgId: id, TransactionId: id, State: st.proto(),
	}
	resp, err := p.end(ctx, addr, req)
	if err != nil {
		return nil, fmt.Errorf("end transaction %s (%s) on %s: %w", id, st, addr, err)
	}
	if resp.GetMsgId() == "" {
		return nil, nil
	}
	// On the wire msg_id is the committed copy's offset message id.
	return &SendResult{MsgID: id, OffsetMsgID: resp.GetMsgId(), BrokerName: half.BrokerName, QueueID: resp.GetQueueId(),
		QueueOffset: resp.GetQueueOffset(), CommitLogOffset: resp.GetCommitLogOffset()}, nil
}

// end sends one EndTransaction to addr, retrying transport failures.
func (p *TransactionProducer) end(ctx context.Context, addr string, req *pb.EndTransactionRequest) (*pb.EndTransactionResponse, error) {
	cc, err := p.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	cli := pb.NewTransactionClient(cc)
	var lastErr error
	for i := 0; i <= p.b.opts.sendRetries; i++ {
		if i > 0 && !sleepCtx(ctx, time.Duration(i)*100*time.Millisecond) {
			break
		}
		actx, cancel := withTimeout(ctx, p.b.opts.sendTimeout)
		resp, err := cli.EndTransaction(actx, req)
		cancel()
		if err == nil {
			if err = fromStatus(resp.GetStatus()); err == nil {
				return resp, nil
			}
		}
		lastErr = err
		if ctx.Err() != nil || !(isTransport(err) || errors.Is(err, ErrShuttingDown) || errors.Is(err, ErrBusy)) {
			break
		}
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return nil, lastErr
}
