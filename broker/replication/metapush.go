package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// Timings of the metadata push (controller mode).
const (
	// MetadataPushTimeout bounds how long a change of the topic or
	// subscription group table waits for every other member of the sync
	// state set to apply it.
	MetadataPushTimeout = 3 * time.Second
	// metaPushCallTimeout bounds one push to one replica.
	metaPushCallTimeout = time.Second
	// metaPushRetry is the pause before pushing again to the members that
	// did not apply a push yet.
	metaPushRetry = 100 * time.Millisecond
)

// MetadataPush is a master's push of its topic and subscription group
// tables to a member of its sync state set (controller mode).
type MetadataPush struct {
	BrokerName string
	// MasterEpoch and MasterID (replica id) name the pushing master.
	MasterEpoch int64
	MasterID    int64
	// Metadata holds topics and groups with their versions (Partial;
	// Epoch = MasterEpoch).
	Metadata Metadata
}

// MetadataPusher is a MasterClient that also pushes a master's metadata
// to its slaves (broker/remote's does, over BrokerHA.PushMetadata).
type MetadataPusher interface {
	// PushMetadata gives p to the broker at addr (its client address) and
	// returns once that broker applied it.
	PushMetadata(ctx context.Context, addr string, p MetadataPush) error
}

// tableVersion is the (master epoch, data version) of a table a slave
// applied.
type tableVersion struct {
	epoch int64
	v     topic.DataVersion
	ok    bool
}

// take reports whether a table of version v from the master of epoch is
// not older than the one applied. Within one epoch a master's versions
// only grow (every change bumps the counter); a higher epoch is a new
// master whose table wins whatever its version.
func (t *tableVersion) take(epoch int64, v topic.DataVersion) bool {
	if !t.ok || epoch > t.epoch {
		return true
	}
	if epoch < t.epoch {
		return false
	}
	if v.Counter != t.v.Counter {
		return v.Counter > t.v.Counter
	}
	return v.Timestamp >= t.v.Timestamp
}

func (t *tableVersion) set(epoch int64, v topic.DataVersion) {
	*t = tableVersion{epoch: epoch, v: v, ok: true}
}

// pushedState is what a master's push gave one replica.
type pushedState struct {
	epoch          int64
	topics, groups topic.DataVersion
}

// metaPushed is, on a master, what each replica applied from its pushes.
type metaPushed struct {
	mu sync.Mutex
	by map[int64]pushedState
}

func (m *metaPushed) record(id int64, s pushedState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[int64]pushedState{}
	}
	m.by[id] = s
}

func (m *metaPushed) get(id int64) (pushedState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.by[id]
	return s, ok
}

// current is the master's tables' state as a push gives it.
func (r *Replicator) currentPushState() pushedState {
	s := pushedState{epoch: r.state.epoch()}
	_, s.topics = r.host.Topics()
	if gh, ok := r.host.(GroupHost); ok {
		_, s.groups = gh.SubscriptionGroups()
	}
	return s
}

// metadataCaughtUp reports whether replica id applied the master's
// current topic and subscription group tables from a push; if not, it
// asks for a push (which reaches the members being added). A replica joins
// the sync state set only once it holds them: a failover to it must not
// lose a table change acknowledged before it joined.
func (r *Replicator) metadataCaughtUp(id int64) bool {
	if _, ok := r.meta.client.(MetadataPusher); !ok {
		return true
	}
	if s, ok := r.meta.pushed.get(id); ok && s == r.currentPushState() {
		return true
	}
	r.TriggerMetadataPush()
	return false
}

// metaApplied is the versions of the tables a slave last applied, so that
// a pull answered before a push that overtook it does not undo the push.
type metaApplied struct {
	topics, groups tableVersion
}

// TriggerMetadataPush asks for a push of the topic and subscription group
// tables soon, without waiting (a topic created by the broker itself:
// auto-created, retry or reply topics). Only a master in controller mode
// pushes.
func (r *Replicator) TriggerMetadataPush() {
	if r.agent == nil {
		return
	}
	poke(r.meta.pushNow)
}

// metaPushLoop runs the pushes TriggerMetadataPush asked for.
func (r *Replicator) metaPushLoop() {
	defer r.wg.Done()
	var lastErr string
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.meta.pushNow:
		}
		err := r.PushMetadata(r.ctx)
		switch {
		case r.ctx.Err() != nil:
		case err != nil && err.Error() != lastErr:
			r.log.Warn("metadata push to the sync state set failed; the slaves get it by their next metadata sync", zap.Error(err))
			lastErr = err.Error()
		case err == nil:
			lastErr = ""
		}
	}
}

// PushMetadata gives the master's topic and subscription group tables to
// every other member of its sync state set (and every member being added)
// and returns once each applied them, so that a change survives a
// failover right after it. The set is read again at every attempt: a
// member removed from it meanwhile is not waited for. Past
// MetadataPushTimeout it fails with FLUSH_SLAVE_TIMEOUT naming the
// members that did not apply the tables: the change is made on the master
// (it is not rolled back) and reaches them by their periodic metadata
// sync, but a failover before that would lose it. Outside controller mode,
// or on a broker that is not the master, it does nothing.
func (r *Replicator) PushMetadata(ctx context.Context) error {
	a := r.agent
	if a == nil || r.state.role() != RoleMaster {
		return nil
	}
	pusher, ok := r.meta.client.(MetadataPusher)
	if !ok {
		return nil
	}
	epoch := r.state.epoch()
	md := Metadata{Epoch: epoch, Partial: true}
	md.Topics, md.DataVersion = r.host.Topics()
	if gh, ok := r.host.(GroupHost); ok {
		md.Groups, md.GroupVersion = gh.SubscriptionGroups()
	}
	p := MetadataPush{BrokerName: r.cfg.BrokerName, MasterEpoch: epoch, MasterID: a.me, Metadata: md}

	ctx, cancel := context.WithTimeout(ctx, MetadataPushTimeout)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	done := map[int64]bool{}
	errs := map[int64]error{}
	for {
		if r.state.role() != RoleMaster || r.state.epoch() != epoch {
			return errcode.Errorf(errcode.NotMaster, "broker %s/%d stopped being the master of epoch %d while pushing its metadata",
				r.cfg.BrokerName, a.me, epoch)
		}
		var todo []int64
		for _, id := range a.required() {
			if !done[id] {
				todo = append(todo, id)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		addrs := a.replicaAddrs()
		// Each push writes only its own result; the maps are updated once
		// all of them are back.
		results := make([]error, len(todo))
		var wg sync.WaitGroup
		for i, id := range todo {
			addr := addrs[id]
			if addr == "" {
				results[i] = fmt.Errorf("replica %d: no client address known", id)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, ccancel := context.WithTimeout(ctx, metaPushCallTimeout)
				if err := pusher.PushMetadata(cctx, addr, p); err != nil {
					results[i] = fmt.Errorf("replica %d at %s: %w", id, addr, err)
				}
				ccancel()
			}()
		}
		wg.Wait()
		for i, id := range todo {
			if err := results[i]; err != nil {
				errs[id] = err
				continue
			}
			done[id] = true
			delete(errs, id)
			r.meta.pushed.record(id, pushedState{epoch: epoch, topics: md.DataVersion, groups: md.GroupVersion})
		}
		if allDone(done, todo) {
			continue // read the set again: a member may have been added
		}
		t := time.NewTimer(metaPushRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			var missing []int64
			var causes []error
			for _, id := range a.required() {
				if !done[id] {
					missing = append(missing, id)
					if e := errs[id]; e != nil {
						causes = append(causes, e)
					}
				}
			}
			if len(missing) == 0 {
				return nil
			}
			slices.Sort(missing)
			if r.ctx.Err() != nil {
				return errcode.Errorf(errcode.ShuttingDown, "broker %s is stopping", r.cfg.BrokerName)
			}
			return errcode.Errorf(errcode.FlushSlaveTimeout,
				"saved on the master of %s but sync state set members %v did not apply the change within %v "+
					"(they get it by their periodic metadata sync; a failover before that loses it; repeat the change to confirm it): %v",
				r.cfg.BrokerName, missing, MetadataPushTimeout, errors.Join(causes...))
		case <-t.C:
		}
	}
}

func allDone(done map[int64]bool, ids []int64) bool {
	for _, id := range ids {
		if !done[id] {
			return false
		}
	}
	return true
}

// replicaAddrs maps the group's replicas to their client addresses, as
// the controller last told them.
func (a *agent) replicaAddrs() map[int64]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int64]string, len(a.group.Replicas))
	for _, rs := range a.group.Replicas {
		out[rs.ID] = rs.Addr
	}
	return out
}

// ApplyPush applies a master's push on a slave (BrokerHA.PushMetadata),
// through the path a metadata sync takes. It is refused unless the broker
// is a slave in controller mode following the master p names: a push from
// a master of an older epoch fails with CONTROLLER_FENCED, one from any
// other master (or before the broker learned of the pusher's election)
// with NOT_MASTER, so that the master retries.
func (r *Replicator) ApplyPush(p MetadataPush) error {
	a := r.agent
	if a == nil {
		return errcode.Errorf(errcode.InvalidParameter, "broker %s/%d is not in controller mode: it takes no metadata push", r.cfg.BrokerName, r.cfg.BrokerID)
	}
	if p.BrokerName != r.cfg.BrokerName {
		return errcode.Errorf(errcode.InvalidParameter, "metadata push from the master of %q to a broker of %q", p.BrokerName, r.cfg.BrokerName)
	}
	md := p.Metadata
	md.Epoch, md.Partial = p.MasterEpoch, true
	md.Offsets, md.Delay = nil, nil
	return r.applyMetadata(md, func() error {
		epoch := r.state.epoch()
		if p.MasterEpoch < epoch {
			return errcode.Errorf(errcode.ControllerFenced, "metadata push from replica %d as master of epoch %d, below epoch %d of broker %s/%d",
				p.MasterID, p.MasterEpoch, epoch, r.cfg.BrokerName, a.me)
		}
		a.mu.Lock()
		following := a.haveGroup && a.group.MasterEpoch == epoch && a.group.MasterID == p.MasterID
		a.mu.Unlock()
		if role := r.state.role(); role != RoleSlave || p.MasterEpoch != epoch || !following || p.MasterID == a.me {
			return errcode.Errorf(errcode.NotMaster, "broker %s/%d (%s at epoch %d) does not follow replica %d as master of epoch %d",
				r.cfg.BrokerName, a.me, role, epoch, p.MasterID, p.MasterEpoch)
		}
		return nil
	})
}
