package grpcv5

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/message"
)

// endTimeout bounds an EndTransaction's work once its caller is gone.
const endTimeout = 10 * time.Second

// EndTransaction commits or rolls back a half message: after the
// producer's local transaction, or when it answers a check-back
// (RecoverOrphanedTransactionCommand). The transaction id is the one the
// send answered (or the check-back named): the offset message id of the
// half message, which locates it; an empty or unknown one is
// INVALID_TRANSACTION_ID. The message id must be the half message's
// (BAD_REQUEST otherwise) and the topic its real topic. source is not
// required (the Go client never sets it); a resolution other than COMMIT or
// ROLLBACK leaves the transaction to the check-backs. A repeated end with
// the same outcome is OK; the other outcome after an end is BAD_REQUEST.
func (s *Service) EndTransaction(ctx context.Context, req *v2.EndTransactionRequest) (*v2.EndTransactionResponse, error) {
	m := readMeta(ctx)
	err := s.endTransaction(ctx, m, req)
	if err != nil {
		s.log.Debug("end transaction refused", zap.String("client", m.clientID), zap.String("transactionId", req.GetTransactionId()),
			zap.String("messageId", req.GetMessageId()), zap.Stringer("resolution", req.GetResolution()), zap.Error(err))
	}
	return &v2.EndTransactionResponse{Status: statusOf(err)}, nil
}

func (s *Service) endTransaction(ctx context.Context, m callMeta, req *v2.EndTransactionRequest) error {
	t, err := m.topicName(req.GetTopic())
	if err != nil {
		return err
	}
	id := strings.TrimSpace(req.GetTransactionId())
	if id == "" {
		return errorf(v2.Code_INVALID_TRANSACTION_ID, "transaction id is empty")
	}
	_, off, err := message.ParseOffsetMsgID(id)
	if err != nil {
		return errorf(v2.Code_INVALID_TRANSACTION_ID, "transaction id %q is not one this broker gave: %v", id, err)
	}
	half, err := s.b.Store().ReadMessage(off)
	if err != nil || half.Topic != message.TransHalfTopic {
		return errorf(v2.Code_INVALID_TRANSACTION_ID, "transaction id %q names no half message on broker %s", id, s.limits.brokerName)
	}
	er := txn.EndRequest{
		ProducerGroup:   half.Properties[message.PropertyProducerGroup],
		Topic:           t,
		CommitLogOffset: off,
		HalfQueueOffset: half.QueueOffset,
		MsgID:           req.GetMessageId(),
		FromCheck:       req.GetSource() == v2.TransactionSource_SOURCE_SERVER_CHECK,
	}
	switch req.GetResolution() {
	case v2.TransactionResolution_COMMIT:
		er.State = txn.StateCommit
	case v2.TransactionResolution_ROLLBACK:
		er.State = txn.StateRollback
	default:
		er.State = txn.StateUnknown
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	_, err = s.b.Transactions().End(ctx, er)
	return err
}
