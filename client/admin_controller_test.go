package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// fakeController answers DescribeController with a fixed view and
// ElectMaster as a leader (elects the designated replica) or a follower.
type fakeController struct {
	pb.UnimplementedControllerServer
	self, leader string
	term, commit uint64
	groups       []*pb.GroupState

	mu     sync.Mutex
	elects []*pb.ElectMasterRequest
}

func (f *fakeController) DescribeController(context.Context, *pb.DescribeControllerRequest) (*pb.DescribeControllerResponse, error) {
	return &pb.DescribeControllerResponse{Status: wire.Status(nil), SelfId: f.self, LeaderId: f.leader, LeaderRaftAddr: "raft-" + f.leader,
		Term: f.term, CommitIndex: f.commit, Groups: f.groups,
		Peers: []*pb.ControllerPeer{{Id: "n1", RaftAddr: "raft-n1", State: "follower"}, {Id: "n0", RaftAddr: "raft-n0", State: "leader"}}}, nil
}

func (f *fakeController) ElectMaster(_ context.Context, req *pb.ElectMasterRequest) (*pb.ElectMasterResponse, error) {
	f.mu.Lock()
	f.elects = append(f.elects, req)
	f.mu.Unlock()
	if f.self != f.leader {
		return &pb.ElectMasterResponse{Status: wire.Status(wire.Errorf(pb.Code_CONTROLLER_NOT_LEADER, "leader is %s", f.leader))}, nil
	}
	if req.GetDesignated() == 3 && !req.GetUnclean() {
		return &pb.ElectMasterResponse{Status: wire.Status(wire.Errorf(pb.Code_CONTROLLER_MASTER_NOT_AVAILABLE,
			"replica 3 is not in the sync state set"))}, nil
	}
	return &pb.ElectMasterResponse{Status: wire.Status(nil), Group: &pb.GroupState{BrokerName: req.GetBrokerName(),
		MasterId: req.GetDesignated(), MasterAddr: "b:1", MasterEpoch: 3, SyncStateSet: []int64{req.GetDesignated()}, SyncStateSetEpoch: 5}}, nil
}

func startFakeController(t *testing.T, f *fakeController) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterControllerServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// TestAdminDescribeControllerAndElectMaster: the leader's answer is the
// one shown, whatever the order of the NameServers; a NameServer without a
// controller is listed as such; with none, ErrNoController. ElectMaster
// goes past a follower to the leader and returns the leader's refusal.
func TestAdminDescribeControllerAndElectMaster(t *testing.T) {
	group := &pb.GroupState{Cluster: "C", BrokerName: "broker-a", MasterId: 2, MasterAddr: "b:1", MasterEpoch: 2,
		SyncStateSet: []int64{2, 1}, SyncStateSetEpoch: 4, Replicas: []*pb.ReplicaState{
			{Id: 2, Addr: "b:1", Alive: true, Epoch: 2, MaxOffset: 1 << 33, Role: "MASTER"},
			{Id: 1, Addr: "a:1", Alive: true, Epoch: 2, MaxOffset: 1 << 33, Role: "SLAVE", LastBeatMsAgo: 300},
		}}
	follower := &fakeController{self: "n1", leader: "n0", term: 7, commit: 99} // lags: no groups
	leader := &fakeController{self: "n0", leader: "n0", term: 7, commit: 98, groups: []*pb.GroupState{group}}
	fAddr, lAddr := startFakeController(t, follower), startFakeController(t, leader)
	plain := cluster.Start(t, cluster.Options{BrokerGroups: 1}).NameServerAddrs()[0] // no controller

	a, err := NewAdmin(WithNameServers(plain, fAddr, lAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	cs, err := a.DescribeController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Leader != "n0" || cs.LeaderNameServer != lAddr || cs.From != lAddr || cs.Term != 7 || cs.CommitIndex != 98 ||
		cs.LeaderRaftAddr != "raft-n0" || len(cs.Peers) != 2 || cs.Peers[0].ID != "n0" || len(cs.NameServers) != 3 {
		t.Fatalf("status %+v", cs)
	}
	if !errors.Is(cs.NameServers[0].Err, ErrNoController) || cs.NameServers[1].ID != "n1" || cs.NameServers[1].Err != nil {
		t.Fatalf("name servers %+v", cs.NameServers)
	}
	if len(cs.Groups) != 1 {
		t.Fatalf("groups %+v", cs.Groups)
	}
	g := cs.Groups[0]
	if g.BrokerName != "broker-a" || g.MasterID != 2 || g.MasterEpoch != 2 || !slices.Equal(g.SyncStateSet, []int64{1, 2}) ||
		g.SyncStateSetEpoch != 4 || len(g.Replicas) != 2 || g.Replicas[0].ID != 1 || g.Replicas[0].LastBeat.Milliseconds() != 300 ||
		g.Replicas[1].MaxOffset != 1<<33 || !g.InSync(1) || g.InSync(3) {
		t.Fatalf("group %+v", g)
	}

	eg, err := a.ElectMaster(ctx, "broker-a", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if eg.MasterID != 1 || eg.MasterEpoch != 3 || !slices.Equal(eg.SyncStateSet, []int64{1}) {
		t.Fatalf("elected %+v", eg)
	}
	if len(follower.elects) != 1 || len(leader.elects) != 1 {
		t.Fatalf("asked the follower %d times, the leader %d times", len(follower.elects), len(leader.elects))
	}
	if _, err := a.ElectMaster(ctx, "broker-a", 3, false); wire.CodeOf(err) != pb.Code_CONTROLLER_MASTER_NOT_AVAILABLE {
		t.Fatalf("refused election: %v", err)
	}
	if eg, err := a.ElectMaster(ctx, "broker-a", 3, true); err != nil || eg.MasterID != 3 || !leader.elects[2].GetUnclean() {
		t.Fatalf("unclean election: %+v, %v", eg, err)
	}

	none, err := NewAdmin(WithNameServers(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if _, err := none.DescribeController(ctx); !errors.Is(err, ErrNoController) {
		t.Fatalf("no controller: %v", err)
	}
	if _, err := none.ElectMaster(ctx, "broker-a", 0, false); !errors.Is(err, ErrNoController) {
		t.Fatalf("elect without controller: %v", err)
	}
}
