package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// grpcAddrs are the nodes' gRPC addresses.
func grpcAddrs(nodes []*node) []string {
	var a []string
	for _, n := range nodes {
		a = append(a, n.addr)
	}
	return a
}

func indexOf(nodes []*node, n *node) int { return slices.Index(nodes, n) }

// onLeader calls f on the current leader, again on the next one while the
// answer is CONTROLLER_NOT_LEADER (leadership may move under -race).
func onLeader(t *testing.T, nodes []*node, f func(pb.ControllerClient) (*pb.Status, error)) {
	t.Helper()
	waitFor(t, 10*time.Second, "an answer from the leader", func() error {
		st, err := f(dialController(t, leader(t, nodes).addr))
		if err != nil {
			return err
		}
		if st.GetCode() == pb.Code_CONTROLLER_NOT_LEADER {
			return fmt.Errorf("%v", st)
		}
		return nil
	})
}

// twoReplicaGroup starts b1 (elected first) and b2, then adds b2 to the
// SSS through the leader, and waits for the leader's grace period to end.
func twoReplicaGroup(t *testing.T, nodes []*node) (l *node, b1, b2 *fakeBroker) {
	t.Helper()
	l = leader(t, nodes)
	b1 = newFakeBroker(t, "g1", 1, grpcAddrs(nodes)...)
	b1.start()
	waitMaster(t, l, "g1", 1, 1)
	b2 = newFakeBroker(t, "g1", 2, grpcAddrs(nodes)...)
	b2.start()
	waitFor(t, 10*time.Second, "b2 in the SSS", func() error {
		var st *pb.Status
		onLeader(t, nodes, func(cl pb.ControllerClient) (*pb.Status, error) {
			resp, err := cl.AlterSyncStateSet(tctx(t), &pb.AlterSyncStateSetRequest{BrokerName: "g1", MasterId: 1,
				MasterEpoch: 1, SyncStateSetEpoch: 1, NewSyncStateSet: []int64{1, 2}})
			st = resp.GetStatus()
			return st, err
		})
		if st.GetCode() != pb.Code_OK && !slices.Equal(groupOf(leader(t, nodes), "g1").SSS, []int64{1, 2}) {
			return fmt.Errorf("%v", st) // b2 not alive on the leader yet
		}
		return nil
	})
	waitFor(t, 10*time.Second, "the SSS {1,2} on every node, b1 leased, grace over", func() error {
		for _, n := range nodes {
			if g := groupOf(n, "g1"); !slices.Equal(g.SSS, []int64{1, 2}) {
				return fmt.Errorf("%s: sss %v", n.opts.ID, g.SSS)
			}
		}
		if !b1.hasLease() {
			return fmt.Errorf("b1 has no lease")
		}
		l = leader(t, nodes)
		if d := time.Since(l.c.leadership().since); d < l.opts.grace() {
			return fmt.Errorf("grace: %v left", l.opts.grace()-d)
		}
		return nil
	})
	return l, b1, b2
}

// checkHandover checks that the new master of epoch learned it only after
// the old master's last lease (of epoch-1) had ended.
func checkHandover(t *testing.T, oldM, newM *fakeBroker, epoch int64) {
	t.Helper()
	since, ok := newM.masterSince(epoch)
	if !ok {
		t.Fatalf("broker %d never learned it is master of %d", newM.id, epoch)
	}
	if end := oldM.lastLeaseEnd(epoch - 1); !since.After(end) {
		t.Fatalf("broker %d became master of %d at %v, before broker %d's lease ended (%v)",
			newM.id, epoch, since, oldM.id, end)
	}
}

func TestClusterMasterStreamClosed(t *testing.T) {
	nodes := startCluster(t, nil)
	l, b1, b2 := twoReplicaGroup(t, nodes)
	b1.kill()
	waitMaster(t, l, "g1", 2, 2)
	waitFor(t, 10*time.Second, "b2 master of epoch 2 with a lease", func() error {
		if e, r := b2.state(); e != 2 || r != RoleMaster || !b2.hasLease() {
			return fmt.Errorf("b2 epoch %d role %s", e, r)
		}
		return nil
	})
	checkHandover(t, b1, b2, 2)
	if !b2.pushed(2, 2) {
		t.Fatal("the election was not pushed to b2")
	}
	if g := groupOf(l, "g1"); !slices.Equal(g.SSS, []int64{2}) || g.SSSEpoch != 3 {
		t.Fatalf("group after election %+v", g)
	}
	// b1 restarts: a slave of epoch 2.
	b1.restart()
	waitFor(t, 10*time.Second, "b1 slave of epoch 2", func() error {
		if e, r := b1.state(); e != 2 || r != RoleSlave {
			return fmt.Errorf("b1 epoch %d role %s", e, r)
		}
		return nil
	})
}

func TestClusterMasterSilent(t *testing.T) {
	nodes := startCluster(t, nil)
	l, b1, b2 := twoReplicaGroup(t, nodes)
	b1.pause(true) // SIGSTOP: streams stay open, beats stop
	waitMaster(t, l, "g1", 2, 2)
	waitFor(t, 10*time.Second, "b2 master of epoch 2", func() error {
		if e, r := b2.state(); e != 2 || r != RoleMaster {
			return fmt.Errorf("b2 epoch %d role %s", e, r)
		}
		return nil
	})
	checkHandover(t, b1, b2, 2)
	b1.pause(false) // SIGCONT: it learns it was replaced
	waitFor(t, 10*time.Second, "b1 slave of epoch 2", func() error {
		if e, r := b1.state(); e != 2 || r != RoleSlave {
			return fmt.Errorf("b1 epoch %d role %s", e, r)
		}
		if b1.hasLease() {
			return fmt.Errorf("b1 still leased")
		}
		return nil
	})
}

// A master that reports STARTING at its own epoch restarted: it is
// re-elected (the best candidate here: its offset is the highest) at a
// new epoch.
func TestClusterMasterRestartedIsReelected(t *testing.T) {
	nodes := startCluster(t, nil)
	l, b1, _ := twoReplicaGroup(t, nodes)
	b1.setOffset(100)
	b1.restart()
	waitMaster(t, l, "g1", 1, 2)
	waitFor(t, 10*time.Second, "b1 master of epoch 2 with a lease", func() error {
		if e, r := b1.state(); e != 2 || r != RoleMaster || !b1.hasLease() {
			return fmt.Errorf("b1 epoch %d role %s", e, r)
		}
		return nil
	})
}

func TestClusterFollowerAnswersNotLeader(t *testing.T) {
	nodes := startCluster(t, nil)
	_, b1, _ := twoReplicaGroup(t, nodes)
	var l, f *node
	waitFor(t, 10*time.Second, "a follower's answer", func() error {
		l = leader(t, nodes)
		f = without(nodes, l)[0]
		b := b1.lastBeat(indexOf(nodes, f))
		switch {
		case b == nil:
			return fmt.Errorf("none yet")
		case b.GetStatus().GetCode() != pb.Code_CONTROLLER_NOT_LEADER || b.GetLeader():
			return fmt.Errorf("status %v leader %v", b.GetStatus(), b.GetLeader())
		case b.GetLeaderId() != l.opts.ID:
			return fmt.Errorf("leader id %q, want %q", b.GetLeaderId(), l.opts.ID)
		case b.GetLeaseMs() != 0:
			return fmt.Errorf("a follower granted a lease")
		case b.GetGroup().GetMasterId() != 1 || b.GetGroup().GetMasterEpoch() != 1 ||
			!slices.Equal(b.GetGroup().GetSyncStateSet(), []int64{1, 2}):
			return fmt.Errorf("group %v", b.GetGroup())
		}
		return nil
	})
	// The follower records liveness too.
	if v := f.c.live.get(replicaKey{"g1", 1}, time.Now()); !v.alive || v.role != RoleMaster {
		t.Fatalf("follower's liveness of b1: %+v", v)
	}
	cl := dialController(t, f.addr)
	ar, err := cl.AlterSyncStateSet(tctx(t), &pb.AlterSyncStateSetRequest{BrokerName: "g1", MasterId: 1,
		MasterEpoch: 1, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{1}})
	if err != nil || ar.GetStatus().GetCode() != pb.Code_CONTROLLER_NOT_LEADER {
		t.Fatalf("AlterSyncStateSet on a follower: %v %v", ar, err)
	}
	er, err := cl.ElectMaster(tctx(t), &pb.ElectMasterRequest{BrokerName: "g1", Designated: 2})
	if err != nil || er.GetStatus().GetCode() != pb.Code_CONTROLLER_NOT_LEADER {
		t.Fatalf("ElectMaster on a follower: %v %v", er, err)
	}
	d, err := cl.DescribeController(tctx(t), &pb.DescribeControllerRequest{})
	if err != nil || d.GetLeaderId() != l.opts.ID || d.GetSelfId() != f.opts.ID || len(d.GetPeers()) != 3 ||
		len(d.GetGroups()) != 1 {
		t.Fatalf("DescribeController on a follower: %v %v", d, err)
	}
}

func TestClusterAlterSSSFencing(t *testing.T) {
	nodes := startCluster(t, nil)
	l, _, _ := twoReplicaGroup(t, nodes) // master 1, epoch 1, sss {1,2} epoch 2
	for _, tc := range []struct {
		name string
		req  *pb.AlterSyncStateSetRequest
		want pb.Code
	}{
		{"not the master", &pb.AlterSyncStateSetRequest{MasterId: 2, MasterEpoch: 1, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{2}}, pb.Code_CONTROLLER_FENCED},
		{"stale master epoch", &pb.AlterSyncStateSetRequest{MasterId: 1, MasterEpoch: 0, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{1}}, pb.Code_CONTROLLER_FENCED},
		{"stale sss epoch", &pb.AlterSyncStateSetRequest{MasterId: 1, MasterEpoch: 1, SyncStateSetEpoch: 1, NewSyncStateSet: []int64{1}}, pb.Code_CONTROLLER_FENCED},
		{"unknown member", &pb.AlterSyncStateSetRequest{MasterId: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{1, 2, 3}}, pb.Code_INVALID_PARAMETER},
		{"master left out", &pb.AlterSyncStateSetRequest{MasterId: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{2}}, pb.Code_INVALID_PARAMETER},
		{"shrink", &pb.AlterSyncStateSetRequest{MasterId: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{1}}, pb.Code_OK},
		{"replayed", &pb.AlterSyncStateSetRequest{MasterId: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, NewSyncStateSet: []int64{1}}, pb.Code_CONTROLLER_FENCED},
	} {
		tc.req.BrokerName = "g1"
		var resp *pb.AlterSyncStateSetResponse
		onLeader(t, nodes, func(cl pb.ControllerClient) (st *pb.Status, err error) {
			resp, err = cl.AlterSyncStateSet(tctx(t), tc.req)
			return resp.GetStatus(), err
		})
		if resp.GetStatus().GetCode() != tc.want {
			t.Fatalf("%s: %v, want %v", tc.name, resp.GetStatus(), tc.want)
		}
		if resp.GetGroup().GetBrokerName() != "g1" {
			t.Fatalf("%s: no group in the answer", tc.name)
		}
	}
	// A member that is not alive cannot be added.
	b3 := newFakeBroker(t, "g1", 3, grpcAddrs(nodes)...)
	b3.start()
	waitFor(t, 10*time.Second, "b3 registered", func() error {
		if groupOf(l, "g1").Replicas[3] == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	b3.kill()
	waitFor(t, 10*time.Second, "b3 dead", func() error {
		for _, n := range nodes {
			if n.c.live.get(replicaKey{"g1", 3}, time.Now()).alive {
				return fmt.Errorf("alive on %s", n.opts.ID)
			}
		}
		return nil
	})
	var resp *pb.AlterSyncStateSetResponse
	onLeader(t, nodes, func(cl pb.ControllerClient) (st *pb.Status, err error) {
		resp, err = cl.AlterSyncStateSet(tctx(t), &pb.AlterSyncStateSetRequest{BrokerName: "g1", MasterId: 1,
			MasterEpoch: 1, SyncStateSetEpoch: 3, NewSyncStateSet: []int64{1, 3}})
		return resp.GetStatus(), err
	})
	if resp.GetStatus().GetCode() != pb.Code_INVALID_PARAMETER {
		t.Fatalf("dead member: %v", resp.GetStatus())
	}
}

func TestClusterElectMasterDesignated(t *testing.T) {
	nodes := startCluster(t, nil)
	l, b1, b2 := twoReplicaGroup(t, nodes)
	b3 := newFakeBroker(t, "g1", 3, grpcAddrs(nodes)...)
	b3.start()
	waitFor(t, 10*time.Second, "b3 registered", func() error {
		if groupOf(l, "g1").Replicas[3] == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	electOn := func(req *pb.ElectMasterRequest) *pb.ElectMasterResponse {
		var resp *pb.ElectMasterResponse
		onLeader(t, nodes, func(cl pb.ControllerClient) (st *pb.Status, err error) {
			resp, err = cl.ElectMaster(tctx(t), req)
			return resp.GetStatus(), err
		})
		return resp
	}
	// The current master: a no-op.
	resp := electOn(&pb.ElectMasterRequest{BrokerName: "g1", Designated: 1})
	if resp.GetStatus().GetCode() != pb.Code_OK || resp.GetGroup().GetMasterEpoch() != 1 {
		t.Fatalf("designated current master: %v", resp)
	}
	// Outside the SSS: refused unless unclean.
	resp = electOn(&pb.ElectMasterRequest{BrokerName: "g1", Designated: 3})
	if resp.GetStatus().GetCode() != pb.Code_CONTROLLER_MASTER_NOT_AVAILABLE {
		t.Fatalf("designated outside the SSS: %v", resp)
	}
	// Switchover to b2: it waits for b1's lease.
	resp = electOn(&pb.ElectMasterRequest{BrokerName: "g1", Designated: 2})
	if resp.GetStatus().GetCode() != pb.Code_OK || resp.GetGroup().GetMasterId() != 2 || resp.GetGroup().GetMasterEpoch() != 2 {
		t.Fatalf("switchover: %v", resp)
	}
	waitFor(t, 10*time.Second, "b2 master, b1 slave of epoch 2", func() error {
		e2, r2 := b2.state()
		e1, r1 := b1.state()
		if e2 != 2 || r2 != RoleMaster || e1 != 2 || r1 != RoleSlave {
			return fmt.Errorf("b1 %d %s, b2 %d %s", e1, r1, e2, r2)
		}
		return nil
	})
	checkHandover(t, b1, b2, 2)
	// Unclean: b3, outside the SSS {2}.
	resp = electOn(&pb.ElectMasterRequest{BrokerName: "g1", Designated: 3, Unclean: true})
	if resp.GetStatus().GetCode() != pb.Code_OK || resp.GetGroup().GetMasterId() != 3 {
		t.Fatalf("unclean: %v", resp)
	}
	var unclean, admin float64
	for _, n := range nodes {
		unclean += promtest.ToFloat64(n.c.metrics.unclean)
		admin += promtest.ToFloat64(n.c.metrics.elections.WithLabelValues(reasonAdmin))
	}
	if unclean != 1 || admin != 2 {
		t.Fatalf("elections counted: unclean %v admin %v", unclean, admin)
	}
}
