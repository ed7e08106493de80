package remote

import (
	"context"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// NameServers implements broker.NameServers over bolide.v1 gRPC: one
// connection per NameServer address, opened on first use.
type NameServers struct{ conns conns }

// NewNameServers returns a client with no connection yet; its
// connections are secured as the first of opts says (none: plain text,
// no credentials).
func NewNameServers(opts ...DialOptions) *NameServers {
	return &NameServers{conns: newConns("name server", dialer(dialOptions(opts)))}
}

func (n *NameServers) client(addr string) (pb.NameServerClient, error) {
	conn, err := n.conns.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewNameServerClient(conn), nil
}

// Register registers the broker with one NameServer.
func (n *NameServers) Register(ctx context.Context, addr string, r broker.Registration) (broker.RegistrationAnswer, error) {
	c, err := n.client(addr)
	if err != nil {
		return broker.RegistrationAnswer{}, err
	}
	req := &pb.RegisterBrokerRequest{
		Cluster: r.Cluster, BrokerName: r.BrokerName, BrokerAddr: r.Addr, BrokerId: r.BrokerID,
		HaAddr: r.HAAddr, Epoch: r.Epoch, Version: r.Version, GossipAddr: r.GossipAddr,
		HeartbeatTimeoutMs: r.HeartbeatTimeout.Milliseconds(),
		DataVersion:        &pb.DataVersion{Timestamp: r.DataVersion.Timestamp, Counter: r.DataVersion.Counter},
		FifoGroups:         r.FifoGroups,
	}
	if r.Delta {
		req.TopicsDelta = true
		req.BaseDataVersion = &pb.DataVersion{Timestamp: r.BaseVersion.Timestamp, Counter: r.BaseVersion.Counter}
		req.RemovedTopics = r.Removed
		req.TopicCount = int32(r.TopicCount)
	}
	req.Topics = make([]*pb.TopicConfig, 0, len(r.Topics))
	for _, t := range r.Topics {
		req.Topics = append(req.Topics, v1wire.TopicToProto(t))
	}
	resp, err := c.RegisterBroker(ctx, req)
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return broker.RegistrationAnswer{}, err
	}
	return broker.RegistrationAnswer{MasterAddr: resp.GetMasterAddr(), MasterHAAddr: resp.GetMasterHaAddr(),
		GossipAddr: resp.GetGossipAddr(), DeltaAccepted: resp.GetTopicDeltaAccepted(), TopicsStale: resp.GetTopicsStale()}, nil
}

// Unregister removes the broker from one NameServer's routes.
func (n *NameServers) Unregister(ctx context.Context, addr string, r broker.Registration) error {
	c, err := n.client(addr)
	if err != nil {
		return err
	}
	resp, err := c.UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{Cluster: r.Cluster, BrokerName: r.BrokerName,
		BrokerAddr: r.Addr, BrokerId: r.BrokerID})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	return err
}

// Close closes every connection.
func (n *NameServers) Close() error { return n.conns.close() }
