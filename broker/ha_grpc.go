package broker

import (
	"context"

	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// haGRPC is the BrokerHA service: metadata for slaves, promotion, status.
type haGRPC struct {
	pb.UnimplementedBrokerHAServer
	b *Broker
}

func (s *haGRPC) GetMetadata(_ context.Context, req *pb.GetMetadataRequest) (*pb.GetMetadataResponse, error) {
	md, err := s.b.repl.Metadata(remote.MetadataRequestFromProto(req))
	if err != nil {
		return &pb.GetMetadataResponse{Status: wire.Status(err)}, nil
	}
	return remote.MetadataToProto(md), nil
}

func (s *haGRPC) Promote(ctx context.Context, req *pb.PromoteRequest) (*pb.PromoteResponse, error) {
	res, err := s.b.Promote(ctx, req.BrokerName, req.Epoch)
	if err != nil {
		return &pb.PromoteResponse{Status: wire.Status(err)}, nil
	}
	return &pb.PromoteResponse{Status: wire.OK, Epoch: res.Epoch, PreviousBrokerId: res.PreviousBrokerID,
		CommitLogMaxOffset: res.MaxOffset, Registered: res.Registered}, nil
}

func (s *haGRPC) ReplicationStatus(context.Context, *pb.ReplicationStatusRequest) (*pb.ReplicationStatusResponse, error) {
	return &pb.ReplicationStatusResponse{Status: wire.OK, Replication: s.b.replicationInfo()}, nil
}

// replicationInfo is the broker's replication state for status calls.
func (b *Broker) replicationInfo() *pb.ReplicationInfo {
	in := b.repl.Info()
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
	return info
}
