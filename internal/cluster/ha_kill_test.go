package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/faultproxy"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// haLoadSize is the size of the kill tests: 20 000 acknowledged messages
// and 3 kills by default, 100 000 and 10 with BOLIDE_HA_FULL=1.
func haLoadSize() (messages, runs int) {
	if os.Getenv("BOLIDE_HA_FULL") == "1" {
		return 100_000, 10
	}
	return 20_000, 3
}

const (
	haTopic   = "ha"
	haQueues  = 8
	haSenders = 16
)

// TestKillMasterSyncReplicationLosesNothing: with sync replication, a
// master killed with SIGKILL at a random moment and then cut back to its
// last durable offset (power loss) loses nothing it acknowledged: every
// acknowledged message is read back from the slave. The replication link
// goes through a fault proxy adding 1 ms each way.
func TestKillMasterSyncReplicationLosesNothing(t *testing.T) {
	t.Parallel()
	killMasterRuns(t, "sync", time.Millisecond)
}

// TestKillMasterAsyncReplicationLossBounded: with async replication the
// same faults lose at most what the replication lag reported just before
// the kill allows: every missing message lies past the slave's last
// acknowledged offset. The link adds 10 ms each way (and, through the
// proxy's one-chunk-per-delay forwarding, caps the stream at about
// 3 MiB/s), so the slave really lags.
func TestKillMasterAsyncReplicationLossBounded(t *testing.T) {
	t.Parallel()
	killMasterRuns(t, "async", 10*time.Millisecond)
}

func killMasterRuns(t *testing.T, mode string, delay time.Duration) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	n, runs := haLoadSize()
	ns := StartProc(t, "bolide-nameserver", "--listen", "127.0.0.1:0", "--gossip", "off")
	seed := uint64(time.Now().UnixNano())
	t.Logf("%d runs of at least %d acknowledged messages; seed %d", runs, n, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for run := 0; run < runs; run++ {
		killAt := n + rng.IntN(n/5)
		t.Run(fmt.Sprint("run", run), func(t *testing.T) {
			killMasterOnce(t, ns.Addr, mode, fmt.Sprintf("ha-%s-%d", mode, run), killAt, delay, mode == "sync" && run == 0)
		})
	}
}

func haBody(group string, i int) string { return fmt.Sprintf("%s-%08d", group, i) }

func killMasterOnce(t *testing.T, nsAddr, mode, group string, killAt int, delay time.Duration, failover bool) {
	const segSize = 8 << 20 // several segment ends per run
	master := StartBrokerProc(t, BrokerProcOptions{NameServer: nsAddr, Name: group, ID: 0, Replication: mode, SegmentSize: segSize})
	createTopicOn(t, master.Addr, haTopic, haQueues)
	mi, err := BrokerInfo(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, mi.Replication.HaAddr)
	proxy.SetDelay(delay)
	slave := StartBrokerProc(t, BrokerProcOptions{NameServer: nsAddr, Name: group, ID: 1, Replication: mode, SegmentSize: segSize,
		MasterHAAddr: proxy.Addr()})
	waitPairReady(t, master.Addr, slave.Addr)

	conn, err := dial(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bc := pb.NewBrokerClient(conn)
	ackedOff := make([]atomic.Int64, killAt+killAt/2+haSenders)
	for i := range ackedOff {
		ackedOff[i].Store(-1)
	}
	var (
		next, acked, failedBefore atomic.Int64
		killed                    atomic.Bool
		killNow                   = make(chan struct{})
		killOnce                  sync.Once
		wg                        sync.WaitGroup
		firstErr                  atomic.Pointer[error]
	)
	start := time.Now()
	for w := 0; w < haSenders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !killed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(ackedOff) {
					return
				}
				body := haBody(group, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := bc.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: haTopic, QueueId: int32(i % haQueues),
					Body: []byte(body), Properties: map[string]string{message.PropertyKeys: body}}}})
				cancel()
				if err == nil {
					err = wire.FromStatus(resp.Status)
				}
				if err != nil {
					if !killed.Load() {
						failedBefore.Add(1)
						firstErr.CompareAndSwap(nil, &err)
					}
					continue
				}
				ackedOff[i].Store(resp.Results[0].CommitLogOffset)
				if acked.Add(1) == int64(killAt) {
					killOnce.Do(func() { close(killNow) })
				}
			}
		}()
	}
	select {
	case <-killNow:
	case <-time.After(3 * time.Minute):
		killed.Store(true)
		wg.Wait()
		t.Fatalf("only %d of %d messages acknowledged in 3 minutes", acked.Load(), killAt)
	}
	// The replication state just before the kill.
	info, err := BrokerInfo(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	// The master's machine dies: what it had written to the network but the
	// slave had not received is lost with it (the proxy drops it), then the
	// process is killed.
	proxy.Blackhole(true)
	killed.Store(true)
	master.Kill()
	proxy.Cut()
	proxy.Blackhole(false)
	killedAt := time.Since(start)
	wg.Wait()
	if len(info.Replication.GetSlaves()) != 1 {
		t.Fatalf("master reported slaves %+v before the kill", info.Replication.GetSlaves())
	}
	before := info.Replication.Slaves[0]
	durable, err := DurableOffset(master.StoreDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := PowerLoss(master.StoreDir, durable); err != nil {
		t.Fatal(err)
	}

	// Everything acknowledged must be on the slave.
	present := readSlave(t, slave.Addr, haTopic, haQueues)
	var total, missing, allowed, extra int
	var minMissing int64 = -1
	for i := range ackedOff {
		off := ackedOff[i].Load()
		if off < 0 {
			if present[haBody(group, i)] {
				extra++ // sent, not acknowledged, replicated anyway
			}
			continue
		}
		total++
		if off >= before.AckOffset {
			allowed++
		}
		if !present[haBody(group, i)] {
			missing++
			if minMissing < 0 || off < minMissing {
				minMissing = off
			}
		}
	}
	var fe error
	if p := firstErr.Load(); p != nil {
		fe = *p
	}
	t.Logf("%s replication, HA link delayed %v: killed after %v with %d acknowledged (%d sends failed before the kill, first: %v); master durable up to %d; "+
		"lag before the kill: %d bytes, %d ms (slave acked %d, in sync %v); on the slave: %d of %d acknowledged missing "+
		"(the lag allows %d), %d unacknowledged present",
		mode, delay, killedAt.Round(time.Millisecond), total, failedBefore.Load(), fe, durable, before.LagBytes, before.LagMs,
		before.AckOffset, before.InSync, missing, total, allowed, extra)
	switch mode {
	case "sync":
		if missing > 0 {
			t.Fatalf("sync replication lost %d acknowledged messages (first at offset %d)", missing, minMissing)
		}
	default:
		if missing > allowed || (missing > 0 && minMissing < before.AckOffset) {
			t.Fatalf("async replication lost %d acknowledged messages, the first at offset %d, below the slave's acknowledged offset %d reported before the kill",
				missing, minMissing, before.AckOffset)
		}
	}
	if failover {
		failOver(t, nsAddr, master, slave, proxy)
	}
}

// failOver restarts the power-cut master: the slave, which holds more than
// the master kept, is refused as diverged and keeps its log; the operator
// promotes the slave and the old master is fenced; the new master refuses
// sync sends until it has a slave; the old master, restarted as a slave,
// rejoins without a wipe (its log is a prefix of the new master's) and
// ends byte-identical.
func failOver(t *testing.T, nsAddr string, master, slave *BrokerProc, proxy *faultproxy.Proxy) {
	si, err := BrokerInfo(slave.Addr)
	if err != nil {
		t.Fatal(err)
	}
	slaveEnd := si.CommitLogMaxOffset
	if durable, err := DurableOffset(master.StoreDir); err != nil || durable >= slaveEnd {
		t.Logf("the master kept %d bytes, the slave has %d: no divergence to show (%v)", durable, slaveEnd, err)
		return
	}
	master.Restart()
	mi, err := BrokerInfo(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetTarget(mi.Replication.HaAddr)
	if err := Poll(30*time.Second, func() error {
		si, err = BrokerInfo(slave.Addr)
		if err != nil {
			return err
		}
		if si.Replication.State != "DIVERGED" {
			return fmt.Errorf("slave state %s (%s)", si.Replication.State, si.Replication.LastError)
		}
		return nil
	}); err != nil {
		t.Fatalf("restarted master (log end %d) vs slave (log end %d): %v", mi.CommitLogMaxOffset, slaveEnd, err)
	}
	if si.CommitLogMaxOffset != slaveEnd {
		t.Fatalf("diverged slave's log moved from %d to %d", slaveEnd, si.CommitLogMaxOffset)
	}
	t.Logf("restarted master ends at %d, the slave at %d: slave refused and stopped: %s", mi.CommitLogMaxOffset, slaveEnd, si.Replication.LastError)
	conn, err := dial(slave.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pr, err := pb.NewBrokerHAClient(conn).Promote(context.Background(), &pb.PromoteRequest{BrokerName: si.BrokerName})
	if err == nil {
		err = wire.FromStatus(pr.Status)
	}
	if err != nil || pr.Epoch != 1 || pr.CommitLogMaxOffset != slaveEnd {
		t.Fatalf("promote: %v %+v", err, pr)
	}
	if err := Poll(10*time.Second, func() error {
		mi, err := BrokerInfo(master.Addr)
		if err != nil {
			return err
		}
		if mi.Role != "FENCED" {
			return fmt.Errorf("old master is %s", mi.Role)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	send := func(addr string) error {
		c, err := dial(addr)
		if err != nil {
			return err
		}
		defer c.Close()
		resp, err := pb.NewBrokerClient(c).Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{{Topic: haTopic, Body: []byte("after")}}})
		if err != nil {
			return err
		}
		return wire.FromStatus(resp.Status)
	}
	if err := send(master.Addr); !errors.Is(err, wire.ErrNotMaster) {
		t.Fatalf("send to the fenced old master: %v", err)
	}
	// Sync replication stays strict: the new master has no slave yet.
	if err := send(slave.Addr); !errors.Is(err, wire.ErrInSyncReplicasLacking) {
		t.Fatalf("send to the promoted slave without slaves of its own: %v", err)
	}
	t.Logf("slave promoted (epoch %d, log end %d); old master fenced", pr.Epoch, pr.CommitLogMaxOffset)
	// The old master's log is a prefix of the new master's (it lost only its
	// unflushed tail): restarted as a slave it joins without a wipe.
	master.Kill()
	rejoined := StartBrokerProc(t, BrokerProcOptions{NameServer: nsAddr, Name: si.BrokerName, ID: 1,
		StoreDir: master.StoreDir, Replication: "sync", SegmentSize: 8 << 20})
	if err := Poll(30*time.Second, func() error {
		ni, err := BrokerInfo(slave.Addr)
		if err != nil {
			return err
		}
		if ni.Replication.InSyncSlaves != 1 {
			return fmt.Errorf("new master has %d in-sync slaves", ni.Replication.InSyncSlaves)
		}
		return send(slave.Addr)
	}); err != nil {
		t.Fatalf("old master rejoining as a slave: %v", err)
	}
	ni, err := BrokerInfo(slave.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := Poll(10*time.Second, func() error {
		ri, err := BrokerInfo(rejoined.Addr)
		if err != nil {
			return err
		}
		if ri.CommitLogMaxOffset != ni.CommitLogMaxOffset {
			return fmt.Errorf("rejoined at %d, new master at %d", ri.CommitLogMaxOffset, ni.CommitLogMaxOffset)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n, err := CompareCommitLogs(CommitLogDir(slave.StoreDir), CommitLogDir(rejoined.StoreDir), 8<<20, ni.CommitLogMaxOffset)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("old master rejoined as a slave of the new master; %d bytes byte-identical", n)
}

// waitPairReady waits until the slave is in sync and has the topic.
func waitPairReady(t *testing.T, masterAddr, slaveAddr string) {
	t.Helper()
	err := Poll(30*time.Second, func() error {
		mi, err := BrokerInfo(masterAddr)
		if err != nil {
			return err
		}
		if mi.Replication.GetInSyncSlaves() != 1 {
			return fmt.Errorf("master has %d in-sync slaves", mi.Replication.GetInSyncSlaves())
		}
		conn, err := dial(slaveAddr)
		if err != nil {
			return err
		}
		defer conn.Close()
		tc, err := pb.NewBrokerClient(conn).GetTopicConfigs(context.Background(), &pb.GetTopicConfigsRequest{})
		if err != nil {
			return err
		}
		for _, c := range tc.Topics {
			if c.Name == haTopic {
				return nil
			}
		}
		return errors.New("slave does not have the topic yet")
	})
	if err != nil {
		t.Fatalf("replication pair not ready: %v", err)
	}
}

// readSlave waits until a broker has dispatched all its log, then pulls
// every queue of topic from offset 0 and returns the bodies found.
func readSlave(t *testing.T, addr, topic string, queues int32) map[string]bool {
	t.Helper()
	if err := Poll(30*time.Second, func() error {
		info, err := BrokerInfo(addr)
		if err != nil {
			return err
		}
		if info.DispatchBehindBytes != 0 {
			return fmt.Errorf("%d bytes not dispatched", info.DispatchBehindBytes)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bc := pb.NewBrokerClient(conn)
	present := make(map[string]bool)
	for q := int32(0); q < queues; q++ {
		off := int64(0)
		for {
			resp, err := bc.Pull(context.Background(), &pb.PullRequest{Topic: topic, QueueId: q, Offset: off, MaxMessages: 1024, CommitOffset: -1})
			if err == nil {
				err = wire.FromStatus(resp.Status)
			}
			if err != nil {
				t.Fatalf("pull %s/%d at %d from %s: %v", topic, q, off, addr, err)
			}
			if resp.PullStatus != pb.PullStatus_FOUND {
				break
			}
			for _, r := range resp.Records {
				m, err := message.Decode(r)
				if err != nil {
					t.Fatal(err)
				}
				if m.QueueOffset != off {
					t.Fatalf("%s/%d: record at queue offset %d where %d was expected", topic, q, m.QueueOffset, off)
				}
				present[string(m.Body)] = true
				off++
			}
			if resp.NextOffset != off {
				t.Fatalf("%s/%d: next offset %d after reading up to %d", topic, q, resp.NextOffset, off)
			}
		}
	}
	return present
}

// startProxy starts a fault proxy to target, closed at cleanup.
func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New("127.0.0.1:0", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(func() { _ = p.Close() })
	return p
}
