package grpcapi

import (
	"context"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// delayService is bolide.v1's Delay service: cancel and status of delayed
// delivery.
type delayService struct {
	pb.UnimplementedDelayServer
	b *broker.Broker
}

func (s *delayService) Cancel(ctx context.Context, req *pb.CancelDelayedRequest) (*pb.CancelDelayedResponse, error) {
	due, n, err := s.b.CancelDelayed(ctx, req.Topic, req.UniqueId)
	return &pb.CancelDelayedResponse{Status: wire.Status(err), DeliverAtMs: due, Copies: int32(n)}, nil
}

func (s *delayService) Status(context.Context, *pb.DelayStatusRequest) (*pb.DelayStatusResponse, error) {
	levels, ts, err := s.b.DelayStatus()
	if err != nil {
		return &pb.DelayStatusResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.DelayStatusResponse{Status: wire.OK}
	for _, l := range levels {
		ls := &pb.DelayLevelStatus{Level: int32(l.Level), DelayMs: l.Delay.Milliseconds(), Offset: l.Offset,
			MaxOffset: l.MaxOffset, Pending: l.Pending}
		if !l.NextDeliver.IsZero() {
			ls.NextDeliverMs = l.NextDeliver.UnixMilli()
		}
		resp.Levels = append(resp.Levels, ls)
	}
	t := &pb.TimerStatus{Enabled: ts != nil, MaxDelayMs: s.b.Options().Delay.MaxDelay.Milliseconds()}
	if ts != nil {
		_, qmax := s.b.Store().QueueOffsets(message.TimerTopic, 0)
		t.IndexedOffset, t.QueueMaxOffset = ts.IndexedOffset, qmax
		t.Pending, t.Buckets, t.LoadedBuckets, t.LoadedEntries = ts.Pending, ts.Buckets, ts.LoadedBuckets, ts.LoadedEntries
		t.Delivered, t.Cancelled, t.Lost, t.NextDueMs, t.IndexBytes = ts.Delivered, ts.Cancelled, ts.Lost, ts.NextDueMS, ts.IndexBytes
	}
	resp.Timer = t
	return resp, nil
}
