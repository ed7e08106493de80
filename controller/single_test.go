package controller

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// groupOf is the committed group as node n's FSM holds it.
func groupOf(n *node, name string) *Group {
	if g := n.c.fsm.group(name); g != nil {
		return g
	}
	return &Group{}
}

func waitMaster(t *testing.T, n *node, name string, id, epoch int64) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("master %d at epoch %d on %s", id, epoch, n.opts.ID), func() error {
		g := groupOf(n, name)
		if g.MasterID != id || g.MasterEpoch != epoch {
			return fmt.Errorf("master %d epoch %d sss %v", g.MasterID, g.MasterEpoch, g.SSS)
		}
		return nil
	})
}

func TestSingleNodeFirstElectionAndLease(t *testing.T) {
	n := startNode(t, testOptions("n0"))
	leader(t, []*node{n})
	b1 := newFakeBroker(t, "g1", 1, n.addr)
	b1.start()
	waitMaster(t, n, "g1", 1, 1)
	waitFor(t, 10*time.Second, "b1 holds a lease", func() error {
		if !b1.hasLease() {
			e, r := b1.state()
			return fmt.Errorf("epoch %d role %s", e, r)
		}
		return nil
	})
	b2 := newFakeBroker(t, "g1", 2, n.addr)
	b2.start()
	waitFor(t, 10*time.Second, "b2 registered, slave", func() error {
		g := groupOf(n, "g1")
		if g.Replicas[2] == nil {
			return fmt.Errorf("replicas %v", g.ReplicaIDs())
		}
		if e, r := b2.state(); e != 1 || r != RoleSlave {
			return fmt.Errorf("b2 epoch %d role %s", e, r)
		}
		return nil
	})
	g := groupOf(n, "g1")
	if g.MasterID != 1 || g.MasterEpoch != 1 || len(g.SSS) != 1 || g.SSS[0] != 1 || g.SSSEpoch != 1 {
		t.Fatalf("group %+v", g)
	}
	if b := b2.lastBeat(0); b.GetLeaseMs() != 0 || !b.GetLeader() || b.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("slave's answer %v", b)
	}
	// The master's address in the answer, the replicas with liveness.
	gs := b2.lastBeat(0).GetGroup()
	if gs.GetMasterAddr() != "addr-g1-1" || len(gs.GetReplicas()) != 2 || !gs.GetReplicas()[0].GetAlive() {
		t.Fatalf("group state %v", gs)
	}
}

func TestSingleNodeMasterKilledSlaveNotInSSS(t *testing.T) {
	n := startNode(t, testOptions("n0"))
	leader(t, []*node{n})
	b1 := newFakeBroker(t, "g1", 1, n.addr)
	b1.start()
	waitMaster(t, n, "g1", 1, 1)
	b2 := newFakeBroker(t, "g1", 2, n.addr)
	b2.start()
	waitFor(t, 10*time.Second, "b2 registered", func() error {
		if groupOf(n, "g1").Replicas[2] == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	waitFor(t, 10*time.Second, "grace over", func() error {
		if time.Since(n.c.leadership().since) < n.opts.grace() {
			return fmt.Errorf("in grace")
		}
		return nil
	})
	b1.kill()
	// b2 is not in the SSS: no master, the group is read-only.
	waitMaster(t, n, "g1", 0, 1)
	// b1 comes back (restarted): it is elected again, at epoch 2.
	b1.restart()
	waitMaster(t, n, "g1", 1, 2)
	waitFor(t, 10*time.Second, "b1 master of epoch 2 with a lease", func() error {
		if !b1.hasLease() {
			return fmt.Errorf("no lease")
		}
		return nil
	})
}

// A controller that lost its state meets a broker that knows epoch 5: the
// first election is at epoch 6.
func TestFirstElectionAboveKnownEpoch(t *testing.T) {
	n := startNode(t, testOptions("n0"))
	leader(t, []*node{n})
	b := newFakeBroker(t, "g1", 3, n.addr)
	b.epoch = 5
	b.start()
	waitMaster(t, n, "g1", 3, 6)
	waitFor(t, 10*time.Second, "b master of epoch 6 with a lease", func() error {
		if e, r := b.state(); e != 6 || r != RoleMaster || !b.hasLease() {
			return fmt.Errorf("epoch %d role %s", e, r)
		}
		return nil
	})
}

// TestCloseWhileApplying: Close waits for the proposals in flight before it
// stops Raft. Raft never answers a future it has committed but not yet
// applied when it shuts down, so a handler (or the leader loop's barrier)
// waiting on one kept Close waiting forever.
func TestCloseWhileApplying(t *testing.T) {
	c, err := New(testOptions("solo"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	// The first state change holds the FSM until released, so the second
	// proposal is committed and queued behind it when Close begins.
	applying, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	notify := c.fsm.onChange
	c.fsm.onChange = func(name string) {
		once.Do(func() { close(applying); <-release })
		notify(name)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a ready leader", func() bool { return c.leadership().ready })
	results := make(chan error, 2)
	propose := func(i int) {
		if !c.enter() { // as a handler does
			t.Fatal("closed")
		}
		go func() {
			defer c.wg.Done()
			_, err := c.propose(&Command{Op: opRegister, Name: fmt.Sprintf("b%d", i), Cluster: "c1", ID: 1,
				Addr: fmt.Sprintf("a:%d", i), HAAddr: "a:9"})
			results <- err
		}()
	}
	propose(0)
	<-applying
	first := c.raft.CommitIndex()
	propose(1)
	testutil.Eventually(t, 10*time.Second, "the second proposal committed", func() bool { return c.raft.CommitIndex() > first })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	time.Sleep(100 * time.Millisecond) // let Close begin
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waiting 20 s after the FSM was released")
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("proposal: %v", err)
		}
	}
}
