package replication

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// Timings of the controller agent.
const (
	// sssInterval is how often a master reviews its sync state set and
	// confirm offset.
	sssInterval = 50 * time.Millisecond
	// sssRetry is the wait after a refused sync state set proposal.
	sssRetry = 250 * time.Millisecond
	// ctlMinBackoff and ctlMaxBackoff bound the wait before a heartbeat
	// stream is opened again.
	ctlMinBackoff = 100 * time.Millisecond
	ctlMaxBackoff = time.Second
	// ctlCallTimeout bounds one AlterSyncStateSet or ElectMaster call.
	ctlCallTimeout = 3 * time.Second
	// becomeMasterTimeout bounds AdoptQueueOffsets when becoming master.
	becomeMasterTimeout = 30 * time.Second
)

// lease is a write lease granted by the controller leader: the master of
// epoch may accept writes until until (on the agent's monotonic clock).
type lease struct {
	epoch int64
	until time.Duration
}

// agent is the broker's part in controller mode: it beats to every
// controller, follows the leader's decisions (role, master, sync state
// set), holds the write lease and, on the master, maintains the sync state
// set and the confirm offset.
type agent struct {
	r    *Replicator
	cc   ControllerClient
	log  *zap.Logger
	me   int64 // replica id
	base time.Time

	seq   atomic.Uint64
	lease atomic.Pointer[lease]
	// leaseTimer fires when the lease runs out: a lease beginning or ending
	// changes whether the broker takes writes, which the role's followers
	// (Replicator.Changes: the master-only services) learn as a change.
	leaseTimer *time.Timer
	// confirm is the offset every sync state set member acknowledged
	// (master); confirmMu orders its raises with the dispatch limit.
	confirm   atomic.Int64
	confirmMu sync.Mutex

	roleChanges atomic.Int64
	// masterAddr and masterHAAddr name the master the controller told a
	// slave to follow.
	masterAddr   atomic.Pointer[string]
	masterHAAddr atomic.Pointer[string]

	kicks    []chan struct{} // per stream: beat now
	applyNow chan struct{}
	sssNow   chan struct{}

	mu         sync.Mutex
	leaderAddr string
	leaderID   string
	refusal    string      // the last refusal of a beat logged
	pending    *GroupState // newest leader state not applied yet
	group      GroupState  // last applied leader state
	haveGroup  bool
	// adding: members being added to the sync state set → the master's
	// CommitLog end when their addition started. They count for sync
	// acknowledgements from then on.
	adding map[int64]int64
	// sets is derived from group and adding at every change of either
	// (setsChangedLocked), so that sends read it without a lock or an
	// allocation.
	sets atomic.Pointer[replicaSets]
}

// replicaSets are the replicas besides the master that sync sends count:
// members, the committed sync state set; required, those and the members
// being added. Never modified once published.
type replicaSets struct {
	members, required []int64
}

func newAgent(r *Replicator, cc ControllerClient) *agent {
	a := &agent{
		r: r, cc: cc, log: r.log.Named("controller"), me: r.cfg.BrokerID, base: time.Now(),
		applyNow: make(chan struct{}, 1), sssNow: make(chan struct{}, 1), adding: map[int64]int64{},
	}
	for range r.opts.ControllerAddrs {
		a.kicks = append(a.kicks, make(chan struct{}, 1))
	}
	a.sets.Store(&replicaSets{})
	a.leaseTimer = time.AfterFunc(time.Hour, a.leaseEvent)
	a.leaseTimer.Stop()
	return a
}

// leaseEvent tells the role's followers that the lease began or ran out.
func (a *agent) leaseEvent() { a.r.state.changed.Notify() }

// start runs one stream per controller, the applier and the master's
// sync state set loop, until r.ctx is done.
func (a *agent) start() {
	for i, addr := range a.r.opts.ControllerAddrs {
		a.r.wg.Add(1)
		go a.streamLoop(addr, a.kicks[i])
	}
	a.r.wg.Add(2)
	go a.applyLoop()
	go a.sssLoop()
}

func (a *agent) now() time.Duration { return time.Since(a.base) }

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// beatNow makes every stream beat at once.
func (a *agent) beatNow() {
	for _, k := range a.kicks {
		poke(k)
	}
}

// streamLoop keeps a heartbeat stream open to one controller.
func (a *agent) streamLoop(addr string, kick chan struct{}) {
	defer a.r.wg.Done()
	backoff := ctlMinBackoff
	var lastErr string
	for a.r.ctx.Err() == nil {
		beats, err := a.session(addr, kick)
		a.mu.Lock()
		if a.leaderAddr == addr {
			a.leaderAddr, a.leaderID = "", ""
		}
		a.mu.Unlock()
		if a.r.ctx.Err() != nil {
			return
		}
		if err != nil && err.Error() != lastErr {
			a.log.Warn("controller heartbeat stream ended; reopening", zap.String("controller", addr), zap.Error(err))
			lastErr = err.Error()
		}
		if beats > 0 {
			backoff = ctlMinBackoff
		} else {
			backoff = min(backoff*2, ctlMaxBackoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-a.r.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one heartbeat stream until it fails; it reports how many
// answers it got.
func (a *agent) session(addr string, kick chan struct{}) (int, error) {
	ctx, cancel := context.WithCancel(a.r.ctx)
	defer cancel()
	st, err := a.cc.Heartbeat(ctx, addr)
	if err != nil {
		return 0, err
	}
	var (
		sentMu sync.Mutex
		sent   = map[uint64]time.Duration{}
		got    atomic.Int64
		heard  atomic.Int64 // a.now() at the last answer
	)
	heard.Store(int64(a.now()))
	// Every beat is answered: a stream silent this long is given up (its
	// connection may be dead without either side knowing).
	silence := max(5*a.r.opts.ControllerHeartbeat, 2*time.Second)
	recvErr := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			got.Add(1)
			heard.Store(int64(a.now()))
			var at time.Duration
			ok := false
			if b.Seq != 0 {
				sentMu.Lock()
				at, ok = sent[b.Seq]
				for s := range sent {
					if s <= b.Seq {
						delete(sent, s)
					}
				}
				sentMu.Unlock()
			}
			a.onBeat(addr, b, at, ok)
		}
	}()
	defer func() {
		cancel()
		<-done
	}()
	t := time.NewTicker(a.r.opts.ControllerHeartbeat)
	defer t.Stop()
	for {
		b := a.beat()
		sentMu.Lock()
		sent[b.Seq] = a.now()
		if len(sent) > 64 { // answers lost: forget the oldest
			oldest := b.Seq
			for s := range sent {
				oldest = min(oldest, s)
			}
			delete(sent, oldest)
		}
		sentMu.Unlock()
		if err := st.Send(b); err != nil {
			return int(got.Load()), err
		}
		select {
		case <-ctx.Done():
			return int(got.Load()), ctx.Err()
		case err := <-recvErr:
			return int(got.Load()), err
		case <-t.C:
		case <-kick:
		}
		if d := a.now() - time.Duration(heard.Load()); d > silence {
			return int(got.Load()), fmt.Errorf("no answer from the controller for %v", d.Round(time.Millisecond))
		}
	}
}

// beat is the broker's state as told to the controllers.
func (a *agent) beat() BrokerBeat {
	r := a.r
	b := BrokerBeat{
		Cluster: r.cfg.Cluster, BrokerName: r.cfg.BrokerName, ReplicaID: a.me, Addr: r.cfg.Addr, HAAddr: r.haAddr,
		Epoch: r.state.epoch(), Role: r.state.role().String(), MaxOffset: r.store.CommitLog().MaxOffset(),
		Priority: r.opts.ElectionPriority, Seq: a.seq.Add(1),
	}
	if r.state.role() == RoleMaster {
		b.ConfirmOffset = a.confirm.Load()
	}
	return b
}

// onBeat takes a controller's answer or push: only the leader's count.
func (a *agent) onBeat(addr string, b ControllerBeat, sentAt time.Duration, sent bool) {
	if b.Err != nil || !b.Leader {
		a.mu.Lock()
		if b.Err != nil && errcode.Of(b.Err) == errcode.InvalidParameter && b.Err.Error() != a.refusal {
			// A refused beat (this broker's name and replica id are held
			// by a live broker elsewhere): once per distinct message.
			a.refusal = b.Err.Error()
			a.log.Error("controller refused the heartbeat", zap.String("controller", addr), zap.Error(b.Err))
		}
		if a.leaderAddr == addr {
			a.leaderAddr = ""
		}
		if b.LeaderID != "" && a.leaderAddr == "" {
			a.leaderID = b.LeaderID
		}
		a.mu.Unlock()
		return
	}
	a.mu.Lock()
	a.leaderAddr, a.leaderID = addr, b.LeaderID
	a.mu.Unlock()
	g := b.Group
	if g == nil {
		return
	}
	if b.LeaseMs > 0 && sent && g.MasterID == a.me {
		a.grant(g.MasterEpoch, sentAt+time.Duration(b.LeaseMs)*time.Millisecond)
	}
	a.offer(*g)
}

// grant extends the lease of the master of epoch (never shortens it).
func (a *agent) grant(epoch int64, until time.Duration) {
	for {
		cur := a.lease.Load()
		if cur != nil && (cur.epoch > epoch || (cur.epoch == epoch && cur.until >= until)) {
			return
		}
		if a.lease.CompareAndSwap(cur, &lease{epoch: epoch, until: until}) {
			if a.leaseTimer != nil {
				now := a.now()
				if cur == nil || cur.epoch != epoch || cur.until <= now {
					a.leaseEvent() // a lease begins
				}
				a.leaseTimer.Reset(until - now)
			}
			return
		}
	}
}

// leaseLeft is how long the lease of the master of epoch still runs (0
// when it expired or is another epoch's).
func (a *agent) leaseLeft(epoch int64) time.Duration {
	l := a.lease.Load()
	if l == nil || l.epoch != epoch {
		return 0
	}
	return max(l.until-a.now(), 0)
}

// checkLease refuses a write on a master of epoch without a valid lease.
func (a *agent) checkLease(epoch int64) error {
	if a.r.state.role() != RoleMaster || a.r.state.epoch() != epoch {
		return errcode.Errorf(errcode.NotMaster, "broker %s/%d is no longer the master of epoch %d", a.r.cfg.BrokerName, a.me, epoch)
	}
	if a.leaseLeft(epoch) <= 0 {
		return errcode.Errorf(errcode.NotMaster, "broker %s/%d (master of epoch %d) holds no write lease from the controller leader",
			a.r.cfg.BrokerName, a.me, epoch)
	}
	return nil
}

// offer queues a leader's group state for the applier, keeping the newest
// by (master epoch, sync state set epoch).
func (a *agent) offer(g GroupState) {
	a.mu.Lock()
	if p := a.pending; p != nil && (p.MasterEpoch > g.MasterEpoch ||
		(p.MasterEpoch == g.MasterEpoch && p.SyncStateSetEpoch > g.SyncStateSetEpoch)) {
		a.mu.Unlock()
		return
	}
	a.pending = &g
	a.mu.Unlock()
	poke(a.applyNow)
}

func (a *agent) applyLoop() {
	defer a.r.wg.Done()
	for {
		select {
		case <-a.r.ctx.Done():
			return
		case <-a.applyNow:
		}
		a.mu.Lock()
		p := a.pending
		a.pending = nil
		a.mu.Unlock()
		if p != nil {
			a.apply(*p)
		}
	}
}

// apply follows the leader's group state. Transitions are serialised
// under r.mu and never act on an epoch below the broker's.
func (a *agent) apply(g GroupState) {
	r := a.r
	r.mu.Lock()
	if r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	known, role := r.state.epoch(), r.state.role()
	changed, master := false, false
	switch {
	case g.MasterEpoch < known:
		// Never act on an epoch below the one known.
	case g.MasterID == a.me && role == RoleMaster && g.MasterEpoch == known:
		a.adoptSSS(g)
	case g.MasterID == a.me && g.MasterEpoch > known:
		changed = a.becomeMasterLocked(g)
		master = changed
	case g.MasterID == a.me:
		// Named master of the epoch this broker knows, but not master (it
		// restarted, or was fenced): the controller treats that as a dead
		// master and elects again with a new epoch.
	case g.MasterID == 0:
		changed = a.noMasterLocked(g)
	default:
		changed = a.becomeSlaveLocked(g)
	}
	r.mu.Unlock()
	if !changed {
		return
	}
	a.beatNow()
	if master {
		// The lease comes with the answer to the first MASTER beat: wait
		// for it (briefly) so that the NameServers route clients to a
		// master that takes writes.
		a.waitLease(g.MasterEpoch, max(4*r.opts.ControllerHeartbeat, time.Second))
	}
	r.host.TriggerRegistration()
}

// waitLease waits until the master of epoch holds a lease, at most d.
func (a *agent) waitLease(epoch int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for a.leaseLeft(epoch) <= 0 && a.r.state.epoch() == epoch && time.Now().Before(deadline) {
		select {
		case <-a.r.ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// becomeMasterLocked makes the broker the master of g.MasterEpoch: stop
// the HA client, make the queue offsets follow the ConsumeQueues, append
// the epoch entry, take the role (registration id 0) and the epoch, adopt
// the sync state set. Writes open once a lease arrives. r.mu is held.
func (a *agent) becomeMasterLocked(g GroupState) bool {
	r := a.r
	prevRole, prevID, known := r.state.role(), r.state.id(), r.state.epoch()
	if c := r.client; c != nil {
		r.client = nil
		_ = c.Close()
	}
	restart := func() {
		if prevRole == RoleSlave {
			if err := r.startClientLocked(); err != nil {
				r.log.Error("restart replication after a failed take-over", zap.Error(err))
			}
		}
	}
	a.setDispatchLimit(noDispatchLimit)
	ctx, cancel := context.WithTimeout(r.ctx, becomeMasterTimeout)
	err := r.store.AdoptQueueOffsets(ctx)
	cancel()
	if err != nil {
		a.log.Error("cannot become master: the queues do not follow the log", zap.Int64("epoch", g.MasterEpoch), zap.Error(err))
		restart()
		return false
	}
	end := r.store.CommitLog().MaxOffset()
	// Entries copied from a former master may start beyond this log's end
	// (a lagging slave elected uncleanly): they describe bytes it never got.
	if err := r.epochs.TruncateTo(end); err != nil {
		a.log.Error("cannot become master: the epoch entries were not cut at the log's end", zap.Int64("epoch", g.MasterEpoch), zap.Error(err))
		restart()
		return false
	}
	if prevRole == RoleMaster {
		// Re-elected at a new epoch: slaves learn epoch entries only at the
		// handshake, so they must handshake again.
		r.srv.DropSlaves()
	}
	if err := r.epochs.Append(ha.EpochEntry{Epoch: g.MasterEpoch, Start: end}); err != nil {
		a.log.Error("cannot become master: the epoch entry was not saved", zap.Int64("epoch", g.MasterEpoch), zap.Error(err))
		restart()
		return false
	}
	a.confirm.Store(end)
	if tr, ok := r.host.(TopicRecoverer); ok {
		if names := tr.RecoverTopics(); len(names) > 0 {
			a.log.Warn("topics recovered from the queues (created on the old master after the last metadata sync)",
				zap.Strings("topics", names))
		}
	}
	if err := r.state.set(RoleMaster, 0, g.MasterEpoch); err != nil {
		a.log.Error("persist the master role", zap.Error(err))
	}
	a.mu.Lock()
	a.group, a.haveGroup = g, true
	clear(a.adding)
	a.setsChangedLocked()
	a.mu.Unlock()
	a.masterAddr.Store(nil)
	a.masterHAAddr.Store(nil)
	a.roleChanges.Add(1)
	a.log.Warn("BECAME MASTER (elected by the controller)", zap.Int64("epoch", g.MasterEpoch), zap.Int64("previousEpoch", known),
		zap.Stringer("previousRole", prevRole), zap.Int64("previousId", prevID), zap.Int64("commitLogMaxOffset", end),
		zap.Int64s("syncStateSet", g.SyncStateSet))
	a.r.srv.Wake()
	poke(a.sssNow)
	return true
}

// becomeSlaveLocked makes the broker a slave of g's master (g.MasterEpoch
// >= its epoch): drop its own slaves if master, take the role
// (registration id = replica id) and the epoch, point the HA client at the
// master and reconnect now. r.mu is held.
func (a *agent) becomeSlaveLocked(g GroupState) bool {
	r := a.r
	role, known := r.state.role(), r.state.epoch()
	prevHA := ""
	if p := a.masterHAAddr.Load(); p != nil {
		prevHA = *p
	}
	if role == RoleSlave && g.MasterEpoch == known && prevHA == g.MasterHAAddr && r.client != nil && !clientStopped(r.client) {
		a.setMaster(g)
		return false
	}
	if role != RoleSlave {
		r.srv.DropSlaves()
		a.lease.Store(nil)
	}
	a.setMaster(g)
	if err := r.state.set(RoleSlave, a.me, max(g.MasterEpoch, known)); err != nil {
		a.log.Error("persist the slave role", zap.Error(err))
	}
	a.setDispatchLimit(noDispatchLimit)
	a.mu.Lock()
	a.group, a.haveGroup = g, true
	clear(a.adding)
	a.setsChangedLocked()
	a.mu.Unlock()
	switch {
	case r.client == nil:
		if err := r.startClientLocked(); err != nil {
			a.log.Error("start replicating from the new master", zap.Error(err))
		}
	case clientStopped(r.client):
		_ = r.client.Close()
		r.client = nil
		if err := r.startClientLocked(); err != nil {
			a.log.Error("start replicating from the new master", zap.Error(err))
		}
	default:
		r.client.Reconnect()
	}
	r.meta.trigger()
	if role != RoleSlave || prevHA != g.MasterHAAddr {
		a.roleChanges.Add(1)
	}
	a.log.Warn("following the master the controller named", zap.Int64("masterId", g.MasterID), zap.String("masterHA", g.MasterHAAddr),
		zap.Int64("epoch", g.MasterEpoch), zap.Stringer("previousRole", role), zap.Int64("previousEpoch", known))
	return true
}

// noMasterLocked handles a group without a master (no candidate): a master
// of an epoch that is not the controller's any more steps down; a slave
// waits. r.mu is held.
func (a *agent) noMasterLocked(g GroupState) bool {
	r := a.r
	role, known := r.state.role(), r.state.epoch()
	a.mu.Lock()
	a.group, a.haveGroup = g, true
	a.setsChangedLocked()
	a.mu.Unlock()
	a.masterAddr.Store(nil)
	a.masterHAAddr.Store(nil)
	if role == RoleSlave {
		if g.MasterEpoch > known {
			_ = r.state.sawEpoch(g.MasterEpoch)
		}
		return false
	}
	r.srv.DropSlaves()
	a.lease.Store(nil)
	if err := r.state.set(RoleSlave, a.me, max(g.MasterEpoch, known)); err != nil {
		a.log.Error("persist the slave role", zap.Error(err))
	}
	a.setDispatchLimit(noDispatchLimit)
	if r.client == nil {
		if err := r.startClientLocked(); err != nil {
			a.log.Error("start the replication client", zap.Error(err))
		}
	}
	a.roleChanges.Add(1)
	a.log.Warn("stepped down: the controller names no master for the group", zap.Int64("epoch", g.MasterEpoch))
	return true
}

func (a *agent) setMaster(g GroupState) {
	addr, haAddr := g.MasterAddr, g.MasterHAAddr
	a.masterAddr.Store(&addr)
	a.masterHAAddr.Store(&haAddr)
}

func clientStopped(c *ha.Client) bool {
	switch c.Status().State {
	case ha.StateStopped, ha.StateDiverged, ha.StateClosed:
		return true
	}
	return false
}

// adoptSSS takes the sync state set of a state of the broker's own
// mastership unless it is older than the one held.
func (a *agent) adoptSSS(g GroupState) {
	a.mu.Lock()
	if a.haveGroup && a.group.MasterEpoch == g.MasterEpoch && a.group.SyncStateSetEpoch > g.SyncStateSetEpoch {
		a.mu.Unlock()
		return
	}
	old := a.group.SyncStateSet
	a.group, a.haveGroup = g, true
	for _, id := range g.SyncStateSet {
		delete(a.adding, id)
	}
	a.setsChangedLocked()
	a.mu.Unlock()
	if !slices.Equal(old, g.SyncStateSet) {
		a.log.Info("sync state set", zap.Int64s("syncStateSet", g.SyncStateSet), zap.Int64("epoch", g.SyncStateSetEpoch))
	}
	a.r.srv.Wake()
}

// members is the committed sync state set without the master (not to be
// modified).
func (a *agent) members() []int64 { return a.sets.Load().members }

// required is the replicas a sync send waits for: the committed sync
// state set and the members being added, without the master (not to be
// modified).
func (a *agent) required() []int64 { return a.sets.Load().required }

// setsChangedLocked publishes the replica sets after a change of group or
// adding. a.mu is held.
func (a *agent) setsChangedLocked() {
	var members []int64
	for _, id := range a.group.SyncStateSet {
		if id != a.me {
			members = append(members, id)
		}
	}
	required := slices.Clone(members)
	for id := range a.adding {
		if !slices.Contains(required, id) && id != a.me {
			required = append(required, id)
		}
	}
	a.sets.Store(&replicaSets{members: members, required: required})
}

// sssLoop maintains the master's sync state set and confirm offset.
func (a *agent) sssLoop() {
	defer a.r.wg.Done()
	t := time.NewTicker(sssInterval)
	defer t.Stop()
	var lastErr string
	var retryAt time.Time // after a refused proposal
	for {
		select {
		case <-a.r.ctx.Done():
			return
		case <-t.C:
		case <-a.sssNow:
		}
		if a.r.state.role() != RoleMaster {
			continue
		}
		a.updateConfirm()
		if time.Now().Before(retryAt) {
			continue
		}
		err := a.reviewSSS()
		switch {
		case err != nil && err.Error() != lastErr:
			a.log.Warn("sync state set change not accepted", zap.Error(err))
			lastErr = err.Error()
		case err == nil:
			lastErr = ""
		}
		if err != nil {
			retryAt = time.Now().Add(sssRetry)
		}
	}
}

// reviewSSS proposes a new sync state set when a member dropped or
// stopped being in sync, or a connected in-sync slave caught up with the
// master's end taken when its addition started.
func (a *agent) reviewSSS() error {
	r := a.r
	epoch := r.state.epoch()
	slaves := map[int64]ha.SlaveStatus{}
	for _, s := range r.srv.Slaves() {
		slaves[s.BrokerID] = s
	}
	end := r.store.CommitLog().MaxOffset()
	a.mu.Lock()
	if !a.haveGroup || a.group.MasterEpoch != epoch || a.group.MasterID != a.me {
		a.mu.Unlock()
		return nil
	}
	g := a.group
	next := []int64{a.me}
	changed := false
	for _, id := range g.SyncStateSet {
		if id == a.me {
			continue
		}
		if s, ok := slaves[id]; ok && s.Connected && s.InSync {
			next = append(next, id)
		} else {
			changed = true
		}
	}
	if !slices.Contains(g.SyncStateSet, a.me) {
		changed = true
	}
	added := false
	for id, s := range slaves {
		if id == a.me || slices.Contains(g.SyncStateSet, id) {
			continue
		}
		if !s.Connected || !s.InSync {
			delete(a.adding, id)
			continue
		}
		start, ok := a.adding[id]
		if !ok {
			start = end
			a.adding[id] = start
			added = true
		}
		if s.AckOffset >= start && a.r.metadataCaughtUp(id) {
			next = append(next, id)
			changed = true
		}
	}
	a.setsChangedLocked()
	a.mu.Unlock()
	if added {
		r.srv.Wake()
	}
	if !changed {
		return nil
	}
	slices.Sort(next)
	req := AlterSyncStateSetRequest{BrokerName: r.cfg.BrokerName, MasterID: a.me, MasterEpoch: epoch,
		SyncStateSetEpoch: g.SyncStateSetEpoch, NewSyncStateSet: next}
	ng, err := a.callLeader(func(ctx context.Context, addr string) (GroupState, error) {
		return a.cc.AlterSyncStateSet(ctx, addr, req)
	})
	if err != nil {
		return fmt.Errorf("propose sync state set %v (epoch %d): %w", next, g.SyncStateSetEpoch, err)
	}
	a.offer(ng)
	return nil
}

// updateConfirm sets the confirm offset to the smallest acknowledgement
// of the sync state set's members (the master's end when alone).
func (a *agent) updateConfirm() {
	r := a.r
	members := a.members()
	end := r.store.CommitLog().MaxOffset()
	if len(members) == 0 {
		a.raiseConfirm(end, true)
		return
	}
	ack := r.srv.AckedBy(members)
	if ack < 0 {
		return
	}
	a.raiseConfirm(min(ack, end), false)
}

// raiseConfirm raises the confirm offset; in sync mode the master
// dispatches to its queues only up to it (alone: no limit).
func (a *agent) raiseConfirm(c int64, alone bool) {
	a.confirmMu.Lock()
	defer a.confirmMu.Unlock()
	if c > a.confirm.Load() {
		a.confirm.Store(c)
	}
	if a.r.opts.Mode != ModeSync || a.r.state.role() != RoleMaster {
		return
	}
	if alone {
		a.r.store.SetDispatchLimit(noDispatchLimit)
		return
	}
	a.r.store.SetDispatchLimit(a.confirm.Load())
}

func (a *agent) setDispatchLimit(off int64) {
	a.confirmMu.Lock()
	defer a.confirmMu.Unlock()
	a.r.store.SetDispatchLimit(off)
}

// callLeader calls the controller leader (the last known one first, then
// every controller until one is not a follower).
func (a *agent) callLeader(call func(ctx context.Context, addr string) (GroupState, error)) (GroupState, error) {
	a.mu.Lock()
	first := a.leaderAddr
	a.mu.Unlock()
	addrs := []string{}
	if first != "" {
		addrs = append(addrs, first)
	}
	for _, ad := range a.r.opts.ControllerAddrs {
		if ad != first {
			addrs = append(addrs, ad)
		}
	}
	var errs []error
	for _, addr := range addrs {
		ctx, cancel := context.WithTimeout(a.r.ctx, ctlCallTimeout)
		g, err := call(ctx, addr)
		cancel()
		if err == nil {
			return g, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if coded(err) && errcode.Of(err) != errcode.ControllerNotLeader {
			return GroupState{}, err // the leader answered
		}
	}
	return GroupState{}, errors.Join(errs...)
}

// coded reports whether err carries a code (an answer, not a transport
// failure).
func coded(err error) bool {
	var ce *errcode.Error
	return errors.As(err, &ce)
}

// promote asks the controller leader to elect this broker (force: even
// outside the sync state set) and waits until it is the master.
func (a *agent) promote(ctx context.Context, force bool) (PromoteResult, error) {
	r := a.r
	prevID := r.state.id()
	if r.state.role() == RoleMaster {
		return PromoteResult{}, errcode.Errorf(errcode.InvalidParameter, "broker %s at %s is already the master (epoch %d)", r.cfg.BrokerName, r.cfg.Addr, r.state.epoch())
	}
	req := ElectMasterRequest{BrokerName: r.cfg.BrokerName, Designated: a.me, Unclean: force}
	g, err := a.callLeader(func(ctx context.Context, addr string) (GroupState, error) { return a.cc.ElectMaster(ctx, addr, req) })
	if err != nil {
		if !coded(err) {
			return PromoteResult{}, errcode.Errorf(errcode.ControllerNotLeader, "no controller leader elected broker %s/%d: %v", r.cfg.BrokerName, a.me, err)
		}
		return PromoteResult{}, err
	}
	if g.MasterID != a.me {
		return PromoteResult{}, errcode.Errorf(errcode.ControllerMasterNotAvailable, "the controller elected replica %d, not %d", g.MasterID, a.me)
	}
	a.offer(g)
	wctx, cancel := context.WithTimeout(ctx, becomeMasterTimeout)
	defer cancel()
	for {
		ch := r.state.changes()
		if r.state.role() == RoleMaster && r.state.epoch() >= g.MasterEpoch {
			break
		}
		select {
		case <-ch:
		case <-wctx.Done():
			return PromoteResult{}, errcode.Errorf(errcode.SystemError, "elected master of epoch %d but did not take over in time", g.MasterEpoch)
		}
	}
	r.host.Register()
	return PromoteResult{Epoch: r.state.epoch(), PreviousBrokerID: prevID, MaxOffset: r.store.CommitLog().MaxOffset(),
		Registered: r.host.Registered() && r.state.role() == RoleMaster}, nil
}

// ControllerStatus is the agent's state for status calls.
type ControllerStatus struct {
	ReplicaID         int64
	SyncStateSet      []int64
	SyncStateSetEpoch int64
	LeaseRemaining    time.Duration
	Leader            string
	ConfirmOffset     int64
	RoleChanges       int64
}

func (a *agent) status() ControllerStatus {
	a.mu.Lock()
	st := ControllerStatus{ReplicaID: a.me, SyncStateSet: slices.Clone(a.group.SyncStateSet),
		SyncStateSetEpoch: a.group.SyncStateSetEpoch, Leader: a.leaderID}
	if st.Leader == "" {
		st.Leader = a.leaderAddr
	}
	a.mu.Unlock()
	if a.r.state.role() == RoleMaster {
		st.LeaseRemaining = a.leaseLeft(a.r.state.epoch())
		st.ConfirmOffset = a.confirm.Load()
	}
	st.RoleChanges = a.roleChanges.Load()
	return st
}

// waitReplicatedByController is WaitReplicated in controller mode: in sync
// mode every member of the sync state set (and every member being added)
// must acknowledge the messages' end, and the set must hold enough
// replicas; in both modes the write lease of the epoch the messages were
// stored under must still be valid when the send is acknowledged.
func (r *Replicator) waitReplicatedByController(ctx context.Context, res []store.PutResult) error {
	if len(res) == 0 {
		return nil
	}
	a := r.agent
	epoch := r.state.epoch()
	if r.opts.Mode == ModeSync {
		end := res[len(res)-1].End()
		err := r.srv.WaitReplicatedBy(ctx, end, a.required, r.opts.SlaveTimeout)
		switch {
		case err == nil:
		case errors.Is(err, ha.ErrNotEnoughInSync):
			return errcode.Errorf(errcode.InSyncReplicasNotEnough, "stored at %d but not replicated: %v", res[0].PhysicalOffset, err)
		case errors.Is(err, ha.ErrSlaveTimeout):
			return errcode.Errorf(errcode.FlushSlaveTimeout, "stored at %d but not replicated: %v", res[0].PhysicalOffset, err)
		case errors.Is(err, ha.ErrClosed):
			return errcode.Errorf(errcode.ShuttingDown, "broker %s is stopping", r.cfg.BrokerName)
		default:
			return r.host.StoreError(err)
		}
		need := int(r.inSyncReplicas.Load())
		if n := len(a.members()); n < need {
			return errcode.Errorf(errcode.InSyncReplicasNotEnough, "stored at %d but not replicated: the sync state set shrank to %d replicas besides the master, sync replication needs %d",
				res[0].PhysicalOffset, n, need)
		}
		if r.state.epoch() == epoch {
			a.raiseConfirm(end, false)
		}
	}
	if err := a.checkLease(epoch); err != nil {
		return errcode.Errorf(errcode.NotMaster, "stored at %d but the write lease expired before the acknowledgement: %v", res[0].PhysicalOffset, err)
	}
	return nil
}

// truncate is the HA client's OnTruncate in controller mode: a master of
// epoch (at least what the controller told) says this slave's log forked
// from its own at fork. The log is cut there only when epoch is above
// every epoch entry this broker holds.
func (r *Replicator) truncate(fork, epoch int64) error {
	if known := r.state.epoch(); epoch < known {
		return fmt.Errorf("replication: truncation asked by a master of epoch %d, below the known epoch %d", epoch, known)
	}
	entries := r.epochs.Entries()
	if n := len(entries); n > 0 && entries[n-1].Epoch >= epoch {
		return fmt.Errorf("replication: truncation asked by a master of epoch %d, not above this log's last epoch %d", epoch, entries[n-1].Epoch)
	}
	end := r.store.CommitLog().MaxOffset()
	r.log.Warn("TRUNCATING the log to the fork point with the new master's log", zap.Int64("fork", fork),
		zap.Int64("commitLogMaxOffset", end), zap.Int64("droppedBytes", end-fork), zap.Int64("masterEpoch", epoch))
	if err := r.store.TruncateTo(r.ctx, fork); err != nil {
		return fmt.Errorf("replication: truncate the log to %d: %w", fork, err)
	}
	if err := r.epochs.TruncateTo(fork); err != nil {
		return fmt.Errorf("replication: truncate the epoch entries to %d: %w", fork, err)
	}
	return nil
}

// noDispatchLimit lifts the store's dispatch limit.
const noDispatchLimit = int64(math.MaxInt64)
