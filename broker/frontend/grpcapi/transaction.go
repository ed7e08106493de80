package grpcapi

import (
	"context"
	"strconv"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// transactionService is the gRPC front end of the transaction service
// (service Transaction in transaction.proto).
type transactionService struct {
	pb.UnimplementedTransactionServer
	b *broker.Broker
}

func (s *transactionService) EndTransaction(ctx context.Context, req *pb.EndTransactionRequest) (*pb.EndTransactionResponse, error) {
	res, err := s.b.Transactions().End(ctx, txn.EndRequest{
		ProducerGroup: req.ProducerGroup, Topic: req.Topic, CommitLogOffset: req.CommitLogOffset,
		HalfQueueOffset: req.TranStateTableOffset, MsgID: req.MsgId, TransactionID: req.TransactionId,
		State: txn.State(req.State), FromCheck: req.FromCheck, // txn.State shares the enum's numbers
	})
	if err != nil {
		return &pb.EndTransactionResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.EndTransactionResponse{Status: wire.OK, Duplicate: res.Duplicate}
	if r := res.Stored; r != nil {
		resp.MsgId, resp.QueueId, resp.QueueOffset, resp.CommitLogOffset = r.MsgID, res.QueueID, r.QueueOffset, r.PhysicalOffset
	}
	return resp, nil
}

func (s *transactionService) ListDiscarded(_ context.Context, req *pb.ListDiscardedRequest) (*pb.ListDiscardedResponse, error) {
	max := int(req.Max)
	if max <= 0 {
		max = 32
	}
	max = min(max, 1024)
	entries, next, minOff, maxOff, err := s.b.Transactions().Discarded(req.Offset, max, req.ProducerGroup, req.Topic)
	if err != nil {
		return &pb.ListDiscardedResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ListDiscardedResponse{Status: wire.OK, NextOffset: next, MinOffset: minOff, MaxOffset: maxOff}
	for _, e := range entries {
		m := e.Msg
		qid, _ := strconv.Atoi(m.Properties[message.PropertyRealQueueID])
		ct, _ := strconv.Atoi(m.Properties[message.PropertyTransactionCheckTimes])
		at, _ := strconv.ParseInt(m.Properties[txn.PropertyDiscardTime], 10, 64)
		if at == 0 {
			at = m.StoreTimestamp
		}
		resp.Transactions = append(resp.Transactions, &pb.DiscardedTransaction{
			QueueOffset: m.QueueOffset, Topic: m.Properties[message.PropertyRealTopic], QueueId: int32(qid),
			ProducerGroup: m.Properties[message.PropertyProducerGroup], TransactionId: txn.ID(m),
			UniqueId: m.UniqueID(), CheckTimes: int32(ct), BornTimestampMs: m.BornTimestamp, DiscardedAtMs: at,
			Tags: m.Tags(), Keys: m.Properties[message.PropertyKeys], BodySize: int32(len(m.Body)), Record: e.Record,
		})
	}
	return resp, nil
}

func (s *transactionService) ListPending(ctx context.Context, req *pb.ListPendingRequest) (*pb.ListPendingResponse, error) {
	max := int(req.Max)
	if max <= 0 {
		max = 100
	}
	max = min(max, 10000)
	list, total, err := s.b.Transactions().Pending(ctx, req.ProducerGroup, req.Topic, max)
	if err != nil {
		return &pb.ListPendingResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ListPendingResponse{Status: wire.OK, Total: int64(total)}
	for _, p := range list {
		resp.Transactions = append(resp.Transactions, &pb.PendingTransaction{
			Topic: p.Topic, QueueId: p.QueueID, ProducerGroup: p.Group, TransactionId: p.ID,
			CommitLogOffset: p.CommitLogOffset, TranStateTableOffset: p.HalfQueueOffset, CheckTimes: p.CheckTimes,
			BornTimestampMs: p.BornMS, NextCheckMs: p.NextCheckMS,
		})
	}
	return resp, nil
}

func (s *transactionService) Stats(context.Context, *pb.TransactionStatsRequest) (*pb.TransactionStatsResponse, error) {
	st := s.b.Transactions().Stats()
	return &pb.TransactionStatsResponse{
		Status: wire.OK, Pending: st.Pending, OldestPendingAgeMs: st.OldestPendingAgeMS,
		HalfMessages: st.HalfMessages, Checks: st.Checks, ChecksSent: st.ChecksSent, ChecksWithoutProducer: st.ChecksNoProd,
		Commits: st.Commits, Rollbacks: st.Rollbacks, Discards: st.Discards,
		DuplicateEnds: st.Duplicates, ConflictingEnds: st.Conflicts, UnknownAnswers: st.UnknownAnswers,
		HalfConsumeOffset: st.HalfConsumeOffset, HalfMaxOffset: st.HalfMaxOffset,
		OpConsumeOffset: st.OpConsumeOffset, OpMaxOffset: st.OpMaxOffset, DiscardedTotal: st.DiscardedTotal,
	}, nil
}

func transactionCheckToProto(c *txn.Check, brokerName string) *pb.TransactionCheck {
	return &pb.TransactionCheck{
		ProducerGroup: c.Group, Topic: c.Topic, QueueId: c.QueueID,
		CommitLogOffset: c.CommitLogOffset, TranStateTableOffset: c.HalfQueueOffset,
		MsgId: c.UniqueID, TransactionId: c.TransactionID, OffsetMsgId: c.OffsetMsgID, CheckTimes: c.CheckTimes,
		BrokerName: brokerName, Record: c.Record,
	}
}
