package client

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ClusterInfo is what a NameServer knows about brokers.
type ClusterInfo struct {
	// Brokers by broker name; Clusters maps a cluster to its broker names.
	Brokers  map[string]BrokerData
	Clusters map[string][]string
	Live     []BrokerLive
}

// BrokerLive is one registered broker.
type BrokerLive struct {
	Cluster, BrokerName     string
	BrokerID                int64
	Addr, HAAddr, AdminAddr string
	Version                 string
	LastUpdate              time.Time
	TopicCount              int32
}

// targets returns the broker groups a topic is created on.
func (ci *ClusterInfo) targets(cluster string, names []string) ([]BrokerData, error) {
	var out []BrokerData
	switch {
	case len(names) > 0:
		for _, n := range names {
			bd, ok := ci.Brokers[n]
			if !ok {
				return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "broker %q is not registered", n)
			}
			out = append(out, bd)
		}
	case cluster != "":
		bns, ok := ci.Clusters[cluster]
		if !ok {
			return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "cluster %q is not registered", cluster)
		}
		for _, n := range bns {
			if bd, ok := ci.Brokers[n]; ok {
				out = append(out, bd)
			}
		}
	default:
		out = ci.allBrokers()
	}
	if len(out) == 0 {
		return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "no broker registered")
	}
	return out, nil
}

func (ci *ClusterInfo) allBrokers() []BrokerData {
	out := make([]BrokerData, 0, len(ci.Brokers))
	for _, bd := range ci.Brokers {
		out = append(out, bd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerName < out[j].BrokerName })
	return out
}

// brokerName returns the group an address belongs to ("" if unknown).
func (ci *ClusterInfo) brokerName(addr string) string {
	for name, bd := range ci.Brokers {
		for _, a := range bd.Addrs {
			if a == addr {
				return name
			}
		}
	}
	return ""
}

// ClusterInfo returns the brokers and clusters a NameServer knows.
func (a *Admin) ClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var ci *ClusterInfo
	err := a.b.ns.call(ctx, func(ctx context.Context, c pb.NameServerClient) error {
		resp, err := c.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		if err := fromStatus(resp.GetStatus()); err != nil {
			return err
		}
		ci = &ClusterInfo{Brokers: make(map[string]BrokerData), Clusters: make(map[string][]string)}
		for name, bd := range resp.GetBrokers() {
			d := brokerDataFromProto(bd)
			if d.BrokerName == "" {
				d.BrokerName = name
			}
			ci.Brokers[name] = d
		}
		for name, cb := range resp.GetClusters() {
			names := append([]string(nil), cb.GetBrokerNames()...)
			sort.Strings(names)
			ci.Clusters[name] = names
		}
		for _, l := range resp.GetLive() {
			ci.Live = append(ci.Live, BrokerLive{
				Cluster: l.GetCluster(), BrokerName: l.GetBrokerName(), BrokerID: l.GetBrokerId(),
				Addr: l.GetBrokerAddr(), HAAddr: l.GetHaAddr(), AdminAddr: l.GetAdminAddr(), Version: l.GetVersion(),
				LastUpdate: time.UnixMilli(l.GetLastUpdateMs()), TopicCount: l.GetTopicCount(),
			})
		}
		sort.Slice(ci.Live, func(i, j int) bool {
			x, y := ci.Live[i], ci.Live[j]
			return x.BrokerName < y.BrokerName || x.BrokerName == y.BrokerName && x.BrokerID < y.BrokerID
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return ci, nil
}

// BrokerInfo describes one broker.
type BrokerInfo struct {
	Cluster, BrokerName string
	BrokerID            int64
	Addr, Version       string
	Role, FlushMode     string
	CommitLogMinOffset  int64
	CommitLogMaxOffset  int64
	DispatchBehindBytes int64
	DiskUsedRatio       float64
	StoreBytes          int64
	StartTime           time.Time
}

// BrokerInfo asks the broker at addr about itself.
func (a *Admin) BrokerInfo(ctx context.Context, addr string) (*BrokerInfo, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var r *pb.GetBrokerInfoResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, err
	}
	return &BrokerInfo{
		Cluster: r.GetCluster(), BrokerName: r.GetBrokerName(), BrokerID: r.GetBrokerId(), Addr: r.GetAddr(),
		Version: r.GetVersion(), Role: r.GetRole(), FlushMode: r.GetFlushMode(),
		CommitLogMinOffset: r.GetCommitLogMinOffset(), CommitLogMaxOffset: r.GetCommitLogMaxOffset(),
		DispatchBehindBytes: r.GetDispatchBehindBytes(), DiskUsedRatio: r.GetDiskUsedRatio(),
		StoreBytes: r.GetStoreBytes(), StartTime: time.UnixMilli(r.GetStartTimeMs()),
	}, nil
}

// ReplicationStatus is a broker's replication state.
type ReplicationStatus struct {
	// Addr is the address asked.
	Addr string
	// Role is MASTER, SLAVE, or FENCED: a master that a newer master of
	// its group replaced, read-only.
	Role string
	// Mode is async, or sync: a send is acknowledged once InSyncReplicas
	// in-sync slaves have it.
	Mode           string
	Epoch          int64
	InSyncReplicas int32
	// HAAddr is the broker's replication address; CommitLogMaxOffset
	// where its own CommitLog ends.
	HAAddr             string
	CommitLogMaxOffset int64

	// Master side: its slaves, by broker id, and how many are in sync.
	Slaves       []SlaveStatus
	InSyncSlaves int32

	// Slave side: its master's addresses, the state of the replication
	// stream (IDLE, CONNECTING, REPLICATING, DIVERGED or STOPPED), how far
	// it applied the master's log and the master's log end as last heard,
	// and the last error. LastMetadataSync is when it last took its
	// master's topics and offsets (zero: never), MetadataError why the
	// last attempt failed.
	MasterAddr, MasterHAAddr string
	State                    string
	AppliedOffset            int64
	MasterOffset             int64
	LagBytes                 int64
	LastError                string
	LastMetadataSync         time.Time
	MetadataError            string

	// Controller mode (automatic failover; ControllerMode false: the group
	// fails over by hand). ReplicaID is the broker's permanent id in its
	// group; SyncStateSet the replica ids holding every acknowledged
	// message, as the broker last learned it from the controller, with its
	// epoch; LeaseRemaining how long a master may still accept writes
	// without the controller leader renewing its lease; ControllerLeader
	// the controller leader's id; ConfirmOffset the master's offset the
	// whole sync state set acknowledged; Epochs the broker's epoch entries
	// (who wrote which part of its CommitLog).
	ControllerMode    bool
	ReplicaID         int64
	SyncStateSet      []int64
	SyncStateSetEpoch int64
	LeaseRemaining    time.Duration
	ControllerLeader  string
	ConfirmOffset     int64
	Epochs            []EpochEntry
}

// EpochEntry says the bytes of a CommitLog from StartOffset on (up to the
// next entry's) were written by the master of Epoch.
type EpochEntry struct {
	Epoch, StartOffset int64
}

// SlaveStatus is one slave as its master sees it.
type SlaveStatus struct {
	BrokerID   int64
	RemoteAddr string
	Connected  bool
	// AckOffset is the last CommitLog offset the slave acknowledged;
	// LagBytes how far it is behind the master's committed offset; LagTime
	// how much older the slave's newest record is than the master's.
	AckOffset int64
	LagBytes  int64
	LagTime   time.Duration
	InSync    bool
	// LastHeard and ConnectedAt are zero when unknown.
	LastHeard   time.Time
	ConnectedAt time.Time
}

func (a *Admin) haClient(addr string) (pb.BrokerHAClient, error) {
	cc, err := a.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewBrokerHAClient(cc), nil
}

// ReplicationStatus asks the broker at addr (its client address) about its
// replication: role, mode, epoch and log end; a master's slaves; a slave's
// master, stream state and lag.
func (a *Admin) ReplicationStatus(ctx context.Context, addr string) (*ReplicationStatus, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	c, err := a.haClient(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := c.ReplicationStatus(rctx, &pb.ReplicationStatusRequest{})
	err = brokerFailure(ctx, addr, err)
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("replication status of %s: %w", addr, err)
	}
	return replicationFromProto(addr, resp.GetReplication()), nil
}

func replicationFromProto(addr string, r *pb.ReplicationInfo) *ReplicationStatus {
	s := &ReplicationStatus{
		Addr: addr, Role: r.GetRole(), Mode: r.GetMode(), Epoch: r.GetEpoch(), InSyncReplicas: r.GetInSyncReplicas(),
		HAAddr: r.GetHaAddr(), CommitLogMaxOffset: r.GetCommitLogMaxOffset(), InSyncSlaves: r.GetInSyncSlaves(),
		MasterAddr: r.GetMasterAddr(), MasterHAAddr: r.GetMasterHaAddr(), State: r.GetState(),
		AppliedOffset: r.GetAppliedOffset(), MasterOffset: r.GetMasterOffset(), LagBytes: r.GetLagBytes(),
		LastError: r.GetLastError(), LastMetadataSync: msTime(r.GetLastMetadataSyncMs()), MetadataError: r.GetMetadataError(),
		ControllerMode: r.GetControllerMode(), ReplicaID: r.GetReplicaId(),
		SyncStateSet: slices.Sorted(slices.Values(r.GetSyncStateSet())), SyncStateSetEpoch: r.GetSyncStateSetEpoch(),
		LeaseRemaining: time.Duration(r.GetLeaseRemainingMs()) * time.Millisecond, ControllerLeader: r.GetControllerLeader(),
		ConfirmOffset: r.GetConfirmOffset(),
	}
	for _, e := range r.GetEpochs() {
		s.Epochs = append(s.Epochs, EpochEntry{Epoch: e.GetEpoch(), StartOffset: e.GetStartOffset()})
	}
	for _, sl := range r.GetSlaves() {
		s.Slaves = append(s.Slaves, SlaveStatus{
			BrokerID: sl.GetBrokerId(), RemoteAddr: sl.GetRemoteAddr(), Connected: sl.GetConnected(),
			AckOffset: sl.GetAckOffset(), LagBytes: sl.GetLagBytes(), LagTime: time.Duration(sl.GetLagMs()) * time.Millisecond,
			InSync: sl.GetInSync(), LastHeard: msTime(sl.GetLastHeardMs()), ConnectedAt: msTime(sl.GetConnectedAtMs()),
		})
	}
	sort.Slice(s.Slaves, func(i, j int) bool { return s.Slaves[i].BrokerID < s.Slaves[j].BrokerID })
	return s
}

// msTime converts milliseconds since the epoch; 0 (unknown) is the zero
// time.
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// PromoteResult is what Promote did.
type PromoteResult struct {
	// Epoch is the new master's epoch; PreviousBrokerID the id it had.
	Epoch            int64
	PreviousBrokerID int64
	// CommitLogMaxOffset is where the new master's log ends: every byte
	// below it was replicated from the old master.
	CommitLogMaxOffset int64
	// Registered: every NameServer accepted the new master. When false it
	// keeps registering every interval (see its log).
	Registered bool
}

// promoteTimeout bounds a promotion: the broker adopts its queue offsets
// and registers with every NameServer before it answers.
const promoteTimeout = time.Minute

// PromoteOption modifies a Promote.
type PromoteOption func(*promoteOptions)

type promoteOptions struct{ force bool }

// ForcePromotion promotes the slave even when it would drop acknowledged
// messages: when it is behind what its master last acknowledged, or (in
// controller mode) outside the sync state set. Without it the broker
// refuses such a promotion.
func ForcePromotion() PromoteOption { return func(o *promoteOptions) { o.force = true } }

// Promote makes the slave at addr (its client address) the master of its
// broker group: it stops replicating, takes a new epoch and registers as
// broker id 0; the NameServers then route the group to it and refuse the
// old master, which fences itself (read-only). brokerName, when not "",
// must be the slave's group: a guard against promoting the wrong broker.
// epoch 0 takes one more than the highest epoch the slave knows; another
// epoch must be above it. Promoting a master, a wrong group or a stale
// epoch is an error matching ErrInvalidParameter; a promotion that would
// drop acknowledged messages is refused unless ForcePromotion is given.
// A broker in controller mode asks the controller to elect it (see
// ElectMaster). The call is bounded by ctx and a minute, not by the RPC
// timeout.
func (a *Admin) Promote(ctx context.Context, addr, brokerName string, epoch int64, opts ...PromoteOption) (*PromoteResult, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "epoch must not be negative, got %d", epoch)
	}
	var po promoteOptions
	for _, o := range opts {
		if o != nil {
			o(&po)
		}
	}
	req := &pb.PromoteRequest{BrokerName: brokerName, Epoch: epoch, Force: po.force}
	c, err := a.haClient(addr)
	if err != nil {
		return nil, err
	}
	pctx, cancel := withTimeout(ctx, promoteTimeout)
	defer cancel()
	resp, err := c.Promote(pctx, req)
	err = brokerFailure(ctx, addr, err)
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("promote %s: %w", addr, err)
	}
	return &PromoteResult{Epoch: resp.GetEpoch(), PreviousBrokerID: resp.GetPreviousBrokerId(),
		CommitLogMaxOffset: resp.GetCommitLogMaxOffset(), Registered: resp.GetRegistered()}, nil
}
