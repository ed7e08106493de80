package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/faultproxy"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/nameserver"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ctlRig is a NameServer with an embedded controller and one broker
// group in controller mode. Each broker reaches the controller through its
// own fault proxy (ctl[i]) and advertises its HA address through another
// (ha[i]), so a test can isolate a broker from the controller and from its
// slaves.
type ctlRig struct {
	t    *testing.T
	log  *zap.Logger
	ns   *nameserver.Server
	root string

	mu      sync.Mutex
	opts    []broker.Options
	brokers []*server.Server
	ctl     []*faultproxy.Proxy
	ha      []*faultproxy.Proxy
	// bound, when set, is called with each replica's server once it is
	// made (its port bound) and before it starts.
	bound func(i int, b *server.Server)
}

const ctlTopic = "failover-topic"

func startCtlRig(t *testing.T, replicas int, mode string, mutate func(*broker.Options)) *ctlRig {
	t.Helper()
	return startCtlRigBound(t, replicas, mode, mutate, nil)
}

// startCtlRigBound is startCtlRig with the rig's bound hook.
func startCtlRigBound(t *testing.T, replicas int, mode string, mutate func(*broker.Options), bound func(int, *server.Server)) *ctlRig {
	t.Helper()
	r := &ctlRig{t: t, log: zap.NewNop(), root: t.TempDir(), bound: bound}
	if testing.Verbose() {
		r.log = zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	}
	t.Cleanup(r.stop)
	co := controller.LoopbackOptions()
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = "off"
	no.ScanInterval = 500 * time.Millisecond
	no.Controller = &co
	ns, err := nameserver.New(no, r.log.Named("ns"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	r.ns = ns
	for i := 0; i < replicas; i++ {
		cp, err := faultproxy.New("127.0.0.1:0", ns.Addr(), zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		cp.Start()
		hp, err := faultproxy.New("127.0.0.1:0", "127.0.0.1:1", zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		hp.Start()
		bo := broker.DefaultOptions(filepath.Join(r.root, fmt.Sprintf("r%d", i+1)))
		bo.BrokerName = "broker-a"
		bo.BrokerID = int64(i + 1)
		bo.ListenAddr = "127.0.0.1:0"
		bo.NameServers = []string{ns.Addr()}
		bo.RegisterInterval = 500 * time.Millisecond
		bo.GossipAddr = "off"
		bo.Store.CommitLog.SegmentSize = 1 << 20
		bo.MaxMessageSize = 256 << 10
		bo.Store.ConsumeQueue.UnitsPerFile = 100_000
		bo.Store.Index.SlotCount = 100_000
		bo.Store.Index.MaxEntries = 400_000
		bo.AutoCreateTopic = true
		bo.DefaultQueueNums = 2
		bo.Replication.Mode = mode
		bo.Replication.HAListenAddr = "127.0.0.1:0"
		bo.Replication.HAAdvertiseAddr = hp.Addr()
		bo.Replication.HeartbeatInterval = 100 * time.Millisecond
		bo.Replication.Timeout = time.Second
		bo.Replication.SlaveTimeout = 2 * time.Second
		bo.Replication.MetadataSyncInterval = 100 * time.Millisecond
		bo.Replication.ControllerAddrs = []string{cp.Addr()}
		bo.Replication.ControllerHeartbeat = 100 * time.Millisecond
		if mutate != nil {
			mutate(&bo)
		}
		r.opts = append(r.opts, bo)
		r.brokers = append(r.brokers, nil)
		r.ctl = append(r.ctl, cp)
		r.ha = append(r.ha, hp)
	}
	for i := range replicas {
		r.start(i)
	}
	return r
}

// start starts (or restarts on the same address and directory) replica i.
func (r *ctlRig) start(i int) *server.Server {
	r.t.Helper()
	r.mu.Lock()
	bo := r.opts[i]
	r.mu.Unlock()
	var b *server.Server
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if b, err = server.New(bo, r.log.Named(fmt.Sprintf("r%d", i+1))); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("replica %d: %v", i+1, err)
	}
	r.ha[i].SetTarget(b.HAServerAddr())
	if r.bound != nil {
		r.bound(i, b)
	}
	if err := b.Start(); err != nil {
		r.t.Fatalf("replica %d: %v", i+1, err)
	}
	r.mu.Lock()
	r.brokers[i] = b
	r.opts[i].ListenAddr = b.ListenAddr()
	r.mu.Unlock()
	return b
}

// kill closes replica i.
func (r *ctlRig) kill(i int) {
	r.mu.Lock()
	b := r.brokers[i]
	r.brokers[i] = nil
	r.mu.Unlock()
	if b != nil {
		_ = b.Close()
	}
}

func (r *ctlRig) broker(i int) *server.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.brokers[i]
}

func (r *ctlRig) stop() {
	for i := range r.brokers {
		r.kill(i)
	}
	for _, p := range append(r.ctl, r.ha...) {
		_ = p.Close()
	}
	if r.ns != nil {
		_ = r.ns.Close()
	}
}

// master waits until exactly one running replica is a master holding a
// write lease at an epoch above minEpoch and returns its index.
func (r *ctlRig) master(minEpoch int64) int {
	r.t.Helper()
	idx := -1
	if err := Poll(15*time.Second, func() error {
		idx = -1
		for i := range r.brokers {
			b := r.broker(i)
			if b == nil || b.Role() != broker.RoleMaster || b.Epoch() <= minEpoch {
				continue
			}
			if err := b.Replication().CheckWritable(); err != nil {
				return err
			}
			if idx >= 0 {
				return fmt.Errorf("replicas %d and %d are both masters", idx+1, i+1)
			}
			idx = i
		}
		if idx < 0 {
			return fmt.Errorf("no writable master above epoch %d", minEpoch)
		}
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	return idx
}

// waitSSS waits until the master's sync state set holds n replicas.
func (r *ctlRig) waitSSS(m, n int) {
	r.t.Helper()
	if err := Poll(15*time.Second, func() error {
		c := r.broker(m).Replication().Info().Controller
		if c == nil || len(c.SyncStateSet) != n {
			return fmt.Errorf("sync state set %v, want %d replicas", c, n)
		}
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *ctlRig) send(i int, body string) error {
	b := r.broker(i)
	if b == nil {
		return errors.New("stopped")
	}
	conn, err := dial(b.Addr())
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = sendOne(pb.NewBrokerClient(conn), ctlTopic, 0, body)
	return err
}

// sendN sends n messages to replica i, all of which must succeed.
func (r *ctlRig) sendN(i, n int, prefix string) {
	r.t.Helper()
	b := r.broker(i)
	conn, err := dial(b.Addr())
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close()
	bc := pb.NewBrokerClient(conn)
	for k := 0; k < n; k++ {
		if _, err := sendOne(bc, ctlTopic, int32(k%2), fmt.Sprintf("%s-%d", prefix, k)); err != nil {
			r.t.Fatalf("send %s-%d to replica %d: %v", prefix, k, i+1, err)
		}
	}
}

// The master is killed: a slave of the sync state set becomes master at
// the next epoch and takes sends; the old master, restarted, follows it
// and ends with the same log.
func TestControllerFailoverAndRejoin(t *testing.T) {
	r := startCtlRig(t, 3, broker.ReplicationSync, nil)
	m := r.master(0)
	r.waitSSS(m, 3)
	r.sendN(m, 50, "first")
	epoch := r.broker(m).Epoch()

	// Every SSS member acknowledged every message: the slaves hold them.
	for i := range 3 {
		if i == m {
			continue
		}
		if got, want := r.broker(i).Store().CommitLog().MaxOffset(), r.broker(m).Store().CommitLog().MaxOffset(); got < want {
			t.Fatalf("replica %d at %d after sync sends, master at %d", i+1, got, want)
		}
	}

	// A topic created just before the master dies, without messages, is
	// on the new master: CreateTopic answers once the SSS members have it.
	conn, err := dial(r.broker(m).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewBrokerClient(conn).CreateTopic(context.Background(), &pb.CreateTopicRequest{
		Topic: &pb.TopicConfig{Name: "empty-topic", ReadQueueNums: 3, WriteQueueNums: 3, Perm: broker.PermReadWrite}})
	if err == nil {
		err = wire.FromStatus(resp.Status)
	}
	if err != nil {
		t.Fatal(err)
	}

	r.kill(m)
	n := r.master(epoch)
	if n == m {
		t.Fatal("the killed replica is master")
	}
	if !slices.ContainsFunc(r.broker(n).TopicConfigs(), func(tc broker.TopicConfig) bool { return tc.Name == "empty-topic" }) {
		t.Fatal("a topic created before the failover is not on the new master")
	}
	if got := r.broker(n).Epoch(); got != epoch+1 {
		t.Fatalf("new master's epoch %d, want %d", got, epoch+1)
	}
	r.waitSSS(n, 2)
	r.sendN(n, 50, "second")

	old := r.start(m)
	r.waitSSS(n, 3)
	r.sendN(n, 10, "third")
	caughtUp(t, r.broker(n), old)
	sameCommitLog(t, r.broker(n), old)
	if old.Role() != broker.RoleSlave || old.Epoch() != epoch+1 {
		t.Fatalf("old master: %s at epoch %d", old.Role(), old.Epoch())
	}
	info := old.Replication().Info()
	if len(info.Epochs) != 2 || info.Epochs[1].Epoch != epoch+1 {
		t.Fatalf("old master's epoch entries %v", info.Epochs)
	}
}

// An isolated master (no controller, no slaves) stops acknowledging once
// its lease runs out, before the controller elects another; its
// unreplicated tail is cut when it rejoins, and it ends byte-identical to
// the new master.
func TestControllerIsolatedMasterTruncates(t *testing.T) {
	r := startCtlRig(t, 3, broker.ReplicationSync, func(o *broker.Options) {
		o.Replication.SlaveTimeout = 300 * time.Millisecond
	})
	m := r.master(0)
	r.waitSSS(m, 3)
	r.sendN(m, 20, "before")
	epoch := r.broker(m).Epoch()

	r.ctl[m].Blackhole(true)
	r.ha[m].Blackhole(true)
	// Sends now fail (no acknowledgement from the slaves, then no lease),
	// but each one stored is an unreplicated tail.
	tail := 0
	var lastErr error
	if err := Poll(10*time.Second, func() error {
		err := r.send(m, fmt.Sprintf("tail-%d", tail))
		tail++
		if err == nil {
			return errors.New("an isolated master acknowledged a send")
		}
		lastErr = err
		if errcode.Of(err) != errcode.NotMaster {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("isolated master: %v", err)
	}
	if r.broker(m).Replication().Info().Controller.LeaseRemaining != 0 {
		t.Fatalf("lease left after NOT_MASTER: %v", lastErr)
	}
	isolatedEnd := r.broker(m).Store().CommitLog().MaxOffset()

	n := r.master(epoch)
	r.waitSSS(n, 2)
	r.sendN(n, 20, "after")
	if r.broker(n).Store().CommitLog().MaxOffset() >= isolatedEnd {
		// Make sure the test exercises a fork: the new master's log must
		// differ from the tail (it does; the lengths only matter for logs).
		t.Logf("new master at %d, isolated master at %d", r.broker(n).Store().CommitLog().MaxOffset(), isolatedEnd)
	}

	r.ha[m].Blackhole(false)
	r.ha[m].Cut()
	r.ctl[m].Blackhole(false)
	r.ctl[m].Cut()
	old := r.broker(m)
	if err := Poll(15*time.Second, func() error {
		if old.Role() != broker.RoleSlave {
			return fmt.Errorf("old master is %s", old.Role())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.sendN(n, 5, "later")
	caughtUp(t, r.broker(n), old)
	sameCommitLog(t, r.broker(n), old)
}

// A sync send is acknowledged only once every member of the sync state
// set holds it; a member cut off is removed from the set, then sends go
// on with the others.
func TestControllerSyncWaitsForEverySSSMember(t *testing.T) {
	r := startCtlRig(t, 3, broker.ReplicationSync, func(o *broker.Options) {
		o.Replication.SlaveTimeout = 5 * time.Second
	})
	m := r.master(0)
	r.waitSSS(m, 3)
	r.sendN(m, 10, "all")
	mb := r.broker(m)
	for i := range 3 {
		if i != m && r.broker(i).Store().CommitLog().MaxOffset() != mb.Store().CommitLog().MaxOffset() {
			t.Fatalf("replica %d lacks acknowledged messages", i+1)
		}
	}
	// Cut one slave off its master: the master drops it from the set once
	// the HA connection is gone, and sends are acknowledged by the other.
	s := (m + 1) % 3
	r.kill(s)
	r.waitSSS(m, 2)
	r.sendN(m, 10, "two")
	o := 3 - m - s
	if got, want := r.broker(o).Store().CommitLog().MaxOffset(), mb.Store().CommitLog().MaxOffset(); got != want {
		t.Fatalf("remaining member at %d, master at %d", got, want)
	}
	info := mb.Replication().Info().Controller
	if !slices.Contains(info.SyncStateSet, int64(o+1)) || info.ConfirmOffset <= 0 {
		t.Fatalf("controller status %+v", info)
	}
	// The status RPC shows the controller mode fields.
	conn, err := dial(mb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := pb.NewBrokerHAClient(conn).ReplicationStatus(context.Background(), &pb.ReplicationStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ri := st.GetReplication()
	if !ri.GetControllerMode() || ri.GetReplicaId() != int64(m+1) || len(ri.GetSyncStateSet()) != 2 || ri.GetSyncStateSetEpoch() < 2 ||
		ri.GetLeaseRemainingMs() <= 0 || ri.GetControllerLeader() == "" || ri.GetConfirmOffset() <= 0 || len(ri.GetEpochs()) != 1 {
		t.Fatalf("replication status %v", ri)
	}
	// A manual promotion of the remaining member goes through the
	// controller.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epoch := mb.Epoch()
	res, err := r.broker(o).Promote(ctx, broker.PromoteRequest{BrokerName: "broker-a"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch != epoch+1 {
		t.Fatalf("promoted at epoch %d, old master at %d", res.Epoch, epoch)
	}
	if got := r.master(epoch); got != o {
		t.Fatalf("master is replica %d, want %d", got+1, o+1)
	}
	r.waitSSS(o, 2)
	r.sendN(o, 5, "promoted")
}

// A topic created on the master just before it dies (before any metadata
// sync reached the slaves) survives the failover when it holds messages:
// the new master rebuilds its entry from its queues.
func TestControllerFailoverKeepsNewTopic(t *testing.T) {
	r := startCtlRig(t, 3, broker.ReplicationSync, func(o *broker.Options) {
		o.AutoCreateTopic = false
		o.Replication.MetadataSyncInterval = time.Minute
	})
	m := r.master(0)
	r.waitSSS(m, 3)
	conn, err := dial(r.broker(m).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewBrokerClient(conn).CreateTopic(context.Background(), &pb.CreateTopicRequest{
		Topic: &pb.TopicConfig{Name: ctlTopic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: broker.PermReadWrite}})
	if err == nil {
		err = wire.FromStatus(resp.Status)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.sendN(m, 4, "early")
	epoch := r.broker(m).Epoch()
	r.kill(m)
	n := r.master(epoch)
	r.waitSSS(n, 2)
	r.sendN(n, 4, "late")
	found := false
	for _, tc := range r.broker(n).TopicConfigs() {
		if tc.Name == ctlTopic && tc.WriteQueueNums == 2 {
			found = true
		}
	}
	if !found {
		t.Fatalf("topic %s not on the new master: %v", ctlTopic, r.broker(n).TopicConfigs())
	}
}
