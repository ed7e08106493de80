package nameserver

import (
	"strings"
	"testing"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestEpochFencing: after a slave is promoted (registers id 0 with a
// higher epoch), the old master's registrations are refused with
// NOT_MASTER and change nothing; the new master serves the group's routes.
func TestEpochFencing(t *testing.T) {
	r := NewRoutes(time.Minute)
	old := reg("C", "a", 0, "10.0.0.1:10911", topics("orders:4")...)
	slave := reg("C", "a", 1, "10.0.0.2:10911")
	mustRegister(t, r, old, t0)
	res := mustRegister(t, r, slave, t0)
	if res.MasterAddr != old.Addr || res.MasterHAAddr != old.HAAddr {
		t.Fatalf("slave told master %q / %q", res.MasterAddr, res.MasterHAAddr)
	}
	// The slave is promoted: same address, id 0, epoch 1.
	promoted := reg("C", "a", 0, "10.0.0.2:10911", topics("orders:4")...)
	promoted.Epoch = 1
	res = mustRegister(t, r, promoted, t0.Add(time.Second))
	if res.Displaced != old.Addr {
		t.Fatalf("displaced %q", res.Displaced)
	}
	// The old master comes back with epoch 0: fenced.
	_, err := r.Register(old, t0.Add(2*time.Second))
	wantCode(t, err, pb.Code_NOT_MASTER)
	if !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("message %q does not say fenced", err)
	}
	rt, err := r.Route("orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Brokers[0].Addrs; len(got) != 1 || got[0] != promoted.Addr {
		t.Fatalf("addresses after the fenced registration: %v", got)
	}
	if _, ok := r.Live(old.Addr); ok {
		t.Fatal("fenced master is live")
	}
	if lb, _ := r.Live(promoted.Addr); lb.Epoch != 1 || lb.ID != 0 {
		t.Fatalf("new master live info %+v", lb)
	}
	// The old master may rejoin as a slave.
	old.ID = 1
	mustRegister(t, r, old, t0.Add(3*time.Second))
	// The fence survives the group emptying.
	r.Unregister("C", "a", promoted.Addr, 0)
	r.Unregister("C", "a", old.Addr, 1)
	old.ID = 0
	_, err = r.Register(old, t0.Add(4*time.Second))
	wantCode(t, err, pb.Code_NOT_MASTER)
	// Equal or higher epochs are accepted; negative ones are invalid.
	promoted.Epoch = 1
	mustRegister(t, r, promoted, t0.Add(5*time.Second))
	promoted.Epoch = 2
	mustRegister(t, r, promoted, t0.Add(6*time.Second))
	promoted.Epoch = -1
	_, err = r.Register(promoted, t0.Add(7*time.Second))
	wantCode(t, err, pb.Code_INVALID_PARAMETER)
	// Slaves are never fenced by epoch.
	s := reg("C", "a", 2, "10.0.0.3:10911")
	mustRegister(t, r, s, t0.Add(8*time.Second))
	// Epochs are per broker name.
	mustRegister(t, r, reg("C", "b", 0, "10.0.0.9:10911"), t0)
}
