package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestDuplicateReplicaRefused: a second broker beating with the name and
// replica id of a live one, from another address, is answered
// INVALID_PARAMETER naming both addresses; nothing is committed and the
// live one stays master with its lease. Once the first is killed (its
// streams close), the second's beats are taken after the stream grace.
func TestDuplicateReplicaRefused(t *testing.T) {
	n := startNode(t, testOptions("n0"))
	leader(t, []*node{n})
	b1 := newFakeBroker(t, "g1", 1, n.addr)
	b1.start()
	waitMaster(t, n, "g1", 1, 1)

	dup := newFakeBroker(t, "g1", 1, n.addr)
	dup.addr = "addr-dup"
	dup.start()
	waitFor(t, 10*time.Second, "the duplicate is refused", func() error {
		b := dup.lastBeat(0)
		if b.GetStatus().GetCode() != pb.Code_INVALID_PARAMETER {
			return fmt.Errorf("answer %v", b)
		}
		msg := b.GetStatus().GetMessage()
		if !strings.Contains(msg, "addr-g1-1") || !strings.Contains(msg, "addr-dup") {
			return fmt.Errorf("message %q", msg)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // more beats from both
	g := groupOf(n, "g1")
	if g.MasterID != 1 || g.MasterEpoch != 1 || g.Replicas[1].Addr != "addr-g1-1" {
		t.Fatalf("group after the duplicate's beats %+v, replica 1 %+v", g, g.Replicas[1])
	}
	if e, r := b1.state(); e != 1 || r != RoleMaster || !b1.hasLease() {
		t.Fatalf("first broker: epoch %d role %s lease %v", e, r, b1.hasLease())
	}
	if b := dup.lastBeat(0); b.GetGroup() != nil || b.GetLeaseMs() != 0 {
		t.Fatalf("the duplicate was told %v", b)
	}

	b1.kill()
	waitFor(t, 10*time.Second, "the second broker takes the replica over", func() error {
		g := groupOf(n, "g1")
		if r := g.Replicas[1]; r == nil || r.Addr != "addr-dup" {
			return fmt.Errorf("replica 1 %+v", r)
		}
		if b := dup.lastBeat(0); b.GetStatus().GetCode() != pb.Code_OK {
			return fmt.Errorf("answer %v", b)
		}
		return nil
	})
}
