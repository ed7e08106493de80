package remote

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Controllers implements replication.ControllerClient over bolide.v1's
// Controller service: one connection per controller address, opened on
// first use. Answers with a status other than OK become coded errors;
// transport failures stay plain errors.
type Controllers struct {
	conns conns
	dial  func(addr string) (*grpc.ClientConn, error)
}

var _ replication.ControllerClient = (*Controllers)(nil)

// NewControllers returns a client with no connection yet; its
// connections are secured as the first of opts says (none: plain text,
// no credentials).
func NewControllers(opts ...DialOptions) *Controllers {
	d := dialer(dialOptions(opts))
	return &Controllers{conns: newConns("controller", d), dial: d}
}

func (c *Controllers) client(addr string) (pb.ControllerClient, error) {
	conn, err := c.conns.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewControllerClient(conn), nil
}

// Heartbeat opens a heartbeat stream on a connection of its own, closed
// when ctx is done: a stream given up for silence does not leave the next
// one on a connection that may be dead.
func (c *Controllers) Heartbeat(ctx context.Context, addr string) (replication.BeatStream, error) {
	if c.conns.isClosed() {
		return nil, errors.New("controller client closed")
	}
	conn, err := c.dial(addr)
	if err != nil {
		return nil, fmt.Errorf("controller %s: %w", addr, err)
	}
	st, err := pb.NewControllerClient(conn).Heartbeat(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = conn.Close() })
	return beatStream{st}, nil
}

type beatStream struct {
	st pb.Controller_HeartbeatClient
}

func (s beatStream) Send(b replication.BrokerBeat) error {
	return s.st.Send(&pb.BrokerBeat{
		Cluster: b.Cluster, BrokerName: b.BrokerName, ReplicaId: b.ReplicaID, Addr: b.Addr, HaAddr: b.HAAddr,
		Epoch: b.Epoch, Role: b.Role, MaxOffset: b.MaxOffset, ConfirmOffset: b.ConfirmOffset, Priority: b.Priority, Seq: b.Seq,
	})
}

func (s beatStream) Recv() (replication.ControllerBeat, error) {
	m, err := s.st.Recv()
	if err != nil {
		return replication.ControllerBeat{}, err
	}
	out := replication.ControllerBeat{Err: wire.FromStatus(m.GetStatus()), Seq: m.GetSeq(), Leader: m.GetLeader(),
		LeaderID: m.GetLeaderId(), LeaseMs: m.GetLeaseMs()}
	if g := m.GetGroup(); g != nil {
		gs := groupFromProto(g)
		out.Group = &gs
	}
	return out, nil
}

// AlterSyncStateSet proposes a new sync state set to the controller at addr.
func (c *Controllers) AlterSyncStateSet(ctx context.Context, addr string, req replication.AlterSyncStateSetRequest) (replication.GroupState, error) {
	cl, err := c.client(addr)
	if err != nil {
		return replication.GroupState{}, err
	}
	resp, err := cl.AlterSyncStateSet(ctx, &pb.AlterSyncStateSetRequest{
		BrokerName: req.BrokerName, MasterId: req.MasterID, MasterEpoch: req.MasterEpoch,
		SyncStateSetEpoch: req.SyncStateSetEpoch, NewSyncStateSet: req.NewSyncStateSet,
	})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return replication.GroupState{}, err
	}
	return groupFromProto(resp.GetGroup()), nil
}

// ElectMaster asks the controller at addr for an election.
func (c *Controllers) ElectMaster(ctx context.Context, addr string, req replication.ElectMasterRequest) (replication.GroupState, error) {
	cl, err := c.client(addr)
	if err != nil {
		return replication.GroupState{}, err
	}
	resp, err := cl.ElectMaster(ctx, &pb.ElectMasterRequest{BrokerName: req.BrokerName, Designated: req.Designated, Unclean: req.Unclean})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return replication.GroupState{}, err
	}
	return groupFromProto(resp.GetGroup()), nil
}

// Close closes every connection.
func (c *Controllers) Close() error { return c.conns.close() }

func groupFromProto(g *pb.GroupState) replication.GroupState {
	out := replication.GroupState{
		Cluster: g.GetCluster(), BrokerName: g.GetBrokerName(), MasterID: g.GetMasterId(), MasterAddr: g.GetMasterAddr(),
		MasterHAAddr: g.GetMasterHaAddr(), MasterEpoch: g.GetMasterEpoch(), SyncStateSet: append([]int64(nil), g.GetSyncStateSet()...),
		SyncStateSetEpoch: g.GetSyncStateSetEpoch(),
	}
	for _, r := range g.GetReplicas() {
		out.Replicas = append(out.Replicas, replication.ReplicaState{ID: r.GetId(), Addr: r.GetAddr(), HAAddr: r.GetHaAddr(),
			Alive: r.GetAlive(), Epoch: r.GetEpoch(), MaxOffset: r.GetMaxOffset(), Role: r.GetRole()})
	}
	return out
}
