package replication

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// PromoteResult says what a promotion did.
type PromoteResult struct {
	Epoch            int64
	PreviousBrokerID int64
	MaxOffset        int64
	// Registered: every NameServer accepted the broker as the new master.
	Registered bool
}

// PromoteRequest asks a broker to become the master of its group.
type PromoteRequest struct {
	// BrokerName, when not empty, must be the broker's group name.
	BrokerName string
	// Epoch to take (0: one more than the highest known); not used in
	// controller mode, where the controller sets it.
	Epoch int64
	// Force promotes even when acknowledged messages would be lost: a
	// slave behind its master's last known committed offset, or that never
	// replicated; in controller mode, an unclean election.
	Force bool
}

// Promote makes this slave (or fenced master) the master of its group.
//
// In controller mode it asks the controller leader to elect this broker
// (ElectMaster with this replica designated; Force makes it unclean) and
// waits until it took over.
//
// Otherwise it stops replicating, makes its queue offsets follow its
// ConsumeQueues, takes a new epoch (Epoch, or one more than the highest it
// knows when 0), appends it to the epoch entries, saves role and epoch,
// and registers with broker id 0. Unless forced, a slave is refused when
// it never replicated from its master or holds less than the master's last
// committed offset it heard of: promoting it would drop acknowledged
// messages.
func (r *Replicator) Promote(ctx context.Context, req PromoteRequest) (PromoteResult, error) {
	name, epoch := req.BrokerName, req.Epoch
	if name != "" && name != r.cfg.BrokerName {
		return PromoteResult{}, errcode.Errorf(errcode.InvalidParameter, "this broker belongs to %q, not %q", r.cfg.BrokerName, name)
	}
	if r.agent != nil {
		return r.agent.promote(ctx, req.Force)
	}
	r.mu.Lock()
	role, known, prevID := r.state.role(), r.state.epoch(), r.state.id()
	if role == RoleMaster {
		r.mu.Unlock()
		return PromoteResult{}, errcode.Errorf(errcode.InvalidParameter, "broker %s at %s is already the master (epoch %d)", r.cfg.BrokerName, r.cfg.Addr, known)
	}
	switch {
	case epoch == 0:
		epoch = known + 1
	case epoch <= known:
		r.mu.Unlock()
		return PromoteResult{}, errcode.Errorf(errcode.InvalidParameter, "epoch %d is not above the highest known epoch %d", epoch, known)
	}
	if role == RoleSlave && !req.Force {
		if err := r.behindLocked(); err != nil {
			r.mu.Unlock()
			return PromoteResult{}, err
		}
	}
	// Stop replicating: nothing is appended from here on.
	if c := r.client; c != nil {
		r.client = nil
		_ = c.Close()
	}
	restart := func() {
		if role == RoleSlave {
			if err := r.startClientLocked(); err != nil {
				r.log.Error("restart replication after a failed promotion", zap.Error(err))
			}
		}
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := r.store.AdoptQueueOffsets(actx)
	cancel()
	if err != nil {
		restart()
		r.mu.Unlock()
		return PromoteResult{}, r.host.StoreError(err)
	}
	maxOff := r.store.CommitLog().MaxOffset()
	// Entries copied from the master may start beyond this log's end.
	if err := r.epochs.TruncateTo(maxOff); err != nil {
		restart()
		r.mu.Unlock()
		return PromoteResult{}, errcode.Errorf(errcode.SystemError, "cannot cut the epoch entries at the log's end: %v", err)
	}
	if err := r.epochs.Append(ha.EpochEntry{Epoch: epoch, Start: maxOff}); err != nil {
		restart()
		r.mu.Unlock()
		return PromoteResult{}, errcode.Errorf(errcode.SystemError, "cannot save the epoch entry: %v", err)
	}
	if err := r.state.set(RoleMaster, 0, epoch); err != nil {
		_ = r.state.set(role, prevID, known)
		restart()
		r.mu.Unlock()
		return PromoteResult{}, errcode.Errorf(errcode.SystemError, "cannot save the new role: %v", err)
	}
	r.mu.Unlock()
	r.log.Warn("PROMOTED to master", zap.Int64("epoch", epoch), zap.Int64("previousId", prevID),
		zap.Stringer("previousRole", role), zap.Int64("commitLogMaxOffset", maxOff))
	r.host.Register()
	return PromoteResult{Epoch: epoch, PreviousBrokerID: prevID, MaxOffset: maxOff,
		Registered: r.host.Registered() && r.state.role() == RoleMaster}, nil
}

// behindLocked refuses the promotion of a slave that would drop messages
// its master acknowledged: one that never replicated, or whose log ends
// below the master's committed offset as last heard. r.mu is held.
func (r *Replicator) behindLocked() error {
	if r.client == nil {
		return errcode.Errorf(errcode.InvalidParameter, "broker %s/%d is not replicating: promoting it could drop acknowledged messages (force to promote anyway)",
			r.cfg.BrokerName, r.state.id())
	}
	st := r.client.Status()
	if st.MasterAddr == "" && r.welcomeAddr.Load() == nil {
		return errcode.Errorf(errcode.InvalidParameter, "broker %s/%d never replicated from its master: promoting it could drop acknowledged messages (force to promote anyway)",
			r.cfg.BrokerName, r.state.id())
	}
	if own := r.store.CommitLog().MaxOffset(); own < st.MasterOffset {
		return errcode.Errorf(errcode.InvalidParameter, "broker %s/%d holds the log up to %d, below its master's committed offset %d: promoting it would drop acknowledged messages (force to promote anyway)",
			r.cfg.BrokerName, r.state.id(), own, st.MasterOffset)
	}
	return nil
}
