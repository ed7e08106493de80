package broker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// haGRPC is the BrokerHA service: metadata for slaves, promotion, status.
type haGRPC struct {
	pb.UnimplementedBrokerHAServer
	b *Broker
}

func (s *haGRPC) GetMetadata(_ context.Context, req *pb.GetMetadataRequest) (*pb.GetMetadataResponse, error) {
	resp, err := s.b.metadataFor(req)
	if err != nil {
		return &pb.GetMetadataResponse{Status: wire.Status(err)}, nil
	}
	return resp, nil
}

func (s *haGRPC) Promote(ctx context.Context, req *pb.PromoteRequest) (*pb.PromoteResponse, error) {
	res, err := s.b.Promote(ctx, req.BrokerName, req.Epoch)
	if err != nil {
		return &pb.PromoteResponse{Status: wire.Status(err)}, nil
	}
	return &pb.PromoteResponse{Status: wire.OK, Epoch: res.Epoch, PreviousBrokerId: res.PreviousBrokerID,
		CommitLogMaxOffset: res.MaxOffset, Registered: res.Registered}, nil
}

func (s *haGRPC) ReplicationStatus(context.Context, *pb.ReplicationStatusRequest) (*pb.ReplicationStatusResponse, error) {
	return &pb.ReplicationStatusResponse{Status: wire.OK, Replication: s.b.replicationInfo()}, nil
}

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
func (b *Broker) Promote(ctx context.Context, name string, epoch int64) (PromoteResult, error) {
	r := b.repl
	if name != "" && name != b.opts.BrokerName {
		return PromoteResult{}, wire.Errorf(pb.Code_INVALID_PARAMETER, "this broker belongs to %q, not %q", b.opts.BrokerName, name)
	}
	r.mu.Lock()
	role, known, prevID := r.state.role(), r.state.epoch(), r.state.id()
	if role == RoleMaster {
		r.mu.Unlock()
		return PromoteResult{}, wire.Errorf(pb.Code_INVALID_PARAMETER, "broker %s at %s is already the master (epoch %d)", b.opts.BrokerName, b.addr, known)
	}
	switch {
	case epoch == 0:
		epoch = known + 1
	case epoch <= known:
		r.mu.Unlock()
		return PromoteResult{}, wire.Errorf(pb.Code_INVALID_PARAMETER, "epoch %d is not above the highest known epoch %d", epoch, known)
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
	err := b.store.AdoptQueueOffsets(actx)
	cancel()
	if err != nil {
		restart()
		r.mu.Unlock()
		return PromoteResult{}, storeError(err)
	}
	if err := r.state.set(RoleMaster, 0, epoch); err != nil {
		_ = r.state.set(role, prevID, known)
		restart()
		r.mu.Unlock()
		return PromoteResult{}, wire.Errorf(pb.Code_SYSTEM_ERROR, "cannot save the new role: %v", err)
	}
	maxOff := b.store.CommitLog().MaxOffset()
	r.mu.Unlock()
	r.log.Warn("PROMOTED to master", zap.Int64("epoch", epoch), zap.Int64("previousId", prevID),
		zap.Stringer("previousRole", role), zap.Int64("commitLogMaxOffset", maxOff))
	b.reg.registerAll()
	return PromoteResult{Epoch: epoch, PreviousBrokerID: prevID, MaxOffset: maxOff,
		Registered: b.reg.registered() && r.state.role() == RoleMaster}, nil
}
