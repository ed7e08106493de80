package replication

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// fakeHost is a Host that counts registrations.
type fakeHost struct{ regs atomic.Int64 }

func (h *fakeHost) Topics() ([]topic.Config, topic.DataVersion) { return nil, topic.DataVersion{} }
func (h *fakeHost) ReplaceTopics([]topic.Config, topic.DataVersion) ([]string, bool, error) {
	return nil, false, nil
}
func (h *fakeHost) DelayProgress() (delay.MasterProgress, bool) { return delay.MasterProgress{}, false }
func (h *fakeHost) OfferDelayProgress(delay.MasterProgress)     {}
func (h *fakeHost) Register()                                   { h.regs.Add(1) }
func (h *fakeHost) Registered() bool                            { return true }
func (h *fakeHost) TriggerRegistration()                        { h.regs.Add(1) }
func (h *fakeHost) StoreError(err error) error                  { return err }

// fakeController answers every beat with the group it is given; it
// grants a lease to a MASTER beat of the group's master and epoch unless
// noLease is set.
type fakeController struct {
	mu      sync.Mutex
	group   GroupState
	leaseMs int64
	noLease bool
	beats   []BrokerBeat
}

func (f *fakeController) set(g GroupState) {
	f.mu.Lock()
	f.group = g
	f.mu.Unlock()
}

func (f *fakeController) Heartbeat(ctx context.Context, _ string) (BeatStream, error) {
	return &fakeStream{f: f, ctx: ctx, out: make(chan ControllerBeat, 16)}, nil
}

func (f *fakeController) AlterSyncStateSet(context.Context, string, AlterSyncStateSetRequest) (GroupState, error) {
	return GroupState{}, errcode.Errorf(errcode.ControllerFenced, "no")
}

func (f *fakeController) ElectMaster(context.Context, string, ElectMasterRequest) (GroupState, error) {
	return GroupState{}, errcode.Errorf(errcode.ControllerMasterNotAvailable, "no")
}

func (f *fakeController) Close() error { return nil }

type fakeStream struct {
	f   *fakeController
	ctx context.Context
	out chan ControllerBeat
}

func (s *fakeStream) Send(b BrokerBeat) error {
	f := s.f
	f.mu.Lock()
	f.beats = append(f.beats, b)
	g := f.group
	ans := ControllerBeat{Seq: b.Seq, Leader: true, LeaderID: "n0", Group: &g}
	if !f.noLease && g.MasterID == b.ReplicaID && b.Role == RoleMaster.String() && b.Epoch == g.MasterEpoch {
		ans.LeaseMs = f.leaseMs
	}
	f.mu.Unlock()
	select {
	case s.out <- ans:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *fakeStream) Recv() (ControllerBeat, error) {
	select {
	case b := <-s.out:
		return b, nil
	case <-s.ctx.Done():
		return ControllerBeat{}, s.ctx.Err()
	}
}

func newControllerReplicator(t *testing.T, fc *fakeController, host *fakeHost) *Replicator {
	t.Helper()
	dir := t.TempDir()
	so := store.DefaultOptions(filepath.Join(dir, "store"))
	so.CommitLog.SegmentSize = 1 << 20
	so.MaxMessageSize = 64 << 10
	st, err := store.Open(so, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	offs, err := offsets.Load(filepath.Join(dir, "config", "consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.HAListenAddr = "127.0.0.1:0"
	opts.ControllerAddrs = []string{"ctl:1"}
	opts.ControllerHeartbeat = 20 * time.Millisecond
	r, err := New(Config{Options: opts, BrokerName: "b", BrokerID: 2, StoreDir: dir, ListenAddr: "127.0.0.1:0",
		Addr: "127.0.0.1:1", Store: st, Offsets: offs, Cluster: "c", Controllers: fc}, host, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The agent follows the leader: elected, it becomes master (id 0, epoch
// entry) and writes once the lease arrives; without renewals the lease
// runs out and writes stop; a group state of a lower epoch is ignored; a
// new master at a higher epoch makes it a slave with its replica id.
func TestAgentFollowsController(t *testing.T) {
	fc := &fakeController{leaseMs: 300}
	host := &fakeHost{}
	r := newControllerReplicator(t, fc, host)
	if r.Role() != RoleSlave || r.ID() != 2 {
		t.Fatalf("starts as %s id %d", r.Role(), r.ID())
	}
	if err := r.CheckWritable(); errcode.Of(err) != errcode.NotMaster {
		t.Fatalf("a slave is writable: %v", err)
	}

	fc.set(GroupState{BrokerName: "b", MasterID: 2, MasterEpoch: 1, SyncStateSet: []int64{2}, SyncStateSetEpoch: 1})
	waitUntil(t, "master with a lease", func() bool { return r.CheckWritable() == nil })
	if r.ID() != 0 || r.Epoch() != 1 {
		t.Fatalf("master id %d epoch %d", r.ID(), r.Epoch())
	}
	if e := r.epochs.Entries(); len(e) != 1 || e[0].Epoch != 1 || e[0].Start != 0 {
		t.Fatalf("epoch entries %v", e)
	}
	waitUntil(t, "registered as master", func() bool { return host.regs.Load() > 0 })
	info := r.Info()
	if info.Controller == nil || info.Controller.LeaseRemaining <= 0 || info.Controller.Leader != "n0" {
		t.Fatalf("status %+v", info.Controller)
	}

	// No more renewals: the lease runs out and writes stop, which the
	// role's followers learn through Changes.
	changes := r.Changes()
	fc.mu.Lock()
	fc.noLease = true
	fc.mu.Unlock()
	waitUntil(t, "the lease ran out", func() bool { return errcode.Of(r.CheckWritable()) == errcode.NotMaster })
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease ran out without a change signalled")
	}
	if r.Role() != RoleMaster {
		t.Fatalf("role %s", r.Role())
	}

	// A stale group state (lower epoch naming another master) is ignored.
	fc.set(GroupState{BrokerName: "b", MasterID: 3, MasterEpoch: 0, MasterHAAddr: "127.0.0.1:9"})
	time.Sleep(100 * time.Millisecond)
	if r.Role() != RoleMaster || r.Epoch() != 1 {
		t.Fatalf("acted on a lower epoch: %s at %d", r.Role(), r.Epoch())
	}

	// A newer master: slave, registered with the replica id.
	fc.set(GroupState{BrokerName: "b", MasterID: 3, MasterEpoch: 2, MasterAddr: "127.0.0.1:8", MasterHAAddr: "127.0.0.1:9",
		SyncStateSet: []int64{3}, SyncStateSetEpoch: 2})
	waitUntil(t, "slave of the new master", func() bool { return r.Role() == RoleSlave })
	if r.ID() != 2 || r.Epoch() != 2 || r.MasterHAAddr() != "127.0.0.1:9" {
		t.Fatalf("slave id %d epoch %d master %q", r.ID(), r.Epoch(), r.MasterHAAddr())
	}
	fc.mu.Lock()
	last := fc.beats[len(fc.beats)-1]
	fc.mu.Unlock()
	if last.ReplicaID != 2 || last.Cluster != "c" || last.BrokerName != "b" {
		t.Fatalf("beat %+v", last)
	}
	if err := r.CheckWritable(); errcode.Of(err) != errcode.NotMaster {
		t.Fatalf("a slave is writable: %v", err)
	}
}

// grant keeps the longest lease of the newest epoch.
func TestLeaseGrant(t *testing.T) {
	a := &agent{base: time.Now()}
	a.grant(2, time.Hour)
	a.grant(2, time.Minute) // shorter: ignored
	a.grant(1, 2*time.Hour) // older epoch: ignored
	if l := a.lease.Load(); l.epoch != 2 || l.until != time.Hour {
		t.Fatalf("lease %+v", l)
	}
	if a.leaseLeft(1) != 0 || a.leaseLeft(2) <= 0 {
		t.Fatal("lease of the wrong epoch")
	}
	a.grant(3, time.Millisecond)
	if l := a.lease.Load(); l.epoch != 3 {
		t.Fatalf("lease %+v", l)
	}
	time.Sleep(2 * time.Millisecond)
	if a.leaseLeft(3) != 0 {
		t.Fatal("an expired lease has time left")
	}
}
