package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
)

func newBrokerCmd(a *app) *cobra.Command {
	return groupCmd("broker", "Show a broker's replication state; promote a slave to master",
		"  bolide broker status 127.0.0.1:10911\n  bolide broker promote --broker 127.0.0.1:10921",
		newBrokerStatusCmd(a),
		newBrokerPromoteCmd(a),
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
	lastMetadataSync time.Time
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
replication stream and how many bytes it is behind.`,
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

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// promoteJSON is broker promote's output.
type promoteJSON struct {
	Broker             string `json:"broker"`
	Addr               string `json:"addr"`
	Status             string `json:"status"`
	Epoch              int64  `json:"epoch"`
	PreviousBrokerID   int64  `json:"previousBrokerId"`
	CommitLogMaxOffset int64  `json:"commitLogMaxOffset"`
	Registered         bool   `json:"registered"`
}

func newBrokerPromoteCmd(a *app) *cobra.Command {
	var addr, name string
	var epoch int64
	c := &cobra.Command{
		Use:   "promote (--broker ADDR | --broker-name NAME) [--epoch N]",
		Short: "Make a slave the master of its broker group",
		Long: `Make a slave the master of its broker group: it stops replicating, takes a new epoch and
registers as broker id 0; the NameServers then route the group's reads and writes to it, and
refuse the old master (which fences itself, read-only) if it comes back.

--broker names the slave to promote by its client address; with --broker-name too, the
slave must belong to that group. With --broker-name alone, the group's registered slave
whose CommitLog goes furthest is promoted (the lowest id on a tie). --epoch sets the new
epoch, which must be above every epoch the slave knows; by default it is the next one.

Promote a slave only when its master is gone or is being replaced: a master still running
is refused by the NameServers from then on, and what it stored past the slave's log end is
not in the new master's log.`,
		Example: `  bolide broker promote --broker 127.0.0.1:10921
  bolide broker promote --broker-name broker-a
  bolide broker promote --broker 127.0.0.1:10921 --broker-name broker-a --epoch 7 -o json`,
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
		if addr == "" {
			if addr, err = a.pickSlave(ctx, adm, name); err != nil {
				return err
			}
		}
		res, err := adm.Promote(ctx, addr, name, epoch)
		if err != nil {
			return a.brokerError(addr, err)
		}
		group := name
		if group == "" {
			if bi, err := adm.BrokerInfo(ctx, addr); err == nil {
				group = bi.BrokerName
			}
		}
		j := promoteJSON{Broker: group, Addr: addr, Status: "OK", Epoch: res.Epoch,
			PreviousBrokerID: res.PreviousBrokerID, CommitLogMaxOffset: res.CommitLogMaxOffset, Registered: res.Registered}
		if !j.Registered {
			a.warn("not every NameServer accepted %s as the new master yet; it keeps registering (see its log)", addr)
		}
		if a.json() {
			return a.emit(j)
		}
		field := func(name string, v any) { fmt.Fprintf(a.stdout, "%-20s %s\n", name+":", cell(v)) }
		field("Promoted", addr)
		if j.Broker != "" {
			field("Broker group", j.Broker)
		}
		field("Status", j.Status)
		field("Epoch", j.Epoch)
		field("Previous broker id", j.PreviousBrokerID)
		field("CommitLog end", j.CommitLogMaxOffset)
		field("Registered", j.Registered)
		return nil
	}
	f := c.Flags()
	f.StringVar(&addr, "broker", "", "client address (host:port) of the slave to promote")
	f.StringVar(&name, "broker-name", "", "the broker group; alone: promote its slave with the longest log")
	f.Int64Var(&epoch, "epoch", 0, "the new master's epoch (0: the next one)")
	return c
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
