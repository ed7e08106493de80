package broker

import (
	"context"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// deadLetterServer is the gRPC front end of retries and dead letters
// (service DeadLetter in retry.proto).
type deadLetterServer struct {
	pb.UnimplementedDeadLetterServer
	b *Broker
}

func (s *deadLetterServer) SendBack(ctx context.Context, req *pb.SendBackRequest) (*pb.SendBackResponse, error) {
	res, err := s.b.SendBack(ctx, SendBackRequest{
		Group: req.Group, CommitLogOffset: req.CommitLogOffset, UniqueID: req.UniqueId, OriginMsgID: req.OriginMsgId,
		DelayLevel: req.DelayLevel, MaxReconsumeTimes: req.MaxReconsumeTimes, ReconsumeTimes: req.ReconsumeTimes,
		Reason: req.Reason,
	})
	if err != nil {
		return &pb.SendBackResponse{Status: wire.Status(err)}, nil
	}
	return &pb.SendBackResponse{Status: wire.OK, DeadLettered: res.DeadLettered, Topic: res.Topic, MsgId: res.MsgID,
		ReconsumeTimes: res.ReconsumeTimes}, nil
}

func (s *deadLetterServer) ListDeadLetters(_ context.Context, req *pb.ListDeadLettersRequest) (*pb.ListDeadLettersResponse, error) {
	entries, next, minOff, maxOff, err := s.b.DeadLetters(DeadLetterQuery{
		Group: req.Group, Offset: req.Offset, Max: int(req.Max), SinceMS: req.SinceMs, IDs: req.Ids,
	})
	if err != nil {
		return &pb.ListDeadLettersResponse{Status: wire.Status(err)}, nil
	}
	return &pb.ListDeadLettersResponse{Status: wire.OK, Entries: entries, NextOffset: next, MinOffset: minOff, MaxOffset: maxOff}, nil
}

func (s *deadLetterServer) MarkReplayed(ctx context.Context, req *pb.MarkReplayedRequest) (*pb.MarkReplayedResponse, error) {
	mark, already, err := s.b.MarkReplayed(ctx, req.Group, req.QueueOffset, req.MsgId, req.Mark)
	if err != nil {
		return &pb.MarkReplayedResponse{Status: wire.Status(err)}, nil
	}
	return &pb.MarkReplayedResponse{Status: wire.OK, Already: already, Mark: mark}, nil
}
