package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// TestHarnessWithoutController runs the workload, the final read and the
// checkers against a group without controllers (a master and two slaves
// with sync replication, no fault): everything must pass and the replicas
// must be identical. BOLIDE_CHAOS_SMOKE=1 runs it (real processes).
func TestHarnessWithoutController(t *testing.T) {
	if os.Getenv("BOLIDE_CHAOS_SMOKE") == "" {
		t.Skip("set BOLIDE_CHAOS_SMOKE=1 (starts real processes)")
	}
	bins := binDir(t)
	dir := t.TempDir()
	c := &Cluster{cfg: DefaultConfig(dir), conns: map[string]*grpc.ClientConn{}}
	defer c.Close()
	ports, err := freePorts(7)
	if err != nil {
		t.Fatal(err)
	}
	ns := &NameServer{Name: "n1", Addr: hostPort(ports[0])}
	ns.Proc = newProc("n1", filepath.Join(bins, "bolide-nameserver"), dir, "--listen", ns.Addr, "--gossip", "off", "--admin-listen", "off")
	c.NameServers = append(c.NameServers, ns)
	if err := ns.Proc.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b := &Broker{Name: "b" + strconv.Itoa(i+1), ID: int64(i), Addr: hostPort(ports[1+2*i]), HAAddr: hostPort(ports[2+2*i])}
		b.StoreDir = filepath.Join(dir, b.Name)
		args := []string{"--listen", b.Addr, "--ha-listen", b.HAAddr, "--namesrv", ns.Addr, "--broker-name", "chaos",
			"--broker-id", strconv.Itoa(i), "--store-dir", b.StoreDir, "--segment-size", strconv.FormatInt(c.cfg.SegmentSize, 10),
			"--replication", "sync", "--in-sync-replicas", "2", "--register-interval", "500ms", "--gossip", "off", "--admin-listen", "off",
			"--ha-heartbeat", "200ms", "--metadata-sync-interval", "200ms"}
		if i > 0 {
			args = append(args, "--master-ha-addr", c.Brokers[0].HAAddr)
		}
		b.Proc = newProc(b.Name, filepath.Join(bins, "bolide-broker"), dir, args...)
		c.Brokers = append(c.Brokers, b)
		if err := b.Proc.Start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	m := c.Brokers[0]
	if err := poll(ctx, 30*time.Second, func() error {
		info, err := c.Info(ctx, m)
		if err != nil {
			return err
		}
		if info.GetReplication().GetInSyncSlaves() != 2 {
			return fmt.Errorf("in-sync slaves %d", info.GetReplication().GetInSyncSlaves())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := createTopicOn(ctx, c, m, "chaos", 8); err != nil {
		t.Fatal(err)
	}
	h := NewHistory()
	load, err := Workload{NameServers: c.NameServerAddrs(), Topic: "chaos", Hosts: c.HostName}.Start(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	snap, err := c.Snapshot(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	load.Stop()
	if err := poll(ctx, 30*time.Second, func() error {
		mi, err := c.Info(ctx, m)
		if err != nil {
			return err
		}
		for _, b := range c.Brokers[1:] {
			bi, err := c.Info(ctx, b)
			if err != nil {
				return err
			}
			if bi.GetCommitLogMaxOffset() != mi.GetCommitLogMaxOffset() {
				return fmt.Errorf("%s at %d, master at %d", b.Name, bi.GetCommitLogMaxOffset(), mi.GetCommitLogMaxOffset())
			}
		}
		if mi.GetDispatchBehindBytes() != 0 {
			return fmt.Errorf("dispatch behind")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fin, err := c.ReadFinal(ctx, m, "chaos", 8)
	if err != nil {
		t.Fatal(err)
	}
	atts := h.Attempts()
	loss := CheckLoss(atts, fin)
	dups := CheckDuplicates(atts, fin)
	order := CheckOrder(atts, fin)
	tm := CheckTwoMasters(atts, fin)
	reps, err := c.Replicas(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	div := CheckDivergence(reps, c.cfg.SegmentSize)
	t.Logf("%d attempts, %d acked, %d stored; snapshot %+v; dups %+v; order keys %d; two masters checked %d, epochs %v; compared %v",
		len(atts), loss.Acked, loss.Stored, snap, dups, order.Keys, tm.Checked, tm.Epochs, div.Compared)
	for _, v := range [][]string{loss.Violations(), dups.Violations(), order.Errors(), tm.Errors(), div.Errors} {
		if len(v) > 0 {
			t.Error(v)
		}
	}
	if loss.Acked < 100 || order.Keys != 32 || tm.Checked != loss.Acked || len(snap.SlaveAck) != 2 {
		t.Errorf("acked %d, keys %d, checked %d, slaves %v", loss.Acked, order.Keys, tm.Checked, snap.SlaveAck)
	}
	for _, a := range atts {
		if a.Outcome == Acked && a.Broker != "b1" {
			t.Fatalf("ack by %q", a.Broker)
		}
	}
}
