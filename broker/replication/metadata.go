package replication

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// MetadataRequest is a slave's request for its master's metadata.
type MetadataRequest struct {
	BrokerName string
	BrokerID   int64
	// LocalOffsets are the offsets committed to the slave since its last
	// successful sync. For each queue the master keeps the larger of its
	// own offset and the slave's.
	LocalOffsets offsets.Map
}

// Metadata is what a master gives its slaves.
type Metadata struct {
	Topics      []topic.Config
	DataVersion topic.DataVersion
	// Offsets is the master's whole consumer offset table (after merging
	// the request's local offsets).
	Offsets offsets.Map
	Epoch   int64
	// Delay is the master's delayed delivery progress; nil when it does
	// not deliver.
	Delay *delay.MasterProgress
	// Groups is the master's subscription group table and GroupVersion
	// its version; a zero GroupVersion means the master sent no table (a
	// slave then keeps its own).
	Groups       []subgroup.Config
	GroupVersion topic.DataVersion
	// Partial marks a master's push (PushMetadata): topics and groups
	// only, no offsets and no delay progress.
	Partial bool
}

// GroupHost is a Host that also replicates its subscription group table
// (the groups' FIFO flag, maximum delivery attempts and retry policy).
type GroupHost interface {
	// SubscriptionGroups returns the group table and its version.
	SubscriptionGroups() ([]subgroup.Config, topic.DataVersion)
	// ReplaceSubscriptionGroups makes the group table exactly groups with
	// version v and reports whether anything changed.
	ReplaceSubscriptionGroups(groups []subgroup.Config, v topic.DataVersion) (bool, error)
}

// MasterClient fetches a slave's metadata from its master.
type MasterClient interface {
	// FetchMetadata asks the master at addr (its client address) for its
	// metadata.
	FetchMetadata(ctx context.Context, addr string, req MetadataRequest) (Metadata, error)
	// Close releases the client's connections.
	Close() error
}

// metaSync is the slave's metadata sync state.
type metaSync struct {
	client MasterClient // nil: none
	mu     sync.Mutex
	last   time.Time
	err    error
	now    chan struct{}

	// local is the consumer offsets committed here that the master has not
	// taken yet.
	local offsets.Local

	// applied is what the slave last applied (controller mode; guarded by
	// Replicator.mu).
	applied metaApplied

	// pushNow asks the master's push loop to push, and pushed is what each
	// replica applied of the pushes (master, controller mode).
	pushNow chan struct{}
	pushed  metaPushed
}

func (m *metaSync) init(c MasterClient) {
	m.client = c
	m.now = make(chan struct{}, 1)
	m.pushNow = make(chan struct{}, 1)
}

// trigger asks for a sync now.
func (m *metaSync) trigger() {
	select {
	case m.now <- struct{}{}:
	default:
	}
}

func (m *metaSync) status() (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.err
}

func (m *metaSync) close() {
	if m.client != nil {
		_ = m.client.Close()
	}
}

func (r *Replicator) metadataLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.opts.MetadataSyncInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.meta.now:
		}
		if r.state.role() != RoleSlave {
			continue
		}
		if r.MasterHAAddr() == "" {
			// A slave registered before its master gets no master address;
			// ask the NameServers again rather than wait a whole
			// RegisterInterval (30 s).
			r.host.TriggerRegistration()
		}
		addr := r.masterAddr()
		if addr == "" {
			continue
		}
		err := r.syncMetadata(addr)
		r.meta.mu.Lock()
		r.meta.err = err
		if err == nil {
			r.meta.last = time.Now()
		}
		r.meta.mu.Unlock()
		switch {
		case err != nil && err.Error() != lastErr:
			r.log.Warn("metadata sync from the master failed", zap.String("master", addr), zap.Error(err))
			lastErr = err.Error()
		case err == nil && lastErr != "":
			r.log.Info("metadata sync from the master works again", zap.String("master", addr))
			lastErr = ""
		}
	}
}

// syncMetadata fetches topics and offsets from the master and applies them.
func (r *Replicator) syncMetadata(addr string) error {
	if r.meta.client == nil {
		return errors.New("replication: no client to fetch the master's metadata with")
	}
	req := MetadataRequest{BrokerName: r.cfg.BrokerName, BrokerID: r.state.id(), LocalOffsets: r.meta.local.Pending()}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	md, err := r.meta.client.FetchMetadata(ctx, addr, req)
	if err != nil {
		return err
	}
	return r.applyMetadata(md, nil)
}

// applyMetadata makes a slave's tables its master's: the one path a pull
// (syncMetadata) and a push (ApplyPush) take. It applies only as a slave
// (a promotion may have happened meanwhile). In controller mode a topic or
// group table older than the one last applied (a pull answered before a
// push that overtook it) is skipped: see metaApplied. A partial Metadata (a
// push) holds no consumer offsets and no delay progress, which are left
// alone. check, when set, runs first under r.mu: its error refuses md.
func (r *Replicator) applyMetadata(md Metadata, check func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	if r.state.role() != RoleSlave {
		return nil
	}
	guard := r.agent != nil
	if !guard || r.meta.applied.topics.take(md.Epoch, md.DataVersion) {
		removed, changed, err := r.host.ReplaceTopics(md.Topics, md.DataVersion)
		if err != nil {
			return err
		}
		if changed {
			r.log.Info("topics replicated from the master", zap.Int("topics", len(md.Topics)), zap.Strings("removed", removed),
				zap.Bool("pushed", md.Partial))
		}
		for _, name := range removed {
			r.cfg.Offsets.RemoveTopic(name)
			if err := r.store.DeleteTopic(name); err != nil {
				r.log.Warn("delete the queues of a topic the master deleted", zap.String("topic", name), zap.Error(err))
			}
		}
		if guard {
			r.meta.applied.topics.set(md.Epoch, md.DataVersion)
		}
	}
	if gh, ok := r.host.(GroupHost); ok && md.GroupVersion != (topic.DataVersion{}) &&
		(!guard || r.meta.applied.groups.take(md.Epoch, md.GroupVersion)) {
		changed, err := gh.ReplaceSubscriptionGroups(md.Groups, md.GroupVersion)
		if err != nil {
			return err
		}
		if changed {
			r.log.Info("subscription groups replicated from the master", zap.Int("groups", len(md.Groups)), zap.Bool("pushed", md.Partial))
		}
		if guard {
			r.meta.applied.groups.set(md.Epoch, md.GroupVersion)
		}
	}
	if md.Partial {
		return nil
	}
	r.meta.local.Adopt(r.cfg.Offsets, md.Offsets)
	if md.Delay != nil {
		r.host.OfferDelayProgress(*md.Delay)
	}
	if err := r.cfg.Offsets.Persist(); err != nil {
		return err
	}
	if err := r.state.sawEpoch(md.Epoch); err != nil {
		r.log.Warn("persist the master's epoch", zap.Error(err))
	}
	return nil
}

// Metadata answers a slave's request on the master.
func (r *Replicator) Metadata(req MetadataRequest) (Metadata, error) {
	if err := r.checkRole(); err != nil {
		return Metadata{}, err
	}
	if req.BrokerName != r.cfg.BrokerName {
		return Metadata{}, errcode.Errorf(errcode.InvalidParameter, "slave of %q asked the master of %q", req.BrokerName, r.cfg.BrokerName)
	}
	if len(req.LocalOffsets) > 0 {
		if n := r.cfg.Offsets.MergeLarger(req.LocalOffsets); n > 0 {
			r.log.Info("took consumer offsets committed to a slave", zap.Int64("slaveId", req.BrokerID), zap.Int("queues", n))
			if err := r.cfg.Offsets.Persist(); err != nil {
				r.log.Warn("persist offsets", zap.Error(err))
			}
		}
	}
	md := Metadata{Epoch: r.state.epoch()}
	md.Topics, md.DataVersion = r.host.Topics()
	md.Offsets = r.cfg.Offsets.Snapshot()
	if p, ok := r.host.DelayProgress(); ok {
		md.Delay = &p
	}
	if gh, ok := r.host.(GroupHost); ok {
		md.Groups, md.GroupVersion = gh.SubscriptionGroups()
	}
	return md, nil
}
