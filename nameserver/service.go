package nameserver

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// service is the gRPC front end of the route table. Errors travel in the
// response's Status (wire codes); the gRPC call itself succeeds.
type service struct {
	pb.UnimplementedNameServerServer
	s *Server
}

func (v *service) RegisterBroker(ctx context.Context, req *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.NameServer_RegisterBroker_FullMethodName); err != nil {
		return &pb.RegisterBrokerResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.RegisterBrokerResponse{GossipAddr: v.s.GossipAddr(), TopicDeltaAccepted: true}
	now := time.Now()
	reg := registrationFromProto(req)
	v.s.guardIdentity(&reg, now)
	res, err := v.s.routes.Register(reg, now)
	resp.Status = wire.Status(err)
	if err == nil && res.TopicsStale {
		resp.TopicsStale = true
		v.s.lg.Debug("broker topic delta stale: asking for the whole table", zap.String("broker_name", req.BrokerName),
			zap.String("broker_addr", req.BrokerAddr))
		return resp, nil
	}
	if err != nil {
		if res.HeldBy != "" {
			if v.s.ident.shouldLog(fmt.Sprintf("%s/%d/%s", req.BrokerName, req.BrokerId, req.BrokerAddr), now) {
				v.s.lg.Warn("register broker refused: broker identity held by a live broker", zap.String("cluster", req.Cluster),
					zap.String("broker_name", req.BrokerName), zap.Int64("broker_id", req.BrokerId),
					zap.String("broker_addr", req.BrokerAddr), zap.String("holder", res.HeldBy), zap.Error(err))
			}
			return resp, nil
		}
		v.s.lg.Warn("register broker rejected", zap.String("broker_name", req.BrokerName),
			zap.String("broker_addr", req.BrokerAddr), zap.Error(err))
		return resp, nil
	}
	fields := []zap.Field{
		zap.String("cluster", req.Cluster), zap.String("broker_name", req.BrokerName),
		zap.Int64("broker_id", req.BrokerId), zap.String("broker_addr", req.BrokerAddr),
		zap.String("gossip_addr", req.GossipAddr), zap.Int("topics", len(req.Topics)),
	}
	if req.TopicsDelta {
		fields = append(fields, zap.Bool("delta", true), zap.Int("removed", len(req.RemovedTopics)))
	}
	switch {
	case res.New:
		v.s.lg.Info("broker registered", fields...)
	case res.TopicsApplied:
		v.s.lg.Info("broker topics updated", fields...)
	default:
		v.s.lg.Debug("broker heartbeat", fields...)
	}
	if res.Displaced != "" {
		v.s.lg.Warn("broker id taken over by another address", append(fields, zap.String("displaced", res.Displaced))...)
	}
	v.s.ensureMember(req.GossipAddr)
	resp.MasterAddr = res.MasterAddr
	resp.MasterHaAddr = res.MasterHAAddr
	return resp, nil
}

func registrationFromProto(req *pb.RegisterBrokerRequest) Registration {
	reg := Registration{
		Cluster:    req.Cluster,
		BrokerName: req.BrokerName,
		Addr:       req.BrokerAddr,
		ID:         req.BrokerId,
		HAAddr:     req.HaAddr,
		AdminAddr:  req.AdminAddr,
		Version:    req.Version,
		GossipAddr: req.GossipAddr,
		Epoch:      req.Epoch,
		Timeout:    time.Duration(req.HeartbeatTimeoutMs) * time.Millisecond,
	}
	if dv := req.DataVersion; dv != nil {
		reg.DataVersion = &DataVersion{Timestamp: dv.Timestamp, Counter: dv.Counter}
	}
	reg.Topics = make([]TopicConfig, 0, len(req.Topics))
	for _, t := range req.Topics {
		reg.Topics = append(reg.Topics, TopicConfig{
			Name: t.Name, ReadQueues: t.ReadQueueNums, WriteQueues: t.WriteQueueNums,
			Perm: t.Perm, SysFlag: t.TopicSysFlag, MessageType: t.Attributes[attrMessageType],
		})
	}
	reg.FifoGroups = req.FifoGroups
	if req.TopicsDelta {
		reg.Delta = true
		reg.Removed = req.RemovedTopics
		reg.TopicCount = int(req.TopicCount)
		if bv := req.BaseDataVersion; bv != nil {
			reg.BaseVersion = DataVersion{Timestamp: bv.Timestamp, Counter: bv.Counter}
		}
	}
	return reg
}

func (v *service) UnregisterBroker(ctx context.Context, req *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.NameServer_UnregisterBroker_FullMethodName); err != nil {
		return &pb.UnregisterBrokerResponse{Status: wire.Status(err)}, nil
	}
	removed, err := v.s.routes.Unregister(req.Cluster, req.BrokerName, req.BrokerAddr, req.BrokerId)
	if err == nil {
		v.s.lg.Info("broker unregistered", zap.String("cluster", req.Cluster), zap.String("broker_name", req.BrokerName),
			zap.Int64("broker_id", req.BrokerId), zap.String("broker_addr", req.BrokerAddr), zap.Bool("was_registered", removed))
	}
	return &pb.UnregisterBrokerResponse{Status: wire.Status(err)}, nil
}

func (v *service) GetRoute(ctx context.Context, req *pb.GetRouteRequest) (*pb.GetRouteResponse, error) {
	return v.s.getRoute(req.Topic, v.s.authorizeRPC(ctx, pb.NameServer_GetRoute_FullMethodName)), nil
}

func brokerDataToProto(b BrokerData) *pb.BrokerData {
	return &pb.BrokerData{Cluster: b.Cluster, BrokerName: b.BrokerName, BrokerAddrs: b.Addrs}
}

func (v *service) GetClusterInfo(ctx context.Context, _ *pb.GetClusterInfoRequest) (*pb.GetClusterInfoResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.NameServer_GetClusterInfo_FullMethodName); err != nil {
		return &pb.GetClusterInfoResponse{Status: wire.Status(err)}, nil
	}
	ci := v.s.routes.ClusterInfo()
	resp := &pb.GetClusterInfoResponse{
		Status:   wire.Status(nil),
		Brokers:  make(map[string]*pb.BrokerData, len(ci.Brokers)),
		Clusters: make(map[string]*pb.ClusterBrokers, len(ci.Clusters)),
	}
	for name, b := range ci.Brokers {
		resp.Brokers[name] = brokerDataToProto(b)
	}
	for c, names := range ci.Clusters {
		resp.Clusters[c] = &pb.ClusterBrokers{BrokerNames: names}
	}
	for _, lb := range ci.Live {
		resp.Live = append(resp.Live, &pb.BrokerLiveInfo{
			Cluster: lb.Cluster, BrokerName: lb.BrokerName, BrokerId: lb.ID, BrokerAddr: lb.Addr,
			HaAddr: lb.HAAddr, AdminAddr: lb.AdminAddr, Version: lb.Version,
			LastUpdateMs: lb.LastUpdate.UnixMilli(), TopicCount: int32(lb.TopicCount), Epoch: lb.Epoch,
		})
	}
	return resp, nil
}

func (v *service) ListTopics(ctx context.Context, _ *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.NameServer_ListTopics_FullMethodName); err != nil {
		return &pb.ListTopicsResponse{Status: wire.Status(err)}, nil
	}
	return &pb.ListTopicsResponse{Status: wire.Status(nil), Topics: v.s.routes.Topics()}, nil
}

func (v *service) DeleteTopic(ctx context.Context, req *pb.DeleteTopicRequest) (*pb.DeleteTopicResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.NameServer_DeleteTopic_FullMethodName); err != nil {
		return &pb.DeleteTopicResponse{Status: wire.Status(err)}, nil
	}
	err := v.s.routes.DeleteTopic(req.Topic, req.Cluster)
	if err == nil {
		v.s.lg.Info("topic deleted from routes", zap.String("topic", req.Topic), zap.String("cluster", req.Cluster))
	}
	return &pb.DeleteTopicResponse{Status: wire.Status(err)}, nil
}
