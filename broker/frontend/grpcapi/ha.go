package grpcapi

import (
	"context"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// haService is bolide.v1's BrokerHA service: metadata for slaves,
// promotion, replication status.
type haService struct {
	pb.UnimplementedBrokerHAServer
	b *broker.Broker
}

func (s *haService) GetMetadata(_ context.Context, req *pb.GetMetadataRequest) (*pb.GetMetadataResponse, error) {
	md, err := s.b.Replication().Metadata(v1wire.MetadataRequestFromProto(req))
	if err != nil {
		return &pb.GetMetadataResponse{Status: wire.Status(err)}, nil
	}
	return v1wire.MetadataToProto(md), nil
}

func (s *haService) PushMetadata(_ context.Context, req *pb.PushMetadataRequest) (*pb.PushMetadataResponse, error) {
	return &pb.PushMetadataResponse{Status: wire.Status(s.b.Replication().ApplyPush(v1wire.PushFromProto(req)))}, nil
}

func (s *haService) Promote(ctx context.Context, req *pb.PromoteRequest) (*pb.PromoteResponse, error) {
	res, err := s.b.Promote(ctx, broker.PromoteRequest{BrokerName: req.BrokerName, Epoch: req.Epoch, Force: req.Force})
	if err != nil {
		return &pb.PromoteResponse{Status: wire.Status(err)}, nil
	}
	return &pb.PromoteResponse{Status: wire.OK, Epoch: res.Epoch, PreviousBrokerId: res.PreviousBrokerID,
		CommitLogMaxOffset: res.MaxOffset, Registered: res.Registered}, nil
}

func (s *haService) ReplicationStatus(context.Context, *pb.ReplicationStatusRequest) (*pb.ReplicationStatusResponse, error) {
	return &pb.ReplicationStatusResponse{Status: wire.OK, Replication: replicationToProto(s.b.Replication().Info())}, nil
}

// replicationToProto converts the replication state for status calls.
func replicationToProto(in replication.Info) *pb.ReplicationInfo {
	info := &pb.ReplicationInfo{
		Role: in.Role.String(), Mode: in.Mode, Epoch: in.Epoch, InSyncReplicas: int32(in.InSyncReplicas),
		HaAddr: in.HAAddr, CommitLogMaxOffset: in.CommitLogMaxOffset, InSyncSlaves: int32(in.InSyncSlaves),
		MasterAddr: in.MasterAddr, MasterHaAddr: in.MasterHAAddr, State: in.State, AppliedOffset: in.AppliedOffset,
		MasterOffset: in.MasterOffset, LagBytes: in.LagBytes, LastError: in.LastError,
	}
	for _, s := range in.Slaves {
		info.Slaves = append(info.Slaves, &pb.SlaveInfo{
			BrokerId: s.BrokerID, RemoteAddr: s.RemoteAddr, Connected: s.Connected, AckOffset: s.AckOffset,
			LagBytes: s.LagBytes, LagMs: s.LagMs, InSync: s.InSync, LastHeardMs: s.LastHeard.UnixMilli(),
			ConnectedAtMs: s.ConnectedAt.UnixMilli(),
		})
	}
	if !in.LastMetadataSync.IsZero() {
		info.LastMetadataSyncMs = in.LastMetadataSync.UnixMilli()
	}
	if in.MetadataError != nil {
		info.MetadataError = in.MetadataError.Error()
	}
	for _, e := range in.Epochs {
		info.Epochs = append(info.Epochs, &pb.EpochEntry{Epoch: e.Epoch, StartOffset: e.Start})
	}
	if c := in.Controller; c != nil {
		info.ControllerMode = true
		info.ReplicaId = c.ReplicaID
		info.SyncStateSet = c.SyncStateSet
		info.SyncStateSetEpoch = c.SyncStateSetEpoch
		info.LeaseRemainingMs = c.LeaseRemaining.Milliseconds()
		info.ControllerLeader = c.Leader
		info.ConfirmOffset = c.ConfirmOffset
	}
	return info
}
