package grpcapi

import (
	"context"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// deadLetterService is the gRPC front end of retries and dead letters
// (service DeadLetter in retry.proto).
type deadLetterService struct {
	pb.UnimplementedDeadLetterServer
	b *broker.Broker
}

func (s *deadLetterService) SendBack(ctx context.Context, req *pb.SendBackRequest) (*pb.SendBackResponse, error) {
	res, err := s.b.Retry().SendBack(ctx, retry.SendBackRequest{
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

func (s *deadLetterService) ListDeadLetters(_ context.Context, req *pb.ListDeadLettersRequest) (*pb.ListDeadLettersResponse, error) {
	list, next, minOff, maxOff, err := s.b.Retry().DeadLetters(retry.DeadLetterQuery{
		Group: req.Group, Offset: req.Offset, Max: int(req.Max), SinceMS: req.SinceMs, IDs: req.Ids,
	})
	if err != nil {
		return &pb.ListDeadLettersResponse{Status: wire.Status(err)}, nil
	}
	entries := make([]*pb.DeadLetterEntry, len(list))
	for i, d := range list {
		entries[i] = &pb.DeadLetterEntry{
			QueueOffset: d.QueueOffset, MsgId: d.MsgID, UniqueId: d.UniqueID, OriginTopic: d.OriginTopic, OriginMsgId: d.OriginMsgID,
			ReconsumeTimes: d.ReconsumeTimes, FirstFailureMs: d.FirstFailureMS, LastFailureMs: d.LastFailureMS, Reason: d.Reason,
			Record: d.Record,
		}
		if d.Replayed != nil {
			entries[i].Replayed = replayMarkToProto(*d.Replayed)
		}
	}
	return &pb.ListDeadLettersResponse{Status: wire.OK, Entries: entries, NextOffset: next, MinOffset: minOff, MaxOffset: maxOff}, nil
}

func (s *deadLetterService) MarkReplayed(ctx context.Context, req *pb.MarkReplayedRequest) (*pb.MarkReplayedResponse, error) {
	var mark *retry.ReplayMark
	if m := req.Mark; m != nil {
		mark = &retry.ReplayMark{AtMS: m.AtMs, Topic: m.Topic, MsgID: m.MsgId, UniqueID: m.UniqueId}
	}
	got, already, err := s.b.Retry().MarkReplayed(ctx, req.Group, req.QueueOffset, req.MsgId, mark)
	if err != nil {
		return &pb.MarkReplayedResponse{Status: wire.Status(err)}, nil
	}
	return &pb.MarkReplayedResponse{Status: wire.OK, Already: already, Mark: replayMarkToProto(got)}, nil
}

func replayMarkToProto(m retry.ReplayMark) *pb.ReplayMark {
	return &pb.ReplayMark{AtMs: m.AtMS, Topic: m.Topic, MsgId: m.MsgID, UniqueId: m.UniqueID}
}
