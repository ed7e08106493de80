package grpcapi

import (
	"context"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// POP consumption (pop.proto) over the core's Pop, PopAck, ChangeInvisible
// and PopNack.

// maxAckHandles bounds the receipt handles of one Ack.
const maxAckHandles = 1024

func (s *brokerService) Receive(ctx context.Context, req *pb.ReceiveRequest) (*pb.ReceiveResponse, error) {
	msgs, err := s.b.Pop(ctx, broker.PopRequest{
		Group: req.Group, Topic: req.Topic, QueueID: req.QueueId, MaxMessages: int(req.MaxMessages),
		Invisible: time.Duration(req.InvisibleMs) * time.Millisecond, TagExpression: req.TagExpression, ExpressionType: req.ExpressionType,
		PollTimeout: time.Duration(max(req.PollTimeoutMs, 0)) * time.Millisecond, ClientID: req.ClientId, AttemptID: req.AttemptId,
	})
	if err != nil {
		return &pb.ReceiveResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ReceiveResponse{Status: wire.OK, Messages: make([]*pb.ReceivedMessage, 0, len(msgs))}
	for _, m := range msgs {
		resp.Messages = append(resp.Messages, &pb.ReceivedMessage{Record: m.Record, QueueId: m.QueueID, QueueOffset: m.QueueOffset,
			DeliveryAttempt: m.Attempt, ReceiptHandle: m.Handle, VisibleAtMs: m.VisibleAt.UnixMilli()})
	}
	return resp, nil
}

func (s *brokerService) Ack(ctx context.Context, req *pb.AckRequest) (*pb.AckResponse, error) {
	switch n := len(req.ReceiptHandles); {
	case n == 0:
		return &pb.AckResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no receipt handle given"))}, nil
	case n > maxAckHandles:
		return &pb.AckResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER,
			"%d receipt handles in one ack, at most %d", n, maxAckHandles))}, nil
	}
	resp := &pb.AckResponse{Status: wire.OK, Results: make([]*pb.Status, len(req.ReceiptHandles))}
	for i, h := range req.ReceiptHandles {
		resp.Results[i] = wire.Status(s.b.PopAck(ctx, req.Group, req.Topic, h))
	}
	return resp, nil
}

func (s *brokerService) ChangeInvisible(ctx context.Context, req *pb.ChangeInvisibleRequest) (*pb.ChangeInvisibleResponse, error) {
	m, err := s.b.ChangeInvisible(ctx, req.Group, req.Topic, req.ReceiptHandle, time.Duration(req.InvisibleMs)*time.Millisecond)
	if err != nil {
		return &pb.ChangeInvisibleResponse{Status: wire.Status(err)}, nil
	}
	return &pb.ChangeInvisibleResponse{Status: wire.OK, ReceiptHandle: m.Handle, VisibleAtMs: m.VisibleAt.UnixMilli()}, nil
}

func (s *brokerService) Nack(ctx context.Context, req *pb.NackRequest) (*pb.NackResponse, error) {
	d, err := s.b.PopNack(ctx, req.Group, req.Topic, req.ReceiptHandle)
	if err != nil {
		return &pb.NackResponse{Status: wire.Status(err)}, nil
	}
	return &pb.NackResponse{Status: wire.OK, BackoffMs: d.Milliseconds()}, nil
}
