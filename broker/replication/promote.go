package replication

import (
	"context"
	"time"

	"go.uber.org/zap"

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

// Promote makes this slave (or fenced master) the master of its group:
// it stops replicating, makes its queue offsets follow its ConsumeQueues,
// takes a new epoch (epoch, or one more than the highest it knows when 0),
// saves role and epoch, and registers with broker id 0. name, when not
// empty, must be the broker's group name.
func (r *Replicator) Promote(ctx context.Context, name string, epoch int64) (PromoteResult, error) {
	if name != "" && name != r.cfg.BrokerName {
		return PromoteResult{}, errcode.Errorf(errcode.InvalidParameter, "this broker belongs to %q, not %q", r.cfg.BrokerName, name)
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
	if err := r.state.set(RoleMaster, 0, epoch); err != nil {
		_ = r.state.set(role, prevID, known)
		restart()
		r.mu.Unlock()
		return PromoteResult{}, errcode.Errorf(errcode.SystemError, "cannot save the new role: %v", err)
	}
	maxOff := r.store.CommitLog().MaxOffset()
	r.mu.Unlock()
	r.log.Warn("PROMOTED to master", zap.Int64("epoch", epoch), zap.Int64("previousId", prevID),
		zap.Stringer("previousRole", role), zap.Int64("commitLogMaxOffset", maxOff))
	r.host.Register()
	return PromoteResult{Epoch: epoch, PreviousBrokerID: prevID, MaxOffset: maxOff,
		Registered: r.host.Registered() && r.state.role() == RoleMaster}, nil
}
