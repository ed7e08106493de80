package client

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// sessionLoop keeps the sessions in line with the masters the NameServers
// know.
func (p *TransactionProducer) sessionLoop() {
	t := time.NewTicker(p.b.opts.routeRefresh)
	defer t.Stop()
	for {
		select {
		case <-p.b.ctx.Done():
			p.sessions.close()
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
	if want := p.masters(ctx); want != nil { // nil: keep what we have
		p.sessions.sync(want)
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
	p.sessions.ensure(bd.MasterAddr())
}

func (p *TransactionProducer) heartbeat() *pb.ClientMessage {
	return &pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{
		ClientId: p.b.clientID, ProducerGroups: []string{p.group},
	}}}
}

// onBrokerMessage handles what a broker sends on a session: its checks.
func (p *TransactionProducer) onBrokerMessage(ctx context.Context, addr string, m *pb.BrokerMessage) {
	if c := m.GetCheckTransaction(); c != nil {
		p.onCheck(ctx, addr, c)
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
