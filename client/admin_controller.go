package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ErrNoController: none of the NameServers runs a controller (the cluster
// fails over by hand: Promote).
var ErrNoController = errors.New("no NameServer runs a controller")

// ControllerStatus is the controller group (automatic failover) as its
// NameServers describe it. Leader, Term, CommitIndex, Peers and Groups
// come from the Raft leader's answer, or when the leader did not answer
// from the answer with the highest term and commit index (a follower's
// view of the groups may lag).
type ControllerStatus struct {
	// Leader is the Raft leader's controller id ("" when unknown),
	// LeaderRaftAddr its Raft address and LeaderNameServer the NameServer
	// it runs in ("" when that NameServer did not answer).
	Leader, LeaderRaftAddr, LeaderNameServer string
	Term, CommitIndex                        uint64
	// From is the NameServer whose answer this is.
	From  string
	Peers []ControllerPeer
	// NameServers is every NameServer's own answer.
	NameServers []ControllerNode
	Groups      []ControllerGroup
}

// ControllerPeer is one voter of the Raft group; State is leader,
// follower, candidate or unknown.
type ControllerPeer struct {
	ID, RaftAddr, State string
}

// ControllerNode is one NameServer's answer: its controller id, the
// leader it knows, its term and commit index; Err when it did not answer,
// ErrNoController matching when it runs no controller.
type ControllerNode struct {
	NameServer   string
	ID, Leader   string
	Term, Commit uint64
	Err          error
}

// ControllerGroup is one broker group as the controller committed it.
type ControllerGroup struct {
	Cluster, BrokerName string
	// MasterID is the master's replica id, 0 when the group has none
	// (read-only until a replica of the sync state set is back).
	MasterID                 int64
	MasterAddr, MasterHAAddr string
	MasterEpoch              int64
	// SyncStateSet are the replica ids holding every acknowledged
	// message, sorted; SyncStateSetEpoch counts its changes.
	SyncStateSet      []int64
	SyncStateSetEpoch int64
	Replicas          []ControllerReplica
}

// ControllerReplica is one replica of a group as the answering controller
// sees its heartbeats: Alive only on the leader (a follower may not know),
// its reported epoch, CommitLog end and role, and how long ago it last
// beat (negative: never).
type ControllerReplica struct {
	ID               int64
	Addr, HAAddr     string
	Alive            bool
	Epoch, MaxOffset int64
	Role             string
	LastBeat         time.Duration
}

// InSync reports whether replica id is in the group's sync state set.
func (g *ControllerGroup) InSync(id int64) bool { return slices.Contains(g.SyncStateSet, id) }

func (a *Admin) controllerClient(addr string) (pb.ControllerClient, error) {
	cc, err := a.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewControllerClient(cc), nil
}

// isUnimplemented reports a NameServer that does not serve the
// controller service.
func isUnimplemented(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unimplemented
}

// DescribeController asks every NameServer for the controller group and
// its broker groups. It fails with ErrNoController when no NameServer runs
// a controller, and with the NameServers' errors when none answered.
func (a *Admin) DescribeController(ctx context.Context) (*ControllerStatus, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	addrs := a.b.ns.addrs
	nodes := make([]ControllerNode, len(addrs))
	resps := make([]*pb.DescribeControllerResponse, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i].NameServer = addr
			resps[i], nodes[i].Err = a.describeOne(ctx, addr)
			if r := resps[i]; r != nil {
				nodes[i].ID, nodes[i].Leader, nodes[i].Term, nodes[i].Commit = r.GetSelfId(), r.GetLeaderId(), r.GetTerm(), r.GetCommitIndex()
			}
		}()
	}
	wg.Wait()
	best := -1
	for i, r := range resps {
		if r == nil {
			continue
		}
		if best < 0 || betterDescription(r, resps[best]) {
			best = i
		}
	}
	if best < 0 {
		var errs []error
		none := true
		for _, n := range nodes {
			errs = append(errs, n.Err)
			none = none && errors.Is(n.Err, ErrNoController)
		}
		if none {
			return nil, ErrNoController
		}
		return nil, fmt.Errorf("describe controller: %w", errors.Join(errs...))
	}
	r := resps[best]
	cs := &ControllerStatus{
		Leader: r.GetLeaderId(), LeaderRaftAddr: r.GetLeaderRaftAddr(), Term: r.GetTerm(), CommitIndex: r.GetCommitIndex(),
		From: addrs[best], NameServers: nodes,
	}
	for _, n := range nodes {
		if n.Err == nil && n.ID != "" && n.ID == cs.Leader {
			cs.LeaderNameServer = n.NameServer
		}
	}
	for _, p := range r.GetPeers() {
		cs.Peers = append(cs.Peers, ControllerPeer{ID: p.GetId(), RaftAddr: p.GetRaftAddr(), State: p.GetState()})
	}
	sort.Slice(cs.Peers, func(i, j int) bool { return cs.Peers[i].ID < cs.Peers[j].ID })
	for _, g := range r.GetGroups() {
		cs.Groups = append(cs.Groups, controllerGroupFromProto(g))
	}
	sort.Slice(cs.Groups, func(i, j int) bool {
		x, y := cs.Groups[i], cs.Groups[j]
		return x.Cluster < y.Cluster || x.Cluster == y.Cluster && x.BrokerName < y.BrokerName
	})
	return cs, nil
}

// betterDescription prefers the leader's own answer, then the higher term,
// then the higher commit index.
func betterDescription(r, than *pb.DescribeControllerResponse) bool {
	rl := r.GetSelfId() != "" && r.GetSelfId() == r.GetLeaderId()
	tl := than.GetSelfId() != "" && than.GetSelfId() == than.GetLeaderId()
	if rl != tl {
		return rl
	}
	if r.GetTerm() != than.GetTerm() {
		return r.GetTerm() > than.GetTerm()
	}
	return r.GetCommitIndex() > than.GetCommitIndex()
}

// describeOne asks the NameServer at addr.
func (a *Admin) describeOne(ctx context.Context, addr string) (*pb.DescribeControllerResponse, error) {
	c, err := a.controllerClient(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := c.DescribeController(rctx, &pb.DescribeControllerRequest{})
	if isUnimplemented(err) {
		return nil, fmt.Errorf("NameServer %s: %w", addr, ErrNoController)
	}
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("NameServer %s: %w", addr, err)
	}
	return resp, nil
}

func controllerGroupFromProto(g *pb.GroupState) ControllerGroup {
	out := ControllerGroup{
		Cluster: g.GetCluster(), BrokerName: g.GetBrokerName(), MasterID: g.GetMasterId(), MasterAddr: g.GetMasterAddr(),
		MasterHAAddr: g.GetMasterHaAddr(), MasterEpoch: g.GetMasterEpoch(),
		SyncStateSet: slices.Sorted(slices.Values(g.GetSyncStateSet())), SyncStateSetEpoch: g.GetSyncStateSetEpoch(),
	}
	for _, r := range g.GetReplicas() {
		out.Replicas = append(out.Replicas, ControllerReplica{
			ID: r.GetId(), Addr: r.GetAddr(), HAAddr: r.GetHaAddr(), Alive: r.GetAlive(), Epoch: r.GetEpoch(),
			MaxOffset: r.GetMaxOffset(), Role: r.GetRole(), LastBeat: time.Duration(r.GetLastBeatMsAgo()) * time.Millisecond,
		})
	}
	sort.Slice(out.Replicas, func(i, j int) bool { return out.Replicas[i].ID < out.Replicas[j].ID })
	return out
}

// ElectMaster asks the controller leader to elect a master of broker group
// brokerName now: replica designated (> 0), which must be alive and — unless
// unclean — in the sync state set, or (designated 0) the best candidate of
// the sync state set. unclean allows a replica outside the sync state set:
// the acknowledged messages it lacks are lost. It returns the group as
// committed. The NameServers are asked in turn until the leader answers;
// ErrNoController when none runs a controller.
func (a *Admin) ElectMaster(ctx context.Context, brokerName string, designated int64, unclean bool) (*ControllerGroup, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if brokerName == "" {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "broker name is empty")
	}
	if designated < 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "replica id must not be negative, got %d", designated)
	}
	req := &pb.ElectMasterRequest{BrokerName: brokerName, Designated: designated, Unclean: unclean}
	var errs []error
	none := true
	for _, addr := range a.b.ns.addrs {
		c, err := a.controllerClient(addr)
		if err != nil {
			return nil, err
		}
		rctx, cancel := withTimeout(ctx, promoteTimeout)
		resp, err := c.ElectMaster(rctx, req)
		cancel()
		if isUnimplemented(err) {
			errs = append(errs, fmt.Errorf("NameServer %s: %w", addr, ErrNoController))
			continue
		}
		none = false
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err == nil {
			g := controllerGroupFromProto(resp.GetGroup())
			return &g, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("elect master of %s: %w", brokerName, err)
		}
		errs = append(errs, fmt.Errorf("NameServer %s: %w", addr, err))
		if wire.CodeOf(err) != pb.Code_CONTROLLER_NOT_LEADER && isCoded(err) {
			// The leader's answer (or a refusal any controller gives).
			return nil, fmt.Errorf("elect master of %s: %w", brokerName, err)
		}
	}
	if none {
		return nil, ErrNoController
	}
	return nil, fmt.Errorf("elect master of %s: no controller leader answered: %w", brokerName, errors.Join(errs...))
}
