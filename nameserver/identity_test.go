package nameserver

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestBrokerIdentityHeld: over the gRPC service, a registration for a
// broker name and id that a reachable broker at another address holds is
// refused (INVALID_PARAMETER, naming both addresses and what to do) and
// changes nothing; a master with a higher epoch (a promoted slave) still
// replaces the holder; a holder that unregistered or stopped answering
// (its port closed) is taken over.
func TestBrokerIdentityHeld(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = "off" })
	s.ident.ttl = 0 // probe every time
	c := dial(t, s.Addr())
	listen := func() net.Listener {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	register := func(addr string, id, epoch int64) error {
		t.Helper()
		resp, err := c.RegisterBroker(ctx(t), &pb.RegisterBrokerRequest{Cluster: "C", BrokerName: "a", BrokerAddr: addr,
			BrokerId: id, Epoch: epoch, Topics: []*pb.TopicConfig{{Name: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}})
		if err == nil {
			err = wire.FromStatus(resp.GetStatus())
		}
		return err
	}
	holder := func(id int64) string {
		lb, _ := s.Routes().Holder("a", id)
		return lb.Addr
	}
	first, second := listen(), listen()
	a1, a2 := first.Addr().String(), second.Addr().String()

	if err := register(a1, 0, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 { // every attempt, not only the first
		err := register(a2, 0, 0)
		if wire.CodeOf(err) != pb.Code_INVALID_PARAMETER {
			t.Fatalf("duplicate registration: %v", err)
		}
		for _, want := range []string{a1, a2, "--broker-id", "held by a live broker"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("message %q does not say %q", err, want)
			}
		}
	}
	if got := holder(0); got != a1 {
		t.Fatalf("holder %q", got)
	}
	if rt, err := s.Routes().Route("orders"); err != nil || len(rt.Brokers[0].Addrs) != 1 || rt.Brokers[0].Addrs[0] != a1 {
		t.Fatalf("route %+v %v", rt, err)
	}
	// The holder refreshes as usual.
	if err := register(a1, 0, 0); err != nil {
		t.Fatal(err)
	}

	// Slaves too.
	third := listen()
	a3 := third.Addr().String()
	if err := register(a3, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := register(a2, 1, 0); wire.CodeOf(err) != pb.Code_INVALID_PARAMETER {
		t.Fatalf("duplicate slave: %v", err)
	}

	// A promoted slave (id 0, higher epoch) replaces the live master.
	if err := register(a3, 0, 1); err != nil {
		t.Fatalf("promoted slave: %v", err)
	}
	if got := holder(0); got != a3 {
		t.Fatalf("holder after the promotion %q", got)
	}
	// The old master is fenced, not told about identity.
	if err := register(a1, 0, 0); wire.CodeOf(err) != pb.Code_NOT_MASTER {
		t.Fatalf("old master: %v", err)
	}

	// A holder whose port is closed (killed, restarted elsewhere) is taken
	// over at once.
	third.Close()
	if err := register(a2, 0, 1); err != nil {
		t.Fatalf("taking over from an unreachable holder: %v", err)
	}
	if got := holder(0); got != a2 {
		t.Fatalf("holder after the takeover %q", got)
	}

	// A holder that unregistered leaves the identity free.
	if err := register(a2, 2, 0); err != nil { // a2 moves to id 2, id 0 is empty
		t.Fatal(err)
	}
	fourth := listen()
	a4 := fourth.Addr().String()
	if err := register(a4, 3, 0); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.UnregisterBroker(ctx(t), &pb.UnregisterBrokerRequest{Cluster: "C", BrokerName: "a", BrokerAddr: a4, BrokerId: 3}); err != nil || resp.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("unregister: %v %v", resp.GetStatus(), err)
	}
	if err := register(a1, 3, 1); err != nil {
		t.Fatalf("after the holder unregistered: %v", err)
	}
}

// TestIdentityProbeCached: a holder's reachability is probed once per TTL.
func TestIdentityProbeCached(t *testing.T) {
	g := newIdentityGuard()
	dials := 0
	g.dial = func(_ context.Context, addr string) error { dials++; return nil }
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		if !g.reachable("10.0.0.1:1", t0.Add(time.Duration(i)*100*time.Millisecond)) {
			t.Fatal("unreachable")
		}
	}
	if dials != 1 {
		t.Fatalf("%d dials", dials)
	}
	g.reachable("10.0.0.1:1", t0.Add(probeTTL))
	if dials != 2 {
		t.Fatalf("%d dials after the TTL", dials)
	}
	if !g.shouldLog("k", t0) || g.shouldLog("k", t0.Add(time.Second)) || !g.shouldLog("k", t0.Add(refusalLogEvery)) {
		t.Fatal("refusal log not rate-limited")
	}
}
