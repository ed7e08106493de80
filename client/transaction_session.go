package client

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// txnSession is a transaction producer's Connect stream to one master: it
// registers the producer group with heartbeats and receives checks.
type txnSession struct {
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{} // closed after the first heartbeat is written
}

// sessionLoop keeps the sessions in line with the masters the NameServers
// know.
func (p *TransactionProducer) sessionLoop() {
	t := time.NewTicker(p.b.opts.routeRefresh)
	defer t.Stop()
	for {
		select {
		case <-p.b.ctx.Done():
			p.closeSessions()
			return
		case <-t.C:
			p.syncSessions(p.b.ctx)
		}
	}
}

// masters returns the master addresses the NameServers know, plus those
// of the routes this producer has used; nil when nothing could be learnt.
func (p *TransactionProducer) masters(ctx context.Context) map[string]bool {
	want := make(map[string]bool)
	rctx, cancel := p.b.rpcContext(ctx)
	defer cancel()
	err := p.b.ns.call(rctx, func(ctx context.Context, c pb.NameServerClient) error {
		resp, err := c.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		if err := fromStatus(resp.GetStatus()); err != nil {
			return err
		}
		for _, bd := range resp.GetBrokers() {
			if a := bd.GetBrokerAddrs()[0]; a != "" {
				want[a] = true
			}
		}
		return nil
	})
	if err != nil {
		p.b.log.Debug("cluster info for transaction checks", zap.Error(err))
		return nil
	}
	return want
}

// syncSessions opens a session to every master and closes the others.
func (p *TransactionProducer) syncSessions(ctx context.Context) {
	want := p.masters(ctx)
	if want == nil {
		return // keep what we have
	}
	var stale []*txnSession
	p.sessMu.Lock()
	if p.b.ctx.Err() != nil {
		p.sessMu.Unlock()
		return
	}
	for addr, s := range p.sessions {
		if !want[addr] {
			stale = append(stale, s)
			delete(p.sessions, addr)
		}
	}
	for addr := range want {
		p.openSessionLocked(addr)
	}
	p.sessMu.Unlock()
	for _, s := range stale {
		s.cancel()
		<-s.done
	}
}

// openSessionLocked opens a session to addr unless there is one; sessMu
// is held.
func (p *TransactionProducer) openSessionLocked(addr string) {
	if p.sessions[addr] != nil || p.b.ctx.Err() != nil {
		return
	}
	sctx, cancel := context.WithCancel(p.b.ctx)
	s := &txnSession{addr: addr, cancel: cancel, done: make(chan struct{}), first: make(chan struct{})}
	p.sessions[addr] = s
	if !p.b.goRun(func() { p.runSession(sctx, s) }) {
		cancel()
		close(s.done)
	}
}

// ensureSession opens a session to the master that stored a half message
// if there is none yet (a broker that registered after the last sync),
// so that its checks find this producer.
func (p *TransactionProducer) ensureSession(brokerName string) {
	bd, ok := p.b.routes.broker(brokerName)
	if !ok || bd.MasterAddr() == "" {
		return
	}
	p.sessMu.Lock()
	p.openSessionLocked(bd.MasterAddr())
	p.sessMu.Unlock()
}

func (p *TransactionProducer) waitFirstHeartbeats(ctx context.Context) {
	p.sessMu.Lock()
	var firsts []chan struct{}
	for _, s := range p.sessions {
		firsts = append(firsts, s.first)
	}
	p.sessMu.Unlock()
	wctx, cancel := p.b.rpcContext(ctx)
	defer cancel()
	for _, f := range firsts {
		select {
		case <-f:
		case <-wctx.Done():
			return
		}
	}
}

func (p *TransactionProducer) closeSessions() {
	p.sessMu.Lock()
	sessions := p.sessions
	p.sessions = make(map[string]*txnSession)
	p.sessMu.Unlock()
	for _, s := range sessions {
		s.cancel()
	}
	for _, s := range sessions {
		<-s.done
	}
}

func (p *TransactionProducer) runSession(ctx context.Context, s *txnSession) {
	defer close(s.done)
	backoff := 100 * time.Millisecond
	first := false
	for {
		connected, err := p.connectOnce(ctx, s, &first)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 100 * time.Millisecond
		}
		p.b.log.Debug("transaction session ended", zap.String("broker", s.addr), zap.Error(err))
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (p *TransactionProducer) heartbeat() *pb.ClientMessage {
	return &pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{
		ClientId: p.b.clientID, ProducerGroups: []string{p.group},
	}}}
}

// connectOnce runs one Connect stream until it breaks; it reports whether
// the first heartbeat got through.
func (p *TransactionProducer) connectOnce(ctx context.Context, s *txnSession, first *bool) (bool, error) {
	cli, err := p.b.broker(s.addr)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cli.Connect(sctx)
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", s.addr, err)
	}
	if err := stream.Send(p.heartbeat()); err != nil {
		return false, fmt.Errorf("heartbeat to %s: %w", s.addr, err)
	}
	if !*first {
		*first = true
		close(s.first)
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if c := m.GetCheckTransaction(); c != nil {
				p.onCheck(sctx, s.addr, c)
			}
		}
	}()
	defer func() {
		cancel()
		<-recvErr
	}()
	tick := time.NewTicker(p.b.opts.heartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-sctx.Done():
			return true, sctx.Err()
		case err := <-recvErr:
			recvErr <- err // for the deferred wait
			return true, fmt.Errorf("session with %s: %w", s.addr, err)
		case <-tick.C:
		}
		if err := stream.Send(p.heartbeat()); err != nil {
			return true, fmt.Errorf("heartbeat to %s: %w", s.addr, err)
		}
	}
}

// onCheck answers a check on a goroutine of its own, at most
// maxConcurrentChecks at a time (beyond that the stream is not read until
// one finishes). A check of a transaction already being answered is
// dropped: the broker asks again later if need be.
func (p *TransactionProducer) onCheck(ctx context.Context, addr string, c *pb.TransactionCheck) {
	if c.GetProducerGroup() != "" && c.GetProducerGroup() != p.group {
		return
	}
	if _, busy := p.inCheck.LoadOrStore(c.GetTransactionId(), struct{}{}); busy {
		return
	}
	select {
	case p.checks <- struct{}{}:
	case <-ctx.Done():
		p.inCheck.Delete(c.GetTransactionId())
		return
	}
	if !p.b.goRun(func() {
		defer func() {
			<-p.checks
			p.inCheck.Delete(c.GetTransactionId())
		}()
		p.answer(addr, c)
	}) {
		<-p.checks
		p.inCheck.Delete(c.GetTransactionId())
	}
}

// answer asks the listener and sends its answer to the broker at addr.
func (p *TransactionProducer) answer(addr string, c *pb.TransactionCheck) {
	ctx := p.b.ctx
	log := p.b.log.With(zap.String("broker", addr), zap.String("transaction_id", c.GetTransactionId()))
	var st LocalTransactionState
	if p.strayCopy(c.GetTransactionId(), c.GetBrokerName()) {
		// Stored here by an attempt that failed for this producer, which
		// then stored it on another broker: this copy is not the one.
		st = RollbackMessage
		log.Info("rolling back a stray copy of a half message", zap.String("check_broker", c.GetBrokerName()))
	} else {
		e, err := message.Decode(c.GetRecord())
		if err != nil {
			log.Warn("undecodable check record", zap.Error(err))
			return
		}
		m := extFromDecoded(e, c.GetBrokerName())
		m.Topic, m.QueueID = c.GetTopic(), c.GetQueueId()
		if m.uniqKey() == "" && c.GetMsgId() != "" {
			m.MsgID = c.GetMsgId() // the check's msg_id is the unique id
		}
		st = p.check(ctx, m)
	}
	req := &pb.EndTransactionRequest{
		ProducerGroup: p.group, Topic: c.GetTopic(), CommitLogOffset: c.GetCommitLogOffset(),
		TranStateTableOffset: c.GetTranStateTableOffset(), MsgId: c.GetMsgId(), TransactionId: c.GetTransactionId(),
		State: st.proto(), FromCheck: true,
	}
	if _, err := p.end(ctx, addr, req); err != nil && ctx.Err() == nil {
		log.Warn("answer transaction check", zap.Stringer("state", st), zap.Error(err))
		return
	}
	log.Debug("answered transaction check", zap.Stringer("state", st), zap.Int32("check_times", c.GetCheckTimes()))
}
