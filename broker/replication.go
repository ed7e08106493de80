package broker

// Replication. A broker group is one master (broker id 0) and slaves
// (id > 0) holding byte-identical copies of its CommitLog (package ha).
//
//   - Every broker binds an HA listener (Replication.HAListenAddr, default
//     listen port + 1) and registers it (ha_addr) with the NameServers; it
//     serves slaves while it is master. A slave learns its master's HA
//     address from the registration answers (master_ha_addr) unless
//     Replication.MasterHAAddr is set, and replicates from it.
//   - Mode async acknowledges a send after the master's own flush. Mode sync
//     acknowledges it only once InSyncReplicas in-sync slaves acknowledged
//     its end, within SlaveTimeout: too few in-sync slaves fails the send
//     with IN_SYNC_REPLICAS_NOT_ENOUGH before it is stored, or while
//     waiting; a wait past SlaveTimeout fails with FLUSH_SLAVE_TIMEOUT (the
//     message is stored and may still reach the slaves: a retry can
//     duplicate it). Never a silent downgrade.
//   - A slave refuses sends and topic changes (NOT_MASTER), serves pulls,
//     offsets and lookups, and fetches topics, consumer offsets and delayed
//     delivery progress from its master every MetadataSyncInterval
//     (ha_metadata.go, delay.go).
//   - Promote (BrokerHA.Promote, ha_grpc.go) makes a slave the master with a
//     new epoch; a NameServer refuses a master registration whose epoch is
//     below the highest it saw for the group, and a master so refused fences
//     itself: read-only, NOT_MASTER for sends (ha_role.go). Role, id and
//     epoch are saved in <store dir>/config/ha.json.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/membership"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Replication modes.
const (
	// ReplicationAsync acknowledges a send after the master's own flush;
	// slaves follow as fast as they can.
	ReplicationAsync = "async"
	// ReplicationSync acknowledges a send only once InSyncReplicas in-sync
	// slaves hold it; otherwise the send fails (never a silent downgrade).
	ReplicationSync = "sync"
)

// HAPortOffset derives the HA address from the listen port (10911 → 10912,
// RocketMQ's haListenPort).
const HAPortOffset = 1

// ReplicationOptions configure master–slave replication (package ha).
type ReplicationOptions struct {
	// Mode is ReplicationAsync (default) or ReplicationSync.
	Mode string
	// InSyncReplicas is how many in-sync slaves must hold a message before
	// a sync-mode send is acknowledged (1).
	InSyncReplicas int
	// SlaveTimeout bounds a sync-mode send's wait for its slaves (3 s):
	// past it the send fails with FLUSH_SLAVE_TIMEOUT.
	SlaveTimeout time.Duration
	// MaxLagBytes: a slave further behind leaves the in-sync set (256 MiB).
	MaxLagBytes int64
	// HAListenAddr is where a master serves its slaves ("" = the listen
	// address's port + 1; port 0 picks a free port). Every broker binds it,
	// so a promoted slave serves slaves at once.
	HAListenAddr string
	// HAAdvertiseAddr is the HA address registered with the NameServers
	// ("" = the bound HA address, with the client address's host when it
	// binds all interfaces).
	HAAdvertiseAddr string
	// MasterHAAddr is a slave's master HA address; "" = learn it from the
	// NameServers' registration answers.
	MasterHAAddr string
	// HeartbeatInterval (1 s) and Timeout (5 s) of the HA connection:
	// either side drops a connection silent for Timeout.
	HeartbeatInterval time.Duration
	Timeout           time.Duration
	// MaxFrameBytes bounds one replication frame (256 KiB).
	MaxFrameBytes int
	// MetadataSyncInterval is how often a slave fetches topics and consumer
	// offsets from its master (3 s).
	MetadataSyncInterval time.Duration
}

func defaultReplicationOptions() ReplicationOptions {
	return ReplicationOptions{
		Mode:                 ReplicationAsync,
		InSyncReplicas:       1,
		SlaveTimeout:         3 * time.Second,
		MaxLagBytes:          256 << 20,
		HeartbeatInterval:    time.Second,
		Timeout:              5 * time.Second,
		MaxFrameBytes:        256 << 10,
		MetadataSyncInterval: 3 * time.Second,
	}
}

func (o *ReplicationOptions) validate() error {
	var errs []error
	if o.Mode != ReplicationAsync && o.Mode != ReplicationSync {
		errs = append(errs, fmt.Errorf("broker: replication mode %q must be %q or %q", o.Mode, ReplicationAsync, ReplicationSync))
	}
	if o.InSyncReplicas < 1 || o.InSyncReplicas > 16 {
		errs = append(errs, fmt.Errorf("broker: in-sync replicas %d not in 1..16", o.InSyncReplicas))
	}
	if o.SlaveTimeout <= 0 || o.MaxLagBytes <= 0 || o.MetadataSyncInterval <= 0 {
		errs = append(errs, errors.New("broker: slave timeout, max lag bytes and metadata sync interval must be positive"))
	}
	if o.HeartbeatInterval <= 0 || o.Timeout <= o.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("broker: HA heartbeat interval %v must be positive and below the HA timeout %v", o.HeartbeatInterval, o.Timeout))
	}
	if o.MaxFrameBytes < 4096 || o.MaxFrameBytes > ha.MaxDataLen {
		errs = append(errs, fmt.Errorf("broker: HA max frame bytes %d not in 4096..%d", o.MaxFrameBytes, ha.MaxDataLen))
	}
	return errors.Join(errs...)
}

// replicator is the broker's replication: its role and epoch, the HA server
// (every broker runs one; it serves slaves while the broker is master), the
// HA client (while a slave), and the slave's metadata sync.
type replicator struct {
	b     *Broker
	opts  ReplicationOptions
	log   *zap.Logger
	state *roleState

	srv    *ha.Server
	haAddr string // advertised

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

// newReplicator loads the saved role and binds the HA listener; Start
// serves it.
func newReplicator(b *Broker) (*replicator, error) {
	st, err := loadRoleState(b.opts.StoreDir, b.opts.BrokerID, b.log)
	if err != nil {
		return nil, err
	}
	r := &replicator{b: b, opts: b.opts.Replication, log: b.log.Named("ha"), state: st}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.meta.init()
	addr, err := b.opts.haListenAddr()
	if err != nil {
		return nil, err
	}
	so := ha.DefaultServerOptions()
	so.ListenAddr = addr
	so.BrokerName = b.opts.BrokerName
	so.MasterAddr = b.addr
	so.HeartbeatInterval = r.opts.HeartbeatInterval
	so.Timeout = r.opts.Timeout
	so.MaxFrameBytes = r.opts.MaxFrameBytes
	so.MaxLagBytes = r.opts.MaxLagBytes
	so.Epoch = r.state.epoch
	so.Serving = func() error {
		if role := r.state.role(); role != RoleMaster {
			return fmt.Errorf("broker %s at %s is %s, not a master", b.opts.BrokerName, b.addr, role)
		}
		return nil
	}
	if r.srv, err = ha.NewServer(so, haSource{b.store.CommitLog()}, r.log.Named("server")); err != nil {
		return nil, err
	}
	r.haAddr = r.opts.HAAdvertiseAddr
	if r.haAddr == "" {
		r.haAddr = advertised(r.srv.Addr(), b.addr)
	}
	return r, nil
}

// haListenAddr is the address the HA server binds.
func (o *Options) haListenAddr() (string, error) {
	if a := o.Replication.HAListenAddr; a != "" {
		return a, nil
	}
	a := membership.DeriveGossipAddr(o.ListenAddr, HAPortOffset)
	if a == "" {
		return "", fmt.Errorf("broker: cannot derive the HA address from %q; set the HA listen address", o.ListenAddr)
	}
	return a, nil
}

// advertised replaces an unspecified bound host with the client address's.
func advertised(bound, client string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ch, _, err := net.SplitHostPort(client); err == nil {
			return net.JoinHostPort(ch, port)
		}
	}
	return bound
}

// startReplication serves slaves and, on a slave, starts replicating.
func (b *Broker) startReplication() error {
	r := b.repl
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
	return nil
}

// startClientLocked starts replicating from the master. r.mu is held.
func (r *replicator) startClientLocked() error {
	co := ha.DefaultClientOptions()
	co.BrokerName = r.b.opts.BrokerName
	co.BrokerID = r.state.id()
	co.HeartbeatInterval = r.opts.HeartbeatInterval
	co.Timeout = r.opts.Timeout
	co.MasterAddr = r.masterHAAddr
	co.OnWelcome = func(w ha.Welcome) {
		addr := w.MasterAddr
		r.welcomeAddr.Store(&addr)
		if err := r.state.sawEpoch(w.Epoch); err != nil {
			r.log.Warn("persist the master's epoch", zap.Error(err))
		}
		r.meta.trigger()
	}
	c, err := ha.NewClient(co, haReplica{r.b.store}, r.log.Named("client"))
	if err != nil {
		return err
	}
	r.client = c
	c.Start()
	return nil
}

// masterHAAddr is the slave's master HA address: the configured one, else
// what the NameServers said.
func (r *replicator) masterHAAddr() string {
	if r.opts.MasterHAAddr != "" {
		return r.opts.MasterHAAddr
	}
	if p := r.nsMasterHAAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// masterAddr is the slave's master client address, for metadata sync.
func (r *replicator) masterAddr() string {
	if p := r.welcomeAddr.Load(); p != nil && *p != "" {
		return *p
	}
	if p := r.nsMasterAddr.Load(); p != nil {
		return *p
	}
	return ""
}

func (b *Broker) stopReplication() error {
	r := b.repl
	if r == nil {
		return nil
	}
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
	return errors.Join(errs...)
}

// checkWritable refuses sends on a broker that is not a master.
func (b *Broker) checkWritable() error {
	switch b.repl.state.role() {
	case RoleSlave:
		return wire.Errorf(pb.Code_NOT_MASTER, "broker %s/%d is a slave", b.opts.BrokerName, b.brokerID())
	case RoleFenced:
		return wire.Errorf(pb.Code_NOT_MASTER, "broker %s at %s was fenced: a newer master (epoch above %d) took over; it is read-only",
			b.opts.BrokerName, b.addr, b.repl.state.epoch())
	}
	return nil
}

// checkInSync refuses a sync-mode send before it is stored when too few
// slaves are in sync to acknowledge it.
func (b *Broker) checkInSync() error {
	r := b.repl
	if r.opts.Mode != ReplicationSync {
		return nil
	}
	if n := r.srv.InSync(); n < r.opts.InSyncReplicas {
		return wire.Errorf(pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH, "broker %s has %d in-sync slaves, sync replication needs %d",
			b.opts.BrokerName, n, r.opts.InSyncReplicas)
	}
	return nil
}

// waitReplicated returns once the stored messages are held by as many
// slaves as the replication mode requires. In async mode a master
// acknowledges on its own flush; in sync mode InSyncReplicas in-sync slaves
// must have acknowledged the end of the messages within SlaveTimeout.
func (b *Broker) waitReplicated(ctx context.Context, res []store.PutResult) error {
	r := b.repl
	if r.opts.Mode != ReplicationSync || len(res) == 0 {
		return nil
	}
	end := res[len(res)-1].End()
	err := r.srv.WaitReplicated(ctx, end, r.opts.InSyncReplicas, r.opts.SlaveTimeout)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ha.ErrNotEnoughInSync):
		return wire.Errorf(pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH, "stored at %d but not replicated: %v", res[0].PhysicalOffset, err)
	case errors.Is(err, ha.ErrSlaveTimeout):
		return wire.Errorf(pb.Code_FLUSH_SLAVE_TIMEOUT, "stored at %d but not replicated: %v", res[0].PhysicalOffset, err)
	case errors.Is(err, ha.ErrClosed):
		return wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", b.opts.BrokerName)
	}
	return storeError(err)
}

// brokerID is the broker's current id (0 once promoted).
func (b *Broker) brokerID() int64 { return b.repl.state.id() }

// IsMaster reports whether the broker takes writes now: a master that was
// not fenced. Services that write (delayed delivery, transaction checks)
// run only while it holds.
func (b *Broker) IsMaster() bool { return b.repl.state.role() == RoleMaster }

// Role returns the broker's replication role.
func (b *Broker) Role() Role { return b.repl.state.role() }

// Epoch returns the broker's epoch.
func (b *Broker) Epoch() int64 { return b.repl.state.epoch() }

// HAAddr is the advertised HA address.
func (b *Broker) HAAddr() string { return b.repl.haAddr }

// HAServerAddr is the bound HA address.
func (b *Broker) HAServerAddr() string { return b.repl.srv.Addr() }

// onRegistered handles a NameServer's answer: a slave learns where its
// master is; a master told that a newer master exists is fenced.
func (r *replicator) onRegistered(ns string, req *pb.RegisterBrokerRequest, resp *pb.RegisterBrokerResponse, err error) {
	if err != nil {
		if req.BrokerId == 0 && wire.CodeOf(err) == pb.Code_NOT_MASTER {
			r.fence(ns, err)
		}
		return
	}
	if req.BrokerId == 0 {
		return
	}
	if a := resp.GetMasterHaAddr(); a != "" {
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
	if a := resp.GetMasterAddr(); a != "" {
		r.nsMasterAddr.Store(&a)
	}
}

// fence demotes a master that a NameServer refused for a newer epoch: it
// refuses sends and stops serving slaves.
func (r *replicator) fence(ns string, cause error) {
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

// replicationInfo is the broker's replication state for status calls.
func (b *Broker) replicationInfo() *pb.ReplicationInfo {
	r := b.repl
	info := &pb.ReplicationInfo{
		Role: r.state.role().String(), Mode: r.opts.Mode, Epoch: r.state.epoch(),
		InSyncReplicas: int32(r.opts.InSyncReplicas), HaAddr: r.haAddr,
		CommitLogMaxOffset: b.store.CommitLog().MaxOffset(),
	}
	for _, s := range r.srv.Slaves() {
		info.Slaves = append(info.Slaves, &pb.SlaveInfo{
			BrokerId: s.BrokerID, RemoteAddr: s.RemoteAddr, Connected: s.Connected, AckOffset: s.AckOffset,
			LagBytes: s.LagBytes, LagMs: s.LagMs, InSync: s.InSync, LastHeardMs: s.LastHeard.UnixMilli(),
			ConnectedAtMs: s.ConnectedAt.UnixMilli(),
		})
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
		info.MasterHaAddr = st.MasterHAAddr
		info.State = st.State
		info.AppliedOffset = st.Applied
		info.MasterOffset = st.MasterOffset
		info.LagBytes = st.LagBytes
		info.LastError = st.LastError
	} else if r.state.role() == RoleSlave {
		info.MasterAddr = r.masterAddr()
		info.MasterHaAddr = r.masterHAAddr()
	}
	last, merr := r.meta.status()
	if !last.IsZero() {
		info.LastMetadataSyncMs = last.UnixMilli()
	}
	if merr != nil {
		info.MetadataError = merr.Error()
	}
	return info
}

// dialMaster opens (or reuses) a gRPC connection to addr.
func (m *metaSync) dial(addr string) (*grpc.ClientConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn != nil && m.connAddr == addr {
		return m.conn, nil
	}
	if m.conn != nil {
		_ = m.conn.Close()
		m.conn = nil
	}
	conn, err := dialGRPC(addr)
	if err != nil {
		return nil, err
	}
	m.conn, m.connAddr = conn, addr
	return conn, nil
}
