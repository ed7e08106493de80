package controller

import (
	"fmt"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// without returns nodes less n.
func without(nodes []*node, n *node) []*node {
	var out []*node
	for _, m := range nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

// The leader dies while the master is healthy: a new leader takes over,
// keeps granting the master its lease, and elects nobody.
func TestClusterLeaderShutdownNoSpuriousElection(t *testing.T) {
	nodes := startCluster(t, nil)
	l, b1, _ := twoReplicaGroup(t, nodes)
	l.stop()
	rest := without(nodes, l)
	nl := leader(t, rest)
	if promtest.ToFloat64(nl.c.metrics.leader) != 1 {
		t.Fatal("leader gauge not set")
	}
	waitFor(t, 10*time.Second, "the new leader's grace period over, b1 leased by it", func() error {
		if d := time.Since(nl.c.leadership().since); d < nl.opts.grace()+4*nl.opts.ScanInterval {
			return fmt.Errorf("%v to go", nl.opts.grace()+4*nl.opts.ScanInterval-d)
		}
		if !b1.hasLease() {
			return fmt.Errorf("b1 has no lease")
		}
		return nil
	})
	for _, n := range rest {
		if g := groupOf(n, "g1"); g.MasterID != 1 || g.MasterEpoch != 1 {
			t.Fatalf("%s: spurious election: master %d epoch %d", n.opts.ID, g.MasterID, g.MasterEpoch)
		}
	}
	if e, r := b1.state(); e != 1 || r != RoleMaster {
		t.Fatalf("b1 epoch %d role %s", e, r)
	}
}

// The leader and the master die together: the new leader elects a new
// master, but not before its grace period (broker timeout + lease) is over.
func TestClusterLeaderAndMasterDie(t *testing.T) {
	nodes := startCluster(t, nil)
	l, b1, b2 := twoReplicaGroup(t, nodes)
	b1.kill()
	l.stop()
	rest := without(nodes, l)
	waitFor(t, 10*time.Second, "b2 master of epoch 2", func() error {
		if e, r := b2.state(); e != 2 || r != RoleMaster {
			return fmt.Errorf("b2 epoch %d role %s", e, r)
		}
		return nil
	})
	nl := leader(t, rest)
	since, _ := b2.masterSince(2)
	if min := nl.c.leadership().since.Add(nl.opts.grace()); since.Before(min) {
		t.Fatalf("elected at %v, within the new leader's grace period (until %v)", since, min)
	}
	checkHandover(t, b1, b2, 2)
}

// A controller's state survives its restart (raft-boltdb): a single node,
// then a follower of three.
func TestRestartKeepsState(t *testing.T) {
	o := testOptions("n0")
	o.InMemory = false
	o.Dir = t.TempDir()
	o.RaftListen = freeAddrs(t, 1)[0]
	n := startNode(t, o)
	leader(t, []*node{n})
	b1 := newFakeBroker(t, "g1", 1, n.addr)
	b1.start()
	waitMaster(t, n, "g1", 1, 1)
	b1.kill()
	n.stop()

	n = startNode(t, o)
	leader(t, []*node{n})
	if g := groupOf(n, "g1"); g.MasterID != 1 || g.MasterEpoch != 1 || g.Replicas[1] == nil {
		t.Fatalf("after restart: %+v", g)
	}
	// b1 restarts too, knowing epoch 1: it is elected again at epoch 2.
	b1 = newFakeBroker(t, "g1", 1, n.addr)
	b1.epoch = 1
	b1.start()
	waitMaster(t, n, "g1", 1, 2)
}

func TestClusterFollowerRestartKeepsState(t *testing.T) {
	nodes := startCluster(t, func(o *Options) {
		o.InMemory = false
		o.Dir = t.TempDir()
	})
	l, _, _ := twoReplicaGroup(t, nodes)
	f := without(nodes, l)[0]
	f.stop()
	f2 := startNode(t, f.opts)
	waitFor(t, 10*time.Second, "the restarted follower's state", func() error {
		g := groupOf(f2, "g1")
		if g.MasterID != 1 || g.MasterEpoch != 1 || len(g.SSS) != 2 {
			return fmt.Errorf("%+v", g)
		}
		return nil
	})
}

// A master whose streams close and reopen at once (within the stream
// grace) is not failed over.
func TestClusterStreamBlipIsNotAFailover(t *testing.T) {
	nodes := startCluster(t, nil)
	_, b1, _ := twoReplicaGroup(t, nodes)
	b1.blip()
	start := time.Now()
	wait := nodes[0].opts.StreamGrace + nodes[0].opts.Lease + 4*nodes[0].opts.ScanInterval
	waitFor(t, 10*time.Second, "b1 leased again, stream grace and lease over", func() error {
		if time.Since(start) < wait {
			return fmt.Errorf("%v to go", wait-time.Since(start))
		}
		if !b1.hasLease() {
			return fmt.Errorf("b1 has no lease")
		}
		return nil
	})
	for _, n := range nodes {
		if g := groupOf(n, "g1"); g.MasterID != 1 || g.MasterEpoch != 1 {
			t.Fatalf("%s: failed over after a blip: master %d epoch %d", n.opts.ID, g.MasterID, g.MasterEpoch)
		}
	}
}
