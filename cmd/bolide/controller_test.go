package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/nameserver"
)

// startControllerGroup starts a NameServer with an embedded controller and
// a broker group of replicas in controller mode with sync replication; it
// returns the NameServer's address and the brokers' addresses by replica
// id - 1.
func startControllerGroup(t *testing.T, replicas int) (string, []string) {
	t.Helper()
	co := controller.LoopbackOptions()
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = "off"
	no.Controller = &co
	ns, err := nameserver.New(no, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var brokers []*server.Server
	t.Cleanup(func() {
		for _, b := range brokers {
			_ = b.Close()
		}
		_ = ns.Close()
	})
	var addrs []string
	for i := range replicas {
		bo := broker.DefaultOptions(filepath.Join(root, fmt.Sprint("r", i+1)))
		bo.BrokerName = "broker-a"
		bo.BrokerID = int64(i + 1)
		bo.ListenAddr = "127.0.0.1:0"
		bo.NameServers = []string{ns.Addr()}
		bo.RegisterInterval = 500 * time.Millisecond
		bo.GossipAddr = "off"
		bo.Store.CommitLog.SegmentSize = 1 << 20
		bo.MaxMessageSize = 256 << 10
		bo.Store.ConsumeQueue.UnitsPerFile = 10_000
		bo.Store.Index.SlotCount = 10_000
		bo.Store.Index.MaxEntries = 40_000
		bo.Replication.Mode = broker.ReplicationSync
		bo.Replication.HAListenAddr = "127.0.0.1:0"
		bo.Replication.HeartbeatInterval = 100 * time.Millisecond
		bo.Replication.Timeout = time.Second
		bo.Replication.MetadataSyncInterval = 100 * time.Millisecond
		bo.Replication.ControllerAddrs = []string{ns.Addr()}
		bo.Replication.ControllerHeartbeat = 100 * time.Millisecond
		b, err := server.New(bo, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		brokers = append(brokers, b)
		addrs = append(addrs, b.Addr())
	}
	return ns.Addr(), addrs
}

// TestControllerStatusClusterListAndPromote: with a controller, controller
// status shows the leader, the group's master, epoch and sync state set
// and its replicas; cluster list and broker status add the replica id, the
// sync state set and the leader; broker promote asks the controller to
// elect the designated replica. Without a controller, controller status
// fails and says so.
func TestControllerStatusClusterListAndPromote(t *testing.T) {
	ns, addrs := startControllerGroup(t, 2)
	var st controllerJSON
	status := func() error {
		return cliJSON(ns, []string{"controller", "status"}, func(l []byte) error { return json.Unmarshal(l, &st) })
	}
	cluster.Poll(20*time.Second, func() error {
		if err := status(); err != nil {
			return err
		}
		if len(st.Groups) != 1 || st.Groups[0].MasterID == 0 || len(st.Groups[0].SyncStateSet) != 2 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if err := status(); err != nil {
		t.Fatal(err)
	}
	g := st.Groups[0]
	if st.Leader != "n0" || st.LeaderNameServer != ns || st.From != ns || len(st.Peers) != 1 || st.Peers[0].State != "leader" ||
		g.Broker != "broker-a" || g.Epoch != 1 || !slices.Equal(g.SyncStateSet, []int64{1, 2}) || len(g.Replicas) != 2 ||
		!g.Replicas[0].Alive || !g.Replicas[1].InSync {
		t.Fatalf("controller status %+v", st)
	}
	master, slave := g.MasterID, 3-g.MasterID
	if g.MasterAddr != addrs[master-1] {
		t.Fatalf("master %d at %s, want %s", master, g.MasterAddr, addrs[master-1])
	}
	code, out, errb := runCLI(t, "", "--namesrv", ns, "controller", "status")
	if code != 0 || !strings.Contains(out, "Leader:        n0") || !strings.Contains(out, "SYNC SET") ||
		!strings.Contains(out, "1,2") || !strings.Contains(out, addrs[slave-1]) {
		t.Fatalf("controller status (exit %d, %s):\n%s", code, errb, out)
	}

	// cluster list: the leader above the table, replica ids, the set.
	rows := map[int64]brokerJSON{}
	if err := cliJSON(ns, []string{"cluster", "list"}, func(l []byte) error {
		var r brokerJSON
		err := json.Unmarshal(l, &r)
		rows[r.ReplicaID] = r
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if m, s := rows[master], rows[slave]; len(rows) != 2 || !m.ControllerMode || m.BrokerID != 0 || m.Role != "MASTER" ||
		m.ControllerLeader != "n0" || s.BrokerID != slave || s.Role != "SLAVE" {
		t.Fatalf("cluster list rows %+v", rows)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "cluster", "list")
	if code != 0 || !strings.Contains(out, "Controller leader: n0 at NameServer "+ns) || !strings.Contains(out, "REPLICA") {
		t.Fatalf("cluster list (exit %d):\n%s", code, out)
	}

	// broker status: the controller-mode fields.
	var bs replicationJSON
	if err := cliJSON(ns, []string{"broker", "status", addrs[master-1]}, func(l []byte) error { return json.Unmarshal(l, &bs) }); err != nil {
		t.Fatal(err)
	}
	if !bs.ControllerMode || bs.ReplicaID != master || bs.ControllerLeader != "n0" || bs.Controller == nil ||
		bs.Controller.MasterID != master || len(bs.Epochs) == 0 {
		t.Fatalf("broker status %+v", bs)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "broker", "status", addrs[slave-1])
	if code != 0 || !strings.Contains(out, fmt.Sprintf("Replica id:      %d", slave)) || !strings.Contains(out, "Controller:      n0") {
		t.Fatalf("broker status (exit %d):\n%s", code, out)
	}

	// broker promote: a switchover to the slave, by the controller.
	args := []string{"broker", "promote", "--broker", addrs[slave-1], "--epoch", "7"}
	code, out, errb = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	checkOneLineError(t, args, code, out, errb, exitUsage, "the controller chooses the epoch")
	var pr promoteJSON
	cluster.Poll(20*time.Second, func() error {
		return cliJSON(ns, []string{"broker", "promote", "--broker", addrs[slave-1]}, func(l []byte) error { return json.Unmarshal(l, &pr) })
	})
	if pr.Mode != "controller" || pr.MasterID != slave || pr.Addr != addrs[slave-1] || pr.Epoch != 2 || pr.Broker != "broker-a" {
		t.Fatalf("promote %+v", pr)
	}
	cluster.Poll(20*time.Second, func() error {
		if err := status(); err != nil {
			return err
		}
		for _, r := range st.Groups[0].Replicas {
			if r.ID == master && r.Role != "SLAVE" || r.ID == slave && r.Role != "MASTER" {
				return fmt.Errorf("replicas %+v", st.Groups[0].Replicas)
			}
		}
		return nil
	})
	if g := st.Groups[0]; g.MasterID != slave || g.Epoch != 2 {
		t.Fatalf("after the switchover: %+v", g)
	}
	args = []string{"broker", "promote", "--broker", addrs[slave-1]}
	code, out, errb = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	checkOneLineError(t, args, code, out, errb, exitFailed, "already the master")

	// A NameServer without a controller is listed as such; with none, the
	// command fails.
	plain := cluster.Start(t, cluster.Options{}).NameServerAddrs()[0]
	code, out, errb = runCLI(t, "", "--namesrv", ns+","+plain, "controller", "status")
	if code != 0 || !strings.Contains(out, "no controller") || !strings.Contains(out, plain) {
		t.Fatalf("controller status with a plain NameServer (exit %d, %s):\n%s", code, errb, out)
	}
	args = []string{"controller", "status"}
	code, out, errb = runCLI(t, "", append([]string{"--namesrv", plain}, args...)...)
	checkOneLineError(t, args, code, out, errb, exitFailed, "no NameServer runs a controller")
}
