package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// fakeBroker heartbeats to every controller like a broker in controller
// mode and follows the group state it is told (become master when named
// with a higher epoch, slave when someone else is). It records its leases
// so tests can check that no two masters ever held one at once.
type fakeBroker struct {
	t     *testing.T
	name  string
	id    int64
	addrs []string
	ccs   []*grpc.ClientConn
	// addr is the broker address its beats give ("addr-<name>-<id>" when
	// empty).
	addr string

	mu           sync.Mutex // mu protects the fields below
	epoch        int64
	role         string
	maxOffset    int64
	priority     int32
	paused       bool // SIGSTOP: streams open, no beats
	seq          uint64
	sent         map[uint64]time.Time
	leaseUntil   time.Time                  // of the current epoch
	leaseEnd     map[int64]time.Time        // epoch → latest lease end while master of it
	becameMaster map[int64]time.Time        // epoch → when it learned it is master
	last         map[int]*pb.ControllerBeat // controller index → last beat received
	pushes       []*pb.GroupState           // groups of the beats pushed (seq 0)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newFakeBroker(t *testing.T, name string, id int64, addrs ...string) *fakeBroker {
	t.Helper()
	b := &fakeBroker{t: t, name: name, id: id, addrs: addrs, role: RoleStarting,
		sent: map[uint64]time.Time{}, leaseEnd: map[int64]time.Time{}, becameMaster: map[int64]time.Time{},
		last: map[int]*pb.ControllerBeat{}}
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		b.ccs = append(b.ccs, cc)
	}
	t.Cleanup(func() {
		b.kill()
		for _, cc := range b.ccs {
			_ = cc.Close()
		}
	})
	return b
}

// start opens a stream to every controller (and reopens it when it fails).
func (b *fakeBroker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for i, cc := range b.ccs {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for ctx.Err() == nil {
				b.runStream(ctx, i, pb.NewControllerClient(cc))
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
}

// kill closes every stream at once (kill -9).
func (b *fakeBroker) kill() {
	if b.cancel != nil {
		b.cancel()
		b.wg.Wait()
		b.cancel = nil
	}
}

// restart kills the broker and starts it again as STARTING at the epoch
// it knew.
func (b *fakeBroker) restart() {
	b.kill()
	b.mu.Lock()
	b.role = RoleStarting
	b.leaseUntil = time.Time{}
	b.mu.Unlock()
	b.start()
}

// blip closes every stream and reopens them at once (a network blip: the
// process and its role stay).
func (b *fakeBroker) blip() {
	b.kill()
	b.start()
}

func (b *fakeBroker) pause(p bool) {
	b.mu.Lock()
	b.paused = p
	b.mu.Unlock()
}

func (b *fakeBroker) runStream(ctx context.Context, i int, cl pb.ControllerClient) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := cl.Heartbeat(sctx)
	if err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cb, err := st.Recv()
			if err != nil {
				cancel()
				return
			}
			b.onBeat(i, cb)
		}
	}()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if beat := b.nextBeat(); beat != nil {
			if err := st.Send(beat); err != nil {
				break
			}
		}
		select {
		case <-sctx.Done():
		case <-t.C:
			continue
		}
		break
	}
	cancel()
	<-done
}

func (b *fakeBroker) nextBeat() *pb.BrokerBeat {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused {
		return nil
	}
	b.seq++
	b.sent[b.seq] = time.Now()
	addr := b.addr
	if addr == "" {
		addr = fmt.Sprintf("addr-%s-%d", b.name, b.id)
	}
	return &pb.BrokerBeat{Cluster: "c1", BrokerName: b.name, ReplicaId: b.id, Addr: addr,
		HaAddr: fmt.Sprintf("ha-%s-%d", b.name, b.id), Epoch: b.epoch, Role: b.role, MaxOffset: b.maxOffset, Priority: b.priority, Seq: b.seq}
}

func (b *fakeBroker) onBeat(i int, cb *pb.ControllerBeat) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last[i] = cb
	if cb.GetSeq() == 0 {
		b.pushes = append(b.pushes, cb.GetGroup())
	}
	if g := cb.GetGroup(); g != nil {
		switch {
		case g.GetMasterId() == b.id && g.GetMasterEpoch() > b.epoch:
			b.epoch, b.role = g.GetMasterEpoch(), RoleMaster
			b.becameMaster[b.epoch] = time.Now()
			b.leaseUntil = time.Time{}
		case g.GetMasterId() != b.id && g.GetMasterEpoch() >= b.epoch:
			if g.GetMasterEpoch() > b.epoch || b.role == RoleMaster {
				b.epoch, b.role = g.GetMasterEpoch(), RoleSlave
			}
		}
	}
	if cb.GetLeaseMs() > 0 && b.role == RoleMaster && cb.GetGroup().GetMasterEpoch() == b.epoch {
		if sent, ok := b.sent[cb.GetSeq()]; ok {
			until := sent.Add(time.Duration(cb.GetLeaseMs()) * time.Millisecond)
			if until.After(b.leaseUntil) {
				b.leaseUntil = until
			}
			if until.After(b.leaseEnd[b.epoch]) {
				b.leaseEnd[b.epoch] = until
			}
		}
	}
}

// state returns the broker's epoch and role.
func (b *fakeBroker) state() (int64, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch, b.role
}

func (b *fakeBroker) hasLease() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.role == RoleMaster && time.Now().Before(b.leaseUntil)
}

func (b *fakeBroker) lastBeat(i int) *pb.ControllerBeat {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last[i]
}

func (b *fakeBroker) setOffset(off int64) {
	b.mu.Lock()
	b.maxOffset = off
	b.mu.Unlock()
}

// masterSince is when the broker learned it is master of epoch.
func (b *fakeBroker) masterSince(epoch int64) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.becameMaster[epoch]
	return t, ok
}

// lastLeaseEnd is the end of the last lease it held as master of epoch.
func (b *fakeBroker) lastLeaseEnd(epoch int64) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leaseEnd[epoch]
}

// pushed reports whether a pushed beat carried master id at epoch.
func (b *fakeBroker) pushed(id, epoch int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.pushes {
		if g.GetMasterId() == id && g.GetMasterEpoch() == epoch {
			return true
		}
	}
	return false
}
