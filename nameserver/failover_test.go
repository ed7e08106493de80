package nameserver

import (
	"testing"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestControllerFailoverRegistrations follows the registrations of a
// controller-mode group through a failover, over the NameServer's gRPC
// service: replicas 1 (master, registered as id 0) and 2 (slave, id 2) at
// epoch 1; the controller elects replica 2 at epoch 2. Its registration as
// id 0 replaces the group's master route at once (no wait for the old
// master to expire); the old master's late registration as master at epoch
// 1 is refused (NOT_MASTER) and leaves the route alone; its registration as
// a slave (its replica id 1, epoch 2 or more) is accepted and told the new
// master.
func TestControllerFailoverRegistrations(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = "off" })
	c := dial(t, s.Addr())
	const a, b = "10.0.0.1:10911", "10.0.0.2:10911"
	register := func(addr string, id, epoch int64) (*pb.RegisterBrokerResponse, error) {
		t.Helper()
		req := &pb.RegisterBrokerRequest{Cluster: "C", BrokerName: "g", BrokerAddr: addr, BrokerId: id, Epoch: epoch,
			HaAddr: addr + "1", Topics: []*pb.TopicConfig{{Name: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
			DataVersion: &pb.DataVersion{Timestamp: 1, Counter: epoch}}
		resp, err := c.RegisterBroker(ctx(t), req)
		if err == nil {
			err = wire.FromStatus(resp.GetStatus())
		}
		return resp, err
	}
	mustRegister := func(addr string, id, epoch int64) *pb.RegisterBrokerResponse {
		t.Helper()
		resp, err := register(addr, id, epoch)
		if err != nil {
			t.Fatalf("register %s as id %d at epoch %d: %v", addr, id, epoch, err)
		}
		return resp
	}
	route := func() map[int64]string {
		t.Helper()
		resp, err := c.GetRoute(ctx(t), &pb.GetRouteRequest{Topic: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.FromStatus(resp.GetStatus()); err != nil {
			t.Fatal(err)
		}
		if n := len(resp.GetRoute().GetBrokerDatas()); n != 1 {
			t.Fatalf("%d broker groups routed", n)
		}
		return resp.GetRoute().GetBrokerDatas()[0].GetBrokerAddrs()
	}
	wantRoute := func(want map[int64]string) {
		t.Helper()
		got := route()
		if len(got) != len(want) {
			t.Fatalf("route %v, want %v", got, want)
		}
		for id, addr := range want {
			if got[id] != addr {
				t.Fatalf("route %v, want %v", got, want)
			}
		}
	}

	mustRegister(a, 0, 1)
	if resp := mustRegister(b, 2, 1); resp.GetMasterAddr() != a {
		t.Fatalf("slave told master %q", resp.GetMasterAddr())
	}
	wantRoute(map[int64]string{0: a, 2: b})

	// Replica 2 becomes the master of epoch 2: the route changes at once.
	mustRegister(b, 0, 2)
	wantRoute(map[int64]string{0: b})

	// The old master, unaware, registers as master at epoch 1: refused.
	_, err := register(a, 0, 1)
	if wire.CodeOf(err) != pb.Code_NOT_MASTER {
		t.Fatalf("old master's registration at epoch 1: %v", err)
	}
	wantRoute(map[int64]string{0: b})

	// Told by the controller, it rejoins as a slave with its replica id,
	// at the new epoch: accepted, pointed at the new master.
	resp := mustRegister(a, 1, 2)
	if resp.GetMasterAddr() != b || resp.GetMasterHaAddr() != b+"1" {
		t.Fatalf("old master told master %q (HA %q)", resp.GetMasterAddr(), resp.GetMasterHaAddr())
	}
	wantRoute(map[int64]string{0: b, 1: a})
	// Later slave registrations, at the same or a higher epoch, too.
	mustRegister(a, 1, 2)
	mustRegister(a, 1, 3)
	wantRoute(map[int64]string{0: b, 1: a})

	// A second failover back to replica 1 at epoch 3: the master route
	// moves again, and replica 2 rejoins as a slave.
	mustRegister(a, 0, 3)
	wantRoute(map[int64]string{0: a})
	if _, err := register(b, 0, 2); wire.CodeOf(err) != pb.Code_NOT_MASTER {
		t.Fatalf("replica 2's registration as master at epoch 2: %v", err)
	}
	if resp := mustRegister(b, 2, 3); resp.GetMasterAddr() != a {
		t.Fatalf("replica 2 told master %q", resp.GetMasterAddr())
	}
	wantRoute(map[int64]string{0: a, 2: b})
}
