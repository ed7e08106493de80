package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// Host is what replication needs of its broker.
type Host interface {
	// Topics returns the topic table and its version, for the slaves.
	Topics() ([]topic.Config, topic.DataVersion)
	// ReplaceTopics makes the topic table exactly topics with version v (a
	// slave taking its master's table) and reports the topics that went
	// away and whether anything changed.
	ReplaceTopics(topics []topic.Config, v topic.DataVersion) (removed []string, changed bool, err error)
	// DelayProgress is the delayed delivery progress a master gives its
	// slaves; ok is false when it does not deliver.
	DelayProgress() (p delay.MasterProgress, ok bool)
	// OfferDelayProgress hands the master's delayed delivery progress to
	// the slave's delay service.
	OfferDelayProgress(p delay.MasterProgress)
	// Register registers with every NameServer and returns once they
	// answered; Registered reports whether the last registration with
	// every NameServer succeeded.
	Register()
	Registered() bool
	// TriggerRegistration asks for a registration soon.
	TriggerRegistration()
	// StoreError turns an error of the store into a coded error.
	StoreError(err error) error
}

// TopicRecoverer is a Host that, becoming master in controller mode,
// adds to its topic table the topics its queues hold but the table lacks
// (created on the old master after the last metadata sync): their messages
// were replicated, and without an entry they could not be sent to or
// routed.
type TopicRecoverer interface {
	RecoverTopics() []string
}

// Config is what a Replicator is built from.
type Config struct {
	Options Options
	// BrokerName is the broker's group; BrokerID the id it was configured
	// with (0: master).
	BrokerName string
	BrokerID   int64
	// StoreDir holds config/ha.json.
	StoreDir string
	// ListenAddr is the broker's client listen address (the HA address
	// derives from it); Addr its client address as clients reach it.
	ListenAddr string
	Addr       string
	Store      *store.Store
	Offsets    *offsets.Table
	// Master fetches a slave's metadata from its master; without it a
	// slave replicates its master's log but not its metadata.
	Master MasterClient
	// Cluster is the broker's cluster name (told to the controllers).
	Cluster string
	// Controllers reaches the controllers; required in controller mode
	// (Options.ControllerAddrs).
	Controllers ControllerClient
	// Link secures the HA connections (TLS, credentials); the zero value
	// is plain text without credentials.
	Link Link
}

// Link is how the HA connections are secured, from the broker's TLS and
// access control options.
type Link struct {
	// WrapListener wraps the HA listener (the broker's TLS mode applied
	// with tlsconf.Listen); nil: plain text.
	WrapListener func(net.Listener) net.Listener
	// TLS makes a slave dial its master with TLS; nil: plain text.
	TLS *tls.Config
	// Credentials returns the AUTH values a slave sends before its HELLO
	// (the signed-date header of the broker's credentials, signed for each
	// connection); nil: none.
	Credentials func() (authorization, date string)
	// Authenticate checks a slave's AUTH values on the master (the
	// broker's guard when ACL is on); nil: none checked.
	Authenticate func(remote, authorization, date string) error
}

// Replicator is the broker's replication: its role and epoch, the HA server
// (every broker runs one; it serves slaves while the broker is master), the
// HA client (while a slave), and the slave's metadata sync.
//
// Lock order: mu (role changes, the HA client's life) is taken before the
// local commits' mutex (meta.local), which is taken before the offset
// table's; a sync applies the master's table under mu so that a promotion
// does not interleave. meta.mu (the sync's status) is taken alone.
type Replicator struct {
	cfg   Config
	opts  Options
	host  Host
	log   *zap.Logger
	state *roleState
	store *store.Store

	// inSyncReplicas is opts.InSyncReplicas; SetInSyncReplicas changes it.
	inSyncReplicas atomic.Int64

	srv    *ha.Server
	haAddr string // advertised

	// epochs is the epoch file (config/epochs), kept in both modes.
	epochs *epochFile
	// agent follows the controllers (nil outside controller mode).
	agent *agent

	mu     sync.Mutex // serialises role changes and the client's life
	client *ha.Client

	// From the NameServers (slave): the master's addresses.
	nsMasterAddr   atomic.Pointer[string]
	nsMasterHAAddr atomic.Pointer[string]
	// From the HA welcome: the master's client address and epoch.
	welcomeAddr atomic.Pointer[string]

	meta metaSync

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New loads the saved role and binds the HA listener; Start serves it.
func New(cfg Config, host Host, log *zap.Logger) (*Replicator, error) {
	if log == nil {
		log = zap.NewNop()
	}
	st, err := loadRoleState(cfg.StoreDir, cfg.BrokerID, log)
	if err != nil {
		return nil, err
	}
	r := &Replicator{cfg: cfg, opts: cfg.Options, host: host, log: log, state: st, store: cfg.Store}
	if r.epochs, err = loadEpochFile(cfg.StoreDir); err != nil {
		return nil, err
	}
	if r.opts.ControllerMode() {
		if cfg.Controllers == nil {
			return nil, errors.New("replication: controller mode without a controller client")
		}
		if cfg.BrokerID < 1 {
			return nil, fmt.Errorf("replication: controller mode needs a replica id >= 1, not %d", cfg.BrokerID)
		}
		// A broker never resumes as master at its old epoch: it starts as
		// a slave and follows the controller (which elects again, with a
		// new epoch, a master that restarted).
		if st.role() != RoleSlave || st.id() != cfg.BrokerID {
			log.Warn("controller mode: starting as a slave; the controller decides the role",
				zap.Stringer("savedRole", st.role()), zap.Int64("savedId", st.id()), zap.Int64("epoch", st.epoch()))
			if err := st.set(RoleSlave, cfg.BrokerID, st.epoch()); err != nil {
				return nil, fmt.Errorf("replication: save the starting role: %w", err)
			}
		}
		r.agent = newAgent(r, cfg.Controllers)
	}
	r.inSyncReplicas.Store(int64(cfg.Options.InSyncReplicas))
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.meta.init(cfg.Master)
	addr, err := r.opts.listenAddr(cfg.ListenAddr)
	if err != nil {
		return nil, err
	}
	so := ha.DefaultServerOptions()
	so.ListenAddr = addr
	so.BrokerName = cfg.BrokerName
	so.MasterAddr = cfg.Addr
	so.HeartbeatInterval = r.opts.HeartbeatInterval
	so.Timeout = r.opts.Timeout
	so.MaxFrameBytes = r.opts.MaxFrameBytes
	so.MaxLagBytes = r.opts.MaxLagBytes
	so.Epoch = r.state.epoch
	so.Serving = func() error {
		if role := r.state.role(); role != RoleMaster {
			return fmt.Errorf("broker %s at %s is %s, not a master", cfg.BrokerName, cfg.Addr, role)
		}
		return nil
	}
	so.Epochs = r.epochs.Entries
	so.WrapListener = cfg.Link.WrapListener
	so.Authenticate = cfg.Link.Authenticate
	if r.srv, err = ha.NewServer(so, haSource{r.store.CommitLog()}, log.Named("server")); err != nil {
		return nil, err
	}
	r.haAddr = r.opts.HAAdvertiseAddr
	if r.haAddr == "" {
		r.haAddr = advertised(r.srv.Addr(), cfg.Addr)
	}
	return r, nil
}

// Start serves slaves and, on a slave, starts replicating.
func (r *Replicator) Start() error {
	r.srv.Start()
	r.log.Info("replication ready", zap.Stringer("role", r.state.role()), zap.Int64("brokerId", r.state.id()),
		zap.Int64("epoch", r.state.epoch()), zap.String("mode", r.opts.Mode), zap.String("haAddr", r.haAddr))
	if r.state.role() == RoleSlave {
		r.mu.Lock()
		err := r.startClientLocked()
		r.mu.Unlock()
		if err != nil {
			return err
		}
	}
	r.wg.Add(1)
	go r.metadataLoop()
	if r.agent != nil {
		r.agent.start()
		r.wg.Add(1)
		go r.metaPushLoop()
	}
	return nil
}

// startClientLocked starts replicating from the master. r.mu is held.
func (r *Replicator) startClientLocked() error {
	co := ha.DefaultClientOptions()
	co.BrokerName = r.cfg.BrokerName
	co.BrokerID = r.state.id()
	co.HeartbeatInterval = r.opts.HeartbeatInterval
	co.Timeout = r.opts.Timeout
	co.MasterAddr = r.MasterHAAddr
	co.OnWelcome = func(w ha.Welcome) {
		addr := w.MasterAddr
		r.welcomeAddr.Store(&addr)
		if err := r.state.sawEpoch(w.Epoch); err != nil {
			r.log.Warn("persist the master's epoch", zap.Error(err))
		}
		if w.Epochs != nil {
			if err := r.epochs.Replace(w.Epochs); err != nil {
				r.log.Error("save the master's epoch entries", zap.Error(err))
			}
		}
		r.meta.trigger()
	}
	co.Epochs = r.epochs.Entries
	co.TLS = r.cfg.Link.TLS
	co.Credentials = r.cfg.Link.Credentials
	if r.agent != nil {
		co.MinEpoch = r.state.epoch
		co.OnTruncate = r.truncate
	}
	c, err := ha.NewClient(co, haReplica{r.store}, r.log.Named("client"))
	if err != nil {
		return err
	}
	r.client = c
	c.Start()
	return nil
}

// MasterHAAddr is the slave's master HA address: the configured one, else
// what the NameServers said ("" while not known).
func (r *Replicator) MasterHAAddr() string {
	if r.agent != nil {
		if p := r.agent.masterHAAddr.Load(); p != nil {
			return *p
		}
		return ""
	}
	if r.opts.MasterHAAddr != "" {
		return r.opts.MasterHAAddr
	}
	if p := r.nsMasterHAAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// masterAddr is the slave's master client address, for metadata sync.
func (r *Replicator) masterAddr() string {
	if r.agent != nil {
		if p := r.agent.masterAddr.Load(); p != nil && *p != "" {
			return *p
		}
	}
	if p := r.welcomeAddr.Load(); p != nil && *p != "" {
		return *p
	}
	if p := r.nsMasterAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// Close stops replicating and serving slaves, and closes the MasterClient.
func (r *Replicator) Close() error {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	c := r.client
	r.client = nil
	r.mu.Unlock()
	var errs []error
	if c != nil {
		errs = append(errs, c.Close())
	}
	if r.srv != nil {
		errs = append(errs, r.srv.Close())
	}
	r.meta.close()
	if r.agent != nil {
		r.agent.leaseTimer.Stop()
	}
	if r.cfg.Controllers != nil {
		errs = append(errs, r.cfg.Controllers.Close())
	}
	return errors.Join(errs...)
}

// CheckWritable refuses sends on a broker that is not a master, and in
// controller mode on a master without a valid write lease.
func (r *Replicator) CheckWritable() error {
	if err := r.checkRole(); err != nil {
		return err
	}
	if r.agent != nil {
		return r.agent.checkLease(r.state.epoch())
	}
	return nil
}

// checkRole refuses a broker that is not a master.
func (r *Replicator) checkRole() error {
	switch r.state.role() {
	case RoleSlave:
		return errcode.Errorf(errcode.NotMaster, "broker %s/%d is a slave", r.cfg.BrokerName, r.state.id())
	case RoleFenced:
		return errcode.Errorf(errcode.NotMaster, "broker %s at %s was fenced: a newer master (epoch above %d) took over; it is read-only",
			r.cfg.BrokerName, r.cfg.Addr, r.state.epoch())
	}
	return nil
}

// CheckInSync refuses a sync-mode send before it is stored when too few
// slaves are in sync to acknowledge it.
func (r *Replicator) CheckInSync() error {
	if r.opts.Mode != ModeSync {
		return nil
	}
	need := int(r.inSyncReplicas.Load())
	if r.agent != nil {
		if n := len(r.agent.members()); n < need {
			return errcode.Errorf(errcode.InSyncReplicasNotEnough, "broker %s: the sync state set holds %d replicas besides the master, sync replication needs %d",
				r.cfg.BrokerName, n, need)
		}
		return nil
	}
	if n := r.srv.InSync(); n < need {
		return errcode.Errorf(errcode.InSyncReplicasNotEnough, "broker %s has %d in-sync slaves, sync replication needs %d",
			r.cfg.BrokerName, n, need)
	}
	return nil
}

// WaitReplicated returns once the stored messages are held by as many
// slaves as the replication mode requires. In async mode a master
// acknowledges on its own flush; in sync mode InSyncReplicas in-sync slaves
// must have acknowledged the end of the messages within SlaveTimeout.
func (r *Replicator) WaitReplicated(ctx context.Context, res []store.PutResult) error {
	if r.agent != nil {
		return r.waitReplicatedByController(ctx, res)
	}
	if r.opts.Mode != ModeSync || len(res) == 0 {
		return nil
	}
	end := res[len(res)-1].End()
	err := r.srv.WaitReplicated(ctx, end, int(r.inSyncReplicas.Load()), r.opts.SlaveTimeout)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ha.ErrNotEnoughInSync):
		return errcode.Errorf(errcode.InSyncReplicasNotEnough, "stored at %d but not replicated: %v", res[0].PhysicalOffset, err)
	case errors.Is(err, ha.ErrSlaveTimeout):
		return errcode.Errorf(errcode.FlushSlaveTimeout, "stored at %d but not replicated: %v", res[0].PhysicalOffset, err)
	case errors.Is(err, ha.ErrClosed):
		return errcode.Errorf(errcode.ShuttingDown, "broker %s is stopping", r.cfg.BrokerName)
	}
	return r.host.StoreError(err)
}

// SetInSyncReplicas changes how many in-sync slaves a sync-mode send needs,
// from the next send on.
func (r *Replicator) SetInSyncReplicas(n int) { r.inSyncReplicas.Store(int64(n)) }

// Mode is the replication mode, fixed for the broker's life.
func (r *Replicator) Mode() string { return r.opts.Mode }

// Role returns the broker's replication role.
func (r *Replicator) Role() Role { return r.state.role() }

// ID is the broker's current id (0 once promoted).
func (r *Replicator) ID() int64 { return r.state.id() }

// Epoch returns the broker's epoch.
func (r *Replicator) Epoch() int64 { return r.state.epoch() }

// IsMaster reports whether the broker takes writes now: a master that was
// not fenced.
func (r *Replicator) IsMaster() bool { return r.state.role() == RoleMaster }

// Changes returns a channel closed at the next change of role, id or epoch
// (promotion, fencing) and, in controller mode, when the write lease begins
// or runs out (CheckWritable's answer changes): take it, read the state,
// then wait on it.
func (r *Replicator) Changes() <-chan struct{} { return r.state.changes() }

// HAAddr is the advertised HA address.
func (r *Replicator) HAAddr() string { return r.haAddr }

// Server is the HA server (status, tests).
func (r *Replicator) Server() *ha.Server { return r.srv }

// RecordOffset records a consumer offset in the table as
// offsets.Table.Set does. On a slave it is also a local commit that the
// next metadata sync sends to the master.
func (r *Replicator) RecordOffset(group, topic string, queueID int32, offset int64, forwardOnly bool) {
	if r.state.role() == RoleMaster {
		r.cfg.Offsets.Set(group, topic, queueID, offset, forwardOnly)
		return
	}
	r.meta.local.Record(r.cfg.Offsets, group, topic, queueID, offset, forwardOnly)
}

// NameServerAnswer is what replication takes from a NameServer's answer
// to a registration.
type NameServerAnswer struct {
	// MasterAddr and MasterHAAddr are the group's master's client and HA
	// addresses (answers to a slave).
	MasterAddr   string
	MasterHAAddr string
}

// OnRegistered handles a NameServer's answer to a registration with
// brokerID (err: the registration failed): a slave learns where its master
// is; a master told that a newer master exists is fenced.
func (r *Replicator) OnRegistered(ns string, brokerID int64, ans NameServerAnswer, err error) {
	if err != nil {
		if brokerID == 0 && errcode.Of(err) == errcode.NotMaster {
			r.Fence(ns, err)
		}
		return
	}
	if brokerID == 0 || r.agent != nil { // in controller mode the controller names the master
		return
	}
	if a := ans.MasterHAAddr; a != "" {
		if p := r.nsMasterHAAddr.Load(); p == nil || *p != a {
			r.nsMasterHAAddr.Store(&a)
			r.log.Info("master HA address from the name server", zap.String("nameServer", ns), zap.String("masterHA", a))
			r.mu.Lock()
			if r.client != nil && r.opts.MasterHAAddr == "" {
				r.client.Reconnect()
			}
			r.mu.Unlock()
		}
	}
	if a := ans.MasterAddr; a != "" {
		r.nsMasterAddr.Store(&a)
	}
}

// Fence demotes a master that a NameServer refused for a newer epoch: it
// refuses sends and stops serving slaves.
func (r *Replicator) Fence(ns string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.role() != RoleMaster {
		return
	}
	if err := r.state.set(RoleFenced, r.state.id(), r.state.epoch()); err != nil {
		r.log.Error("persist the fenced role", zap.Error(err))
	}
	if r.srv != nil {
		r.srv.DropSlaves()
	}
	r.log.Error("FENCED: a name server refused this master because a newer master of the group registered; "+
		"refusing sends from now on (read-only). Make it a slave of the new master (restart with a broker id > 0, "+
		"after checking its log against the new master's) to bring it back.",
		zap.String("nameServer", ns), zap.Int64("epoch", r.state.epoch()), zap.Error(cause))
}

// Info is the broker's replication state for status calls.
type Info struct {
	Role           Role
	Mode           string
	Epoch          int64
	InSyncReplicas int
	HAAddr         string
	// CommitLogMaxOffset is this broker's own CommitLog end.
	CommitLogMaxOffset int64
	// Master side.
	Slaves       []ha.SlaveStatus
	InSyncSlaves int
	// Slave side: the master's addresses and the replication stream.
	MasterAddr    string
	MasterHAAddr  string
	State         string
	AppliedOffset int64
	MasterOffset  int64
	LagBytes      int64
	LastError     string
	// LastMetadataSync is when metadata was last fetched from the master
	// (zero: never); MetadataError why the last fetch failed.
	LastMetadataSync time.Time
	MetadataError    error
	// Controller mode: the agent's state (nil outside it); Epochs the
	// broker's epoch entries (both modes).
	Controller *ControllerStatus
	Epochs     []ha.EpochEntry
}

// Info returns the broker's replication state.
func (r *Replicator) Info() Info {
	info := Info{
		Role: r.state.role(), Mode: r.opts.Mode, Epoch: r.state.epoch(),
		InSyncReplicas: int(r.inSyncReplicas.Load()), HAAddr: r.haAddr,
		CommitLogMaxOffset: r.store.CommitLog().MaxOffset(),
	}
	info.Slaves = r.srv.Slaves()
	for _, s := range info.Slaves {
		if s.InSync {
			info.InSyncSlaves++
		}
	}
	r.mu.Lock()
	c := r.client
	r.mu.Unlock()
	if c != nil {
		st := c.Status()
		info.MasterAddr = r.masterAddr()
		info.MasterHAAddr = st.MasterHAAddr
		info.State = st.State
		info.AppliedOffset = st.Applied
		info.MasterOffset = st.MasterOffset
		info.LagBytes = st.LagBytes
		info.LastError = st.LastError
	} else if r.state.role() == RoleSlave {
		info.MasterAddr = r.masterAddr()
		info.MasterHAAddr = r.MasterHAAddr()
	}
	info.LastMetadataSync, info.MetadataError = r.meta.status()
	info.Epochs = r.epochs.Entries()
	if r.agent != nil {
		st := r.agent.status()
		info.Controller = &st
	}
	return info
}

// ControllerMode reports whether controllers decide the broker's role.
func (r *Replicator) ControllerMode() bool { return r.agent != nil }

// ReplicaID is the broker's configured id: its permanent replica id in
// controller mode.
func (r *Replicator) ReplicaID() int64 { return r.cfg.BrokerID }

// ForceRole sets the role as a fence or a promotion ends up setting it,
// without their procedure (no checks, no slave handling): for tests of how
// the master-only services follow the role.
func (r *Replicator) ForceRole(role Role) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.set(role, r.state.id(), r.state.epoch())
}
