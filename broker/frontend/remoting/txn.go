package remoting

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// commitOrRollback values of END_TRANSACTION: the transaction type bits of
// a sysflag (RocketMQ's MessageSysFlag.TRANSACTION_*_TYPE).
const (
	txnUnknown  = 0
	txnCommit   = 8
	txnRollback = 12
)

// endTimeout bounds an END_TRANSACTION's work once the connection that
// sent it is gone (a producer sends it oneway and may close at once).
const endTimeout = 10 * time.Second

// endTransaction serves END_TRANSACTION (37): a producer's outcome of a
// half message, after its local transaction or when checked back. The
// half message is found by its CommitLog offset and checked against the
// half queue offset and the producer group, as RocketMQ's broker checks
// it; msgId, transactionId, topic and bname are not compared (the clients
// fill them differently, and bname is "" after a check). Clients send it
// oneway or ignore the answer, which is given anyway.
func (f *Frontend) endTransaction(ctx context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	var er txn.EndRequest
	var err error
	bad := func(e error) *rmq.Command {
		return errorReply(req, errcode.Errorf(errcode.InvalidParameter, "end transaction header: %v", e))
	}
	if er.ProducerGroup, err = req.Required("producerGroup"); err != nil {
		return bad(err)
	}
	if er.CommitLogOffset, err = req.Int64("commitLogOffset"); err != nil {
		return bad(err)
	}
	if er.HalfQueueOffset, err = req.Int64("tranStateTableOffset"); err != nil {
		return bad(err)
	}
	kind, err := req.Int32("commitOrRollback")
	if err != nil {
		return bad(err)
	}
	switch kind {
	case txnCommit:
		er.State = txn.StateCommit
	case txnRollback:
		er.State = txn.StateRollback
	case txnUnknown:
		er.State = txn.StateUnknown
	default:
		return bad(errcode.Errorf(errcode.InvalidParameter, "commitOrRollback %d is none of 0, 8, 12", kind))
	}
	er.FromCheck = req.Bool("fromTransactionCheck")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	if _, err := f.b.Transactions().End(ctx, er); err != nil {
		f.log.Debug("end transaction refused", zap.String("group", er.ProducerGroup), zap.Int64("commitLogOffset", er.CommitLogOffset),
			zap.Int32("commitOrRollback", kind), zap.Bool("fromCheck", er.FromCheck), zap.String("remark", req.Remark), zap.Error(err))
		return errorReply(req, err)
	}
	return req.Reply(rmq.Success, "")
}
