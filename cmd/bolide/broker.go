package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
)

func newBrokerCmd(a *app) *cobra.Command {
	return groupCmd("broker", "Show a broker's replication state and running figures; change its configuration and write permission; promote a slave",
		"  bolide broker status 127.0.0.1:10911\n  bolide broker runtime --broker broker-a\n  bolide broker write-perm broker-a off\n  bolide broker promote --broker 127.0.0.1:10921",
		newBrokerStatusCmd(a),
		newBrokerPromoteCmd(a),
		newBrokerRuntimeCmd(a),
		newBrokerConfigCmd(a),
		newBrokerWritePermCmd(a),
	)
}

// replicationJSON is broker status's output.
type replicationJSON struct {
	Addr               string `json:"addr"`
	Role               string `json:"role"`
	Mode               string `json:"mode"`
	Epoch              int64  `json:"epoch"`
	InSyncReplicas     int32  `json:"inSyncReplicas"`
	HAAddr             string `json:"haAddr"`
	CommitLogMaxOffset int64  `json:"commitLogMaxOffset"`
	// Master side.
	InSyncSlaves int32       `json:"inSyncSlaves"`
	Slaves       []slaveJSON `json:"slaves"`
	// Slave side.
	MasterAddr       string `json:"masterAddr,omitempty"`
	MasterHAAddr     string `json:"masterHaAddr,omitempty"`
	State            string `json:"state,omitempty"`
	AppliedOffset    int64  `json:"appliedOffset"`
	MasterOffset     int64  `json:"masterOffset"`
	LagBytes         int64  `json:"lagBytes"`
	LastError        string `json:"lastError,omitempty"`
	LastMetadataSync string `json:"lastMetadataSync,omitempty"`
	MetadataError    string `json:"metadataError,omitempty"`
	// Controller mode (automatic failover).
	ControllerMode    bool        `json:"controllerMode"`
	ReplicaID         int64       `json:"replicaId,omitempty"`
	SyncStateSet      []int64     `json:"syncStateSet,omitempty"`
	SyncStateSetEpoch int64       `json:"syncStateSetEpoch,omitempty"`
	LeaseRemainingMs  int64       `json:"leaseRemainingMs,omitempty"`
	ConfirmOffset     int64       `json:"confirmOffset,omitempty"`
	ControllerLeader  string      `json:"controllerLeader,omitempty"`
	Epochs            []epochJSON `json:"epochs,omitempty"`
	// Controller is the controllers' view of the broker's group, when
	// they answered.
	Controller       *groupStateJSON `json:"controller,omitempty"`
	lastMetadataSync time.Time
	leader           *client.ControllerStatus
}

// epochJSON is one epoch entry: the bytes from StartOffset on were written
// by the master of Epoch.
type epochJSON struct {
	Epoch       int64 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

// slaveJSON is one slave as its master sees it.
type slaveJSON struct {
	BrokerID    int64  `json:"brokerId"`
	RemoteAddr  string `json:"remoteAddr"`
	Connected   bool   `json:"connected"`
	AckOffset   int64  `json:"ackOffset"`
	LagBytes    int64  `json:"lagBytes"`
	LagMs       int64  `json:"lagMs"`
	InSync      bool   `json:"inSync"`
	LastHeard   string `json:"lastHeard"`
	ConnectedAt string `json:"connectedAt"`
	lastHeard   time.Time
}

func toReplicationJSON(r *client.ReplicationStatus) replicationJSON {
	j := replicationJSON{
		Addr: r.Addr, Role: r.Role, Mode: r.Mode, Epoch: r.Epoch, InSyncReplicas: r.InSyncReplicas,
		HAAddr: r.HAAddr, CommitLogMaxOffset: r.CommitLogMaxOffset, InSyncSlaves: r.InSyncSlaves,
		Slaves: []slaveJSON{}, MasterAddr: r.MasterAddr, MasterHAAddr: r.MasterHAAddr, State: r.State,
		AppliedOffset: r.AppliedOffset, MasterOffset: r.MasterOffset, LagBytes: r.LagBytes,
		LastError: r.LastError, MetadataError: r.MetadataError,
		LastMetadataSync: jsonTime(r.LastMetadataSync), lastMetadataSync: r.LastMetadataSync,
		ControllerMode: r.ControllerMode, ReplicaID: r.ReplicaID, SyncStateSet: r.SyncStateSet,
		SyncStateSetEpoch: r.SyncStateSetEpoch, LeaseRemainingMs: r.LeaseRemaining.Milliseconds(),
		ConfirmOffset: r.ConfirmOffset, ControllerLeader: r.ControllerLeader,
	}
	for _, e := range r.Epochs {
		j.Epochs = append(j.Epochs, epochJSON{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	for _, s := range r.Slaves {
		j.Slaves = append(j.Slaves, slaveJSON{
			BrokerID: s.BrokerID, RemoteAddr: s.RemoteAddr, Connected: s.Connected,
			AckOffset: s.AckOffset, LagBytes: s.LagBytes, LagMs: s.LagTime.Milliseconds(), InSync: s.InSync,
			LastHeard: jsonTime(s.LastHeard), ConnectedAt: jsonTime(s.ConnectedAt), lastHeard: s.LastHeard,
		})
	}
	return j
}

func newBrokerStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status ADDR",
		Short: "Show a broker's replication role, epoch, log end and slaves",
		Long: `Ask the broker at ADDR (its client address, host:port) about its replication: its role
(MASTER, SLAVE, or FENCED: a master a newer one replaced, read-only), the replication mode
(async, or sync: a send is acknowledged once the in-sync slaves have it), its epoch and
where its CommitLog ends. A master lists its slaves with the offset each acknowledged, how
far behind it is and whether it is in sync; a slave shows its master, the state of the
replication stream and how many bytes it is behind.

In controller mode (automatic failover, docs/failover.md) it also shows the broker's
replica id, the sync state set it last learned (the replicas holding every acknowledged
message) with its epoch, a master's write lease left and confirm offset (what the whole
sync state set acknowledged), its epoch entries, and the controller leader with the
group as the controllers committed it.`,
		Example: `  bolide broker status 127.0.0.1:10911
  bolide broker status 127.0.0.1:10921 -o json`,
		Args: exactArgs(1, "the broker's ADDR (host:port)"),
		RunE: func(_ *cobra.Command, args []string) error {
			addr := args[0]
			if err := checkHostPort(addr); err != nil {
				return usageErrorf("ADDR: %v", err)
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			info, err := adm.ReplicationStatus(ctx, addr)
			if err != nil {
				return a.brokerError(addr, err)
			}
			j := toReplicationJSON(info)
			if info.ControllerMode {
				if cs, groups := a.controllerGroups(ctx, adm); cs != nil {
					j.leader = cs
					if cs.Leader != "" {
						j.ControllerLeader = cs.Leader
					}
					bi, err := adm.BrokerInfo(ctx, addr)
					if err == nil {
						if g, ok := groups[bi.BrokerName]; ok {
							gj := toGroupStateJSON(g)
							j.Controller = &gj
						}
					}
				}
			}
			if a.json() {
				return a.emit(j)
			}
			return writeReplication(a.stdout, j, time.Now())
		},
	}
}

// writeReplication prints broker status's table output.
func writeReplication(w io.Writer, j replicationJSON, now time.Time) error {
	field := func(name string, v any) { fmt.Fprintf(w, "%-16s %s\n", name+":", cell(v)) }
	field("Broker", j.Addr)
	field("Role", j.Role)
	field("Mode", fmt.Sprintf("%s (in-sync replicas %d)", j.Mode, j.InSyncReplicas))
	field("Epoch", j.Epoch)
	field("HA address", j.HAAddr)
	field("CommitLog end", j.CommitLogMaxOffset)
	if j.ControllerMode {
		writeControllerFields(field, j)
	}
	if j.Role == "SLAVE" {
		master := cell(j.MasterAddr)
		if j.MasterHAAddr != "" {
			master += " (HA " + j.MasterHAAddr + ")"
		}
		field("Master", master)
		field("State", j.State)
		field("Applied offset", j.AppliedOffset)
		field("Master offset", j.MasterOffset)
		field("Lag", humanBytes(j.LagBytes))
		field("Last error", j.LastError)
		sync := formatTime(j.lastMetadataSync)
		if !j.lastMetadataSync.IsZero() {
			sync += " (" + age(j.lastMetadataSync, now) + " ago)"
		}
		field("Metadata sync", sync)
		if j.MetadataError != "" {
			field("Metadata error", j.MetadataError)
		}
		return nil
	}
	field("In-sync slaves", fmt.Sprintf("%d of %d", j.InSyncSlaves, len(j.Slaves)))
	if len(j.Slaves) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable("SLAVE ID", "ADDRESS", "CONNECTED", "ACKED OFFSET", "LAG", "LAG MS", "IN SYNC", "LAST HEARD")
	for _, s := range j.Slaves {
		t.row(s.BrokerID, s.RemoteAddr, yesNo(s.Connected), s.AckOffset, humanBytes(s.LagBytes), s.LagMs,
			yesNo(s.InSync), age(s.lastHeard, now)+" ago")
	}
	return t.write(w)
}

// writeControllerFields prints broker status's controller-mode lines.
func writeControllerFields(field func(string, any), j replicationJSON) {
	field("Replica id", j.ReplicaID)
	field("Sync state set", fmt.Sprintf("%s (epoch %d)", idList(j.SyncStateSet), j.SyncStateSetEpoch))
	if j.Role == "MASTER" {
		field("Write lease", fmt.Sprintf("%v left", time.Duration(j.LeaseRemainingMs)*time.Millisecond))
		field("Confirm offset", j.ConfirmOffset)
	}
	var epochs []string
	for _, e := range j.Epochs {
		epochs = append(epochs, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
	}
	field("Epoch entries", joinOrDash(epochs, ", "))
	leader := cell(j.ControllerLeader)
	if j.leader != nil {
		leader = leaderLine(j.leader)
	}
	field("Controller", leader)
	if g := j.Controller; g != nil {
		master := "none"
		if g.MasterID != 0 {
			master = fmt.Sprintf("replica %d at %s", g.MasterID, cell(g.MasterAddr))
		}
		field("Committed", fmt.Sprintf("master %s, epoch %d, sync state set %s (epoch %d)", master, g.Epoch,
			idList(g.SyncStateSet), g.SyncStateSetEpoch))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// promoteJSON is broker promote's output. In controller mode Mode is
// "controller", MasterID the elected replica and SyncStateSet the group's
// new sync state set; PreviousBrokerID, CommitLogMaxOffset and Registered
// are the broker's answer to a promotion by hand (Mode "manual").
type promoteJSON struct {
	Broker             string  `json:"broker"`
	Addr               string  `json:"addr"`
	Status             string  `json:"status"`
	Mode               string  `json:"mode"`
	Epoch              int64   `json:"epoch"`
	Forced             bool    `json:"forced"`
	PreviousBrokerID   int64   `json:"previousBrokerId"`
	CommitLogMaxOffset int64   `json:"commitLogMaxOffset"`
	Registered         bool    `json:"registered"`
	MasterID           int64   `json:"masterId,omitempty"`
	SyncStateSet       []int64 `json:"syncStateSet,omitempty"`
}

func newBrokerPromoteCmd(a *app) *cobra.Command {
	var addr, name string
	var epoch int64
	var force bool
	c := &cobra.Command{
		Use:   "promote (--broker ADDR | --broker-name NAME) [--epoch N] [--force]",
		Short: "Make a slave the master of its broker group",
		Long: `Make a slave the master of its broker group: it stops replicating, takes a new epoch and
registers as broker id 0; the NameServers then route the group's reads and writes to it, and
refuse the old master (which fences itself, read-only) if it comes back.

--broker names the slave to promote by its client address; with --broker-name too, the
slave must belong to that group. With --broker-name alone, the group's registered slave
whose CommitLog goes furthest is promoted (the lowest id on a tie). --epoch sets the new
epoch, which must be above every epoch the slave knows; by default it is the next one.

Without --force a promotion that would drop acknowledged messages is refused: a slave
behind what its master last acknowledged, or (controller mode) outside the group's sync
state set. --force promotes it anyway; the acknowledged messages it lacks are lost.

In controller mode (automatic failover: the NameServers run controllers, docs/failover.md)
the command asks the controller leader to elect the master instead (a switchover): --broker
designates that replica, which must be alive; --broker-name alone lets the controller pick
the best replica of the sync state set; --force allows an unclean election of a replica
outside it. The controller chooses the epoch (--epoch is refused), and the brokers follow
its decision: the old master, if alive, becomes a slave of the new one.

Promote a slave by hand only when its master is gone or is being replaced: a master still
running is refused by the NameServers from then on, and what it stored past the slave's
log end is not in the new master's log.`,
		Example: `  bolide broker promote --broker 127.0.0.1:10921
  bolide broker promote --broker-name broker-a
  bolide broker promote --broker 127.0.0.1:10921 --broker-name broker-a --epoch 7 -o json
  bolide broker promote --broker 127.0.0.1:10921 --force`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(*cobra.Command, []string) error {
		if addr == "" && name == "" {
			return usageErrorf("give the slave to promote: --broker ADDR and/or --broker-name NAME")
		}
		if addr != "" {
			if err := checkHostPort(addr); err != nil {
				return usageErrorf("--broker: %v", err)
			}
		}
		if epoch < 0 {
			return usageErrorf("--epoch must not be negative, not %d", epoch)
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		var j promoteJSON
		if addr == "" {
			if _, groups := a.controllerGroups(ctx, adm); groups != nil {
				if _, ok := groups[name]; ok {
					if epoch != 0 {
						return usageErrorf("--epoch: broker group %q is in controller mode; the controller chooses the epoch", name)
					}
					if j, err = a.electMaster(ctx, adm, name, 0, force); err != nil {
						return err
					}
					return a.writePromote(j)
				}
			}
			if addr, err = a.pickSlave(ctx, adm, name); err != nil {
				return err
			}
		} else if st, err := adm.ReplicationStatus(ctx, addr); err != nil {
			return a.brokerError(addr, err)
		} else if st.ControllerMode {
			if epoch != 0 {
				return usageErrorf("--epoch: %s is in controller mode; the controller chooses the epoch", addr)
			}
			bi, err := adm.BrokerInfo(ctx, addr)
			if err != nil {
				return a.brokerError(addr, err)
			}
			if name != "" && bi.BrokerName != name {
				return fmt.Errorf("%w: the broker at %s belongs to %q, not %q", client.ErrInvalidParameter, addr, bi.BrokerName, name)
			}
			if st.Role == "MASTER" {
				return fmt.Errorf("%w: the broker at %s is already the master of %s (epoch %d)", client.ErrInvalidParameter,
					addr, bi.BrokerName, st.Epoch)
			}
			if j, err = a.electMaster(ctx, adm, bi.BrokerName, st.ReplicaID, force); err != nil {
				return err
			}
			return a.writePromote(j)
		}
		var opts []client.PromoteOption
		if force {
			opts = append(opts, client.ForcePromotion())
		}
		res, err := adm.Promote(ctx, addr, name, epoch, opts...)
		if err != nil {
			return a.brokerError(addr, err)
		}
		group := name
		if group == "" {
			if bi, err := adm.BrokerInfo(ctx, addr); err == nil {
				group = bi.BrokerName
			}
		}
		j = promoteJSON{Broker: group, Addr: addr, Status: "OK", Mode: "manual", Epoch: res.Epoch, Forced: force,
			PreviousBrokerID: res.PreviousBrokerID, CommitLogMaxOffset: res.CommitLogMaxOffset, Registered: res.Registered}
		if !j.Registered {
			a.warn("not every NameServer accepted %s as the new master yet; it keeps registering (see its log)", addr)
		}
		return a.writePromote(j)
	}
	f := c.Flags()
	f.StringVar(&addr, "broker", "", "client address (host:port) of the slave to promote")
	f.StringVar(&name, "broker-name", "", "the broker group; alone: promote its slave with the longest log (controller mode: the controller's choice)")
	f.Int64Var(&epoch, "epoch", 0, "the new master's epoch (0: the next one; not in controller mode)")
	f.BoolVar(&force, "force", false, "promote even if acknowledged messages are lost (controller mode: an unclean election)")
	return c
}

// electMaster asks the controller leader to elect a master of group name
// (replica designated, 0: the controller's choice).
func (a *app) electMaster(ctx context.Context, adm *client.Admin, name string, designated int64, unclean bool) (promoteJSON, error) {
	if unclean {
		a.warn("an unclean election may lose acknowledged messages the new master lacks")
	}
	g, err := adm.ElectMaster(ctx, name, designated, unclean)
	if err != nil {
		return promoteJSON{}, err
	}
	return promoteJSON{Broker: name, Addr: g.MasterAddr, Status: "OK", Mode: "controller", Epoch: g.MasterEpoch, Forced: unclean,
		MasterID: g.MasterID, SyncStateSet: g.SyncStateSet, PreviousBrokerID: g.MasterID}, nil
}

// writePromote prints broker promote's output.
func (a *app) writePromote(j promoteJSON) error {
	if a.json() {
		return a.emit(j)
	}
	field := func(name string, v any) { fmt.Fprintf(a.stdout, "%-20s %s\n", name+":", cell(v)) }
	if j.Mode == "controller" {
		field("Elected", fmt.Sprintf("replica %d at %s", j.MasterID, cell(j.Addr)))
		field("Broker group", j.Broker)
		field("Status", j.Status)
		field("Epoch", j.Epoch)
		field("Sync state set", idList(j.SyncStateSet))
		if j.Forced {
			field("Unclean", "yes")
		}
		return nil
	}
	field("Promoted", j.Addr)
	if j.Broker != "" {
		field("Broker group", j.Broker)
	}
	field("Status", j.Status)
	field("Epoch", j.Epoch)
	field("Previous broker id", j.PreviousBrokerID)
	field("CommitLog end", j.CommitLogMaxOffset)
	field("Registered", j.Registered)
	if j.Forced {
		field("Forced", "yes")
	}
	return nil
}

// pickSlave returns the address of group name's registered slave whose
// CommitLog goes furthest (the lowest id on a tie).
func (a *app) pickSlave(ctx context.Context, adm *client.Admin, name string) (string, error) {
	ci, err := adm.ClusterInfo(ctx)
	if err != nil {
		return "", err
	}
	best, bestID, bestEnd := "", int64(0), int64(-1)
	var master string
	var errs []string
	for _, l := range ci.Live {
		if l.BrokerName != name {
			continue
		}
		if l.BrokerID == 0 {
			master = l.Addr
			continue
		}
		info, err := adm.ReplicationStatus(ctx, l.Addr)
		if err != nil {
			errs = append(errs, oneLine(err.Error()))
			continue
		}
		end := info.CommitLogMaxOffset
		if end > bestEnd || end == bestEnd && l.BrokerID < bestID {
			best, bestID, bestEnd = l.Addr, l.BrokerID, end
		}
	}
	if best == "" {
		if len(errs) > 0 {
			return "", fmt.Errorf("no slave of %q answered: %s", name, errs[0])
		}
		return "", fmt.Errorf("broker group %q has no registered slave (see 'bolide cluster list')", name)
	}
	if master != "" {
		a.warn("the master of %s at %s is still registered: it will be fenced (read-only)", name, master)
	}
	a.info("promoting %s/%d at %s (CommitLog end %d)", name, bestID, best, bestEnd)
	return best, nil
}

// brokerError explains a failed call to the broker at addr: one that did
// not reach it (client.ErrBrokerUnreachable) becomes a short
// brokerUnreachable.
func (a *app) brokerError(addr string, err error) error {
	if errors.Is(err, client.ErrBrokerUnreachable) {
		return &brokerUnreachable{addr: addr, cause: transportCause(err, a.timeout), err: err}
	}
	return err
}

// brokerUnreachable says that a broker could not be reached.
type brokerUnreachable struct {
	addr, cause string
	err         error
}

func (e *brokerUnreachable) Error() string {
	return fmt.Sprintf("cannot reach the broker at %s: %s (is it running? give its client address, host:port)", e.addr, e.cause)
}

func (e *brokerUnreachable) Unwrap() error { return e.err }

// brokerMember is one broker of a group, by address.
type brokerMember struct {
	name string
	id   int64
	addr string
}

// brokerMembers lists the members (master first, then slaves by id) of
// the groups named, or of every group when names is empty.
func brokerMembers(ctx context.Context, adm *client.Admin, names []string) ([]brokerMember, error) {
	ci, err := adm.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		for n := range ci.Brokers {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	var out []brokerMember
	for _, n := range names {
		bd, ok := ci.Brokers[n]
		if !ok {
			return nil, fmt.Errorf("broker %q is not registered (see 'bolide cluster list'): %w", n, client.ErrBrokerNotExist)
		}
		ids := make([]int64, 0, len(bd.Addrs))
		for id := range bd.Addrs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			out = append(out, brokerMember{name: n, id: id, addr: bd.Addrs[id]})
		}
	}
	return out, nil
}

// runtimeJSON is broker runtime's output, one object per broker.
type runtimeJSON struct {
	Cluster             string            `json:"cluster"`
	Broker              string            `json:"broker"`
	BrokerID            int64             `json:"brokerId"`
	Addr                string            `json:"addr"`
	Version             string            `json:"version"`
	Role                string            `json:"role"`
	StartTime           string            `json:"startTime"`
	BrokerPermission    int32             `json:"brokerPermission"`
	Writable            bool              `json:"writable"`
	PutMessagesTotal    int64             `json:"putMessagesTotal"`
	GetMessagesTotal    int64             `json:"getMessagesTotal"`
	PutBytesTotal       int64             `json:"putBytesTotal"`
	GetBytesTotal       int64             `json:"getBytesTotal"`
	PutTPS              float64           `json:"putTps"`
	GetTPS              float64           `json:"getTps"`
	CommitLogMinOffset  int64             `json:"commitLogMinOffset"`
	CommitLogMaxOffset  int64             `json:"commitLogMaxOffset"`
	DispatchBehindBytes int64             `json:"dispatchBehindBytes"`
	StoreBytes          int64             `json:"storeBytes"`
	DiskUsedRatio       float64           `json:"diskUsedRatio"`
	DiskTotalBytes      int64             `json:"diskTotalBytes"`
	DiskFreeBytes       int64             `json:"diskFreeBytes"`
	Topics              int64             `json:"topics"`
	Queues              int64             `json:"queues"`
	Groups              int64             `json:"groups"`
	ConsumerConnections int64             `json:"consumerConnections"`
	ProducerConnections int64             `json:"producerConnections"`
	HeapBytes           int64             `json:"heapBytes"`
	RSSBytes            int64             `json:"rssBytes"`
	Goroutines          int64             `json:"goroutines"`
	Extra               map[string]string `json:"extra"`
	startTime           time.Time
}

func toRuntimeJSON(r *client.BrokerRuntime) runtimeJSON {
	return runtimeJSON{
		Cluster: r.Cluster, Broker: r.BrokerName, BrokerID: r.BrokerID, Addr: r.Addr, Version: r.Version, Role: r.Role,
		StartTime: jsonTime(r.StartTime), startTime: r.StartTime, BrokerPermission: int32(r.Permission), Writable: r.Writable,
		PutMessagesTotal: r.PutMessagesTotal, GetMessagesTotal: r.GetMessagesTotal, PutBytesTotal: r.PutBytesTotal,
		GetBytesTotal: r.GetBytesTotal, PutTPS: r.PutTPS, GetTPS: r.GetTPS,
		CommitLogMinOffset: r.CommitLogMinOffset, CommitLogMaxOffset: r.CommitLogMaxOffset,
		DispatchBehindBytes: r.DispatchBehindBytes, StoreBytes: r.StoreBytes, DiskUsedRatio: r.DiskUsedRatio,
		DiskTotalBytes: r.DiskTotalBytes, DiskFreeBytes: r.DiskFreeBytes, Topics: r.Topics, Queues: r.Queues,
		Groups: r.Groups, ConsumerConnections: r.ConsumerConnections, ProducerConnections: r.ProducerConnections,
		HeapBytes: r.HeapBytes, RSSBytes: r.RSSBytes, Goroutines: r.Goroutines, Extra: r.Extra,
	}
}

// writeRuntime prints one broker's figures as a two-column table.
func writeRuntime(w io.Writer, j runtimeJSON, now time.Time) {
	field := func(name string, v any) { fmt.Fprintf(w, "%-22s %s\n", name+":", cell(v)) }
	field("Broker", fmt.Sprintf("%s/%d at %s (%s, cluster %s)", j.Broker, j.BrokerID, j.Addr, j.Role, j.Cluster))
	field("Version", j.Version)
	field("Up since", formatTime(j.startTime)+" ("+age(j.startTime, now)+")")
	perm := "read and write"
	if !j.Writable {
		perm = "read only (write permission taken away)"
	}
	field("Permission", fmt.Sprintf("%d, %s", j.BrokerPermission, perm))
	field("Put", fmt.Sprintf("%d messages, %s; %.1f msg/s", j.PutMessagesTotal, humanBytes(j.PutBytesTotal), j.PutTPS))
	field("Get", fmt.Sprintf("%d messages, %s; %.1f msg/s", j.GetMessagesTotal, humanBytes(j.GetBytesTotal), j.GetTPS))
	field("CommitLog", fmt.Sprintf("%d..%d (%s in segments), dispatch %s behind", j.CommitLogMinOffset, j.CommitLogMaxOffset,
		humanBytes(j.StoreBytes), humanBytes(j.DispatchBehindBytes)))
	field("Disk", fmt.Sprintf("%.1f%% used, %s free of %s", j.DiskUsedRatio*100, humanBytes(j.DiskFreeBytes), humanBytes(j.DiskTotalBytes)))
	field("Topics / queues", fmt.Sprintf("%d / %d", j.Topics, j.Queues))
	field("Groups", j.Groups)
	field("Connections", fmt.Sprintf("%d consumers, %d producers", j.ConsumerConnections, j.ProducerConnections))
	field("Memory", fmt.Sprintf("heap %s, RSS %s, %d goroutines", humanBytes(j.HeapBytes), humanBytes(j.RSSBytes), j.Goroutines))
	keys := make([]string, 0, len(j.Extra))
	for k := range j.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field(k, j.Extra[k])
	}
}

func newBrokerRuntimeCmd(a *app) *cobra.Command {
	var names []string
	c := &cobra.Command{
		Use:   "runtime [--broker NAME]...",
		Short: "Show brokers' running figures: traffic, store, disk, counts, memory",
		Long: `Ask every broker (master and slaves) of the groups named by --broker, or of every
registered group, for its running figures (RocketMQ's brokerStatus): messages and bytes
stored (put) and delivered to consumers (get) since it started over every protocol, with
the rates per second over the last minute; its CommitLog, disk, topics, queues, groups and
connections; its heap, RSS and goroutines; and its permission (read only while its write
permission is taken away, see 'broker write-perm').`,
		Example: `  bolide broker runtime
  bolide broker runtime --broker broker-a -o json`,
		Args: exactArgs(0, ""),
		RunE: func(_ *cobra.Command, _ []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			members, err := brokerMembers(ctx, adm, names)
			if err != nil {
				return err
			}
			now := time.Now()
			var failed error
			for i, m := range members {
				rt, err := adm.BrokerRuntime(ctx, m.addr)
				if err != nil {
					a.warn("%s/%d at %s: %v", m.name, m.id, m.addr, err)
					failed = a.brokerError(m.addr, err)
					continue
				}
				j := toRuntimeJSON(rt)
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				writeRuntime(a.stdout, j, now)
			}
			return failed
		},
	}
	c.Flags().StringSliceVar(&names, "broker", nil, "a broker group's name (repeatable; default: every group)")
	return c
}

func newBrokerConfigCmd(a *app) *cobra.Command {
	return groupCmd("config", "Read and change a broker's configuration while it runs",
		"  bolide broker config get --broker broker-a\n  bolide broker config set --broker broker-a fileReservedTime=48",
		newBrokerConfigGetCmd(a),
		newBrokerConfigSetCmd(a),
	)
}

// configEntryJSON is one setting of broker config get and set.
type configEntryJSON struct {
	Broker      string `json:"broker"`
	Addr        string `json:"addr"`
	Key         string `json:"key"`
	Value       string `json:"value"`
	Default     string `json:"default"`
	Runtime     bool   `json:"runtime"`
	Description string `json:"description"`
}

// configTarget returns the addresses a config command acts on: --addr, or
// the group's master (get) or every member (set).
func configTarget(ctx context.Context, adm *client.Admin, name, addr string, all bool) ([]brokerMember, error) {
	members, err := brokerMembers(ctx, adm, []string{name})
	if err != nil {
		return nil, err
	}
	if addr != "" {
		for _, m := range members {
			if m.addr == addr {
				return []brokerMember{m}, nil
			}
		}
		return nil, fmt.Errorf("%s is not a member of broker group %s (see 'bolide cluster list'): %w", addr, name, client.ErrInvalidParameter)
	}
	if !all {
		return members[:1], nil // the master, or the lowest slave without one
	}
	return members, nil
}

func newBrokerConfigGetCmd(a *app) *cobra.Command {
	var name, addr string
	c := &cobra.Command{
		Use:   "get --broker NAME [--addr ADDR]",
		Short: "List a broker's settings: value, default, whether it may change at runtime",
		Long: `List the settings of the master of broker group NAME (or of the member at --addr), by
RocketMQ's key names: the value in effect, the default, whether 'broker config set' may
change it while the broker runs (RUNTIME yes), and what it means.`,
		Example: `  bolide broker config get --broker broker-a
  bolide broker config get --broker broker-a --addr 127.0.0.1:10931 -o json`,
		Args: exactArgs(0, ""),
		RunE: func(_ *cobra.Command, _ []string) error {
			if name == "" {
				return usageErrorf("--broker is required")
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			targets, err := configTarget(ctx, adm, name, addr, false)
			if err != nil {
				return err
			}
			m := targets[0]
			entries, err := adm.BrokerConfig(ctx, m.addr)
			if err != nil {
				return a.brokerError(m.addr, err)
			}
			tb := newTable("KEY", "VALUE", "DEFAULT", "RUNTIME", "DESCRIPTION")
			for _, e := range entries {
				if a.json() {
					if err := a.emit(configEntryJSON{Broker: m.name, Addr: m.addr, Key: e.Key, Value: e.Value,
						Default: e.Default, Runtime: e.Runtime, Description: e.Description}); err != nil {
						return err
					}
					continue
				}
				rt := "-"
				if e.Runtime {
					rt = "yes"
				}
				tb.row(e.Key, e.Value, e.Default, rt, e.Description)
			}
			if a.json() {
				return nil
			}
			return tb.write(a.stdout)
		},
	}
	c.Flags().StringVar(&name, "broker", "", "the broker group's name")
	c.Flags().StringVar(&addr, "addr", "", "one member's client address (default: the master)")
	return c
}

func newBrokerConfigSetCmd(a *app) *cobra.Command {
	var name, addr string
	c := &cobra.Command{
		Use:   "set --broker NAME [--addr ADDR] KEY=VALUE...",
		Short: "Change runtime settings of a broker group (all or nothing per broker)",
		Long: `Change settings of every member of broker group NAME (or only the member at --addr)
while they run. Only the keys 'broker config get' lists with RUNTIME yes may change; each
value is checked, and a broker applies all of the changes or none. A broker keeps them in
<store>/config/runtime.json and applies them over its flags when it restarts. Needs the
admin permission when the cluster runs with ACL.`,
		Example: `  bolide broker config set --broker broker-a fileReservedTime=48 deleteWhen=03
  bolide broker config set --broker broker-a --addr 127.0.0.1:10911 maxMessageSize=1048576`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if name == "" {
				return usageErrorf("--broker is required")
			}
			kv := make(map[string]string, len(args))
			for _, arg := range args {
				k, v, ok := strings.Cut(arg, "=")
				if !ok || k == "" {
					return usageErrorf("%q is not KEY=VALUE", arg)
				}
				kv[k] = v
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			targets, err := configTarget(ctx, adm, name, addr, true)
			if err != nil {
				return err
			}
			tb := newTable("BROKER", "ID", "ADDRESS", "KEY", "VALUE")
			for _, m := range targets {
				entries, err := adm.UpdateBrokerConfig(ctx, m.addr, kv)
				if err != nil {
					return a.brokerError(m.addr, err)
				}
				for _, e := range entries {
					if a.json() {
						if err := a.emit(configEntryJSON{Broker: m.name, Addr: m.addr, Key: e.Key, Value: e.Value,
							Default: e.Default, Runtime: e.Runtime, Description: e.Description}); err != nil {
							return err
						}
						continue
					}
					tb.row(m.name, m.id, m.addr, e.Key, e.Value)
				}
			}
			if a.json() {
				return nil
			}
			return tb.write(a.stdout)
		},
	}
	c.Flags().StringVar(&name, "broker", "", "the broker group's name")
	c.Flags().StringVar(&addr, "addr", "", "change only this member (client address)")
	return c
}

// writePermJSON is broker write-perm's output.
type writePermJSON struct {
	Broker   string   `json:"broker"`
	Writable bool     `json:"writable"`
	Changed  []string `json:"changed"`
}

func newBrokerWritePermCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "write-perm NAME off|on",
		Short: "Take a broker group's write permission away (drain it) or give it back",
		Long: `off takes the write permission of every member of broker group NAME away
(brokerPermission 4, read only; mqadmin wipeWritePerm): the brokers register at once with
their topics read only, so producers send elsewhere, and a send that still arrives is
refused (NO_PERMISSION); consumers go on reading what they hold. on gives it back
(brokerPermission 6; mqadmin addWritePerm). The change persists across restarts. It prints
the addresses changed (none when the group already had that permission).`,
		Example: `  bolide broker write-perm broker-a off
  bolide broker write-perm broker-a on -o json`,
		Args: exactArgs(2, "NAME and off|on"),
		RunE: func(_ *cobra.Command, args []string) error {
			name := args[0]
			var writable bool
			switch args[1] {
			case "on":
				writable = true
			case "off":
			default:
				return usageErrorf("the second argument must be off or on, not %q", args[1])
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			changed, err := adm.SetBrokerWritable(ctx, name, writable)
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(writePermJSON{Broker: name, Writable: writable, Changed: append([]string{}, changed...)})
			}
			state := "taken away"
			if writable {
				state = "given back"
			}
			if len(changed) == 0 {
				fmt.Fprintf(a.stdout, "%s: nothing to change, the write permission was already %s\n", name, state)
				return nil
			}
			fmt.Fprintf(a.stdout, "%s: write permission %s on %s\n", name, state, strings.Join(changed, ", "))
			return nil
		},
	}
}
