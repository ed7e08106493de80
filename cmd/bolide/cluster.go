package main

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
)

func newClusterCmd(a *app) *cobra.Command {
	return groupCmd("cluster", "Inspect the cluster's brokers",
		"  bolide cluster list",
		newClusterListCmd(a),
	)
}

// brokerJSON is one broker of cluster list. LagBytes is how far a slave's
// log is behind its master's; a master has InSyncSlaves of its Slaves in
// sync.
type brokerJSON struct {
	Cluster         string  `json:"cluster"`
	Broker          string  `json:"broker"`
	BrokerID        int64   `json:"brokerId"`
	Role            string  `json:"role"`
	Epoch           int64   `json:"epoch"`
	ReplicationMode string  `json:"replicationMode"`
	LagBytes        int64   `json:"lagBytes"`
	InSyncSlaves    int32   `json:"inSyncSlaves"`
	Slaves          int     `json:"slaves"`
	Addr            string  `json:"addr"`
	Version         string  `json:"version"`
	Flush           string  `json:"flush"`
	DiskUsedRatio   float64 `json:"diskUsedRatio"`
	StoreBytes      int64   `json:"storeBytes"`
	CommitLogMin    int64   `json:"commitLogMinOffset"`
	CommitLogMax    int64   `json:"commitLogMaxOffset"`
	DispatchBehind  int64   `json:"dispatchBehindBytes"`
	Topics          int32   `json:"topics"`
	StartTime       string  `json:"startTime"`
	LastHeartbeat   string  `json:"lastHeartbeat"`
	Error           string  `json:"error,omitempty"`
	// Controller mode: the broker's permanent replica id, the group's
	// sync state set (replicas holding every acknowledged message) and its
	// epoch, and the controller leader's id.
	ControllerMode    bool    `json:"controllerMode"`
	ReplicaID         int64   `json:"replicaId,omitempty"`
	SyncStateSet      []int64 `json:"syncStateSet,omitempty"`
	SyncStateSetEpoch int64   `json:"syncStateSetEpoch,omitempty"`
	ControllerLeader  string  `json:"controllerLeader,omitempty"`
	brokerStarted     time.Time
	brokerHeartbeat   time.Time
}

func newClusterListCmd(a *app) *cobra.Command {
	var cluster string
	c := &cobra.Command{
		Use:   "list",
		Short: "List broker groups: addresses, roles, replication, versions, flush mode and disk use",
		Long: `List every broker registered with the NameServer, asking each broker about itself.
A broker that does not answer is listed with its error (and the command still succeeds).

ROLE is MASTER, SLAVE, or FENCED (a master replaced by a newer one: read-only); EPOCH is
the group's master epoch as the broker knows it; REPLICATION the group's mode (async, or
sync: sends wait for the in-sync slaves). LAG is, for a slave, how many bytes of the
master's CommitLog it has not yet; for a master, how many of its slaves are in sync.

When the cluster runs controllers (automatic failover, docs/failover.md), the controller
leader is named above the table, ID is the broker's registration id (0 for the master)
and REPLICA its permanent replica id, and SYNC SET the group's sync state set as the
controllers committed it (as the broker last learned it when they do not answer): the
replicas holding every acknowledged message. 'bolide controller status' shows more.`,
		Example: `  bolide cluster list
  bolide cluster list --cluster DefaultCluster -o json`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(*cobra.Command, []string) error {
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		ci, err := adm.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		var live []client.BrokerLive
		for _, l := range ci.Live {
			if cluster == "" || l.Cluster == cluster {
				live = append(live, l)
			}
		}
		if cluster != "" && len(ci.Clusters[cluster]) == 0 && len(live) == 0 {
			return fmt.Errorf("cluster %q is not registered", cluster)
		}
		rows := make([]brokerJSON, len(live))
		var wg sync.WaitGroup
		var cs *client.ControllerStatus
		var groups map[string]client.ControllerGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, groups = a.controllerGroups(ctx, adm)
		}()
		for i, l := range live {
			rows[i] = brokerJSON{Cluster: l.Cluster, Broker: l.BrokerName, BrokerID: l.BrokerID, Addr: l.Addr,
				Version: l.Version, Topics: l.TopicCount, LastHeartbeat: jsonTime(l.LastUpdate), brokerHeartbeat: l.LastUpdate}
			wg.Add(1)
			go func() {
				defer wg.Done()
				bi, err := adm.BrokerInfo(ctx, l.Addr)
				r := &rows[i]
				if err != nil {
					r.Error = oneLine(err.Error())
					return
				}
				r.Role, r.Flush, r.DiskUsedRatio, r.StoreBytes = bi.Role, bi.FlushMode, bi.DiskUsedRatio, bi.StoreBytes
				r.CommitLogMin, r.CommitLogMax, r.DispatchBehind = bi.CommitLogMinOffset, bi.CommitLogMaxOffset, bi.DispatchBehindBytes
				r.StartTime, r.brokerStarted = jsonTime(bi.StartTime), bi.StartTime
				if bi.Version != "" {
					r.Version = bi.Version
				}
				ri, err := adm.ReplicationStatus(ctx, l.Addr)
				if err != nil {
					r.Error = oneLine(err.Error())
					return
				}
				r.Role, r.Epoch, r.ReplicationMode = ri.Role, ri.Epoch, ri.Mode
				r.LagBytes, r.InSyncSlaves, r.Slaves = ri.LagBytes, ri.InSyncSlaves, len(ri.Slaves)
				if ri.ControllerMode {
					r.ControllerMode, r.ReplicaID, r.SyncStateSetEpoch = true, ri.ReplicaID, ri.SyncStateSetEpoch
					r.SyncStateSet, r.ControllerLeader = ri.SyncStateSet, ri.ControllerLeader
				}
			}()
		}
		wg.Wait()
		controllerMode := cs != nil
		for i := range rows {
			if cs != nil && rows[i].ControllerMode && cs.Leader != "" {
				rows[i].ControllerLeader = cs.Leader
			}
			controllerMode = controllerMode || rows[i].ControllerMode
		}
		if a.json() {
			for _, r := range rows {
				if err := a.emit(r); err != nil {
					return err
				}
			}
			return nil
		}
		if len(rows) == 0 {
			a.info("no broker is registered with %s", a.namesrv)
			return nil
		}
		now := time.Now()
		if cs != nil {
			fmt.Fprintf(a.stdout, "Controller leader: %s\n\n", leaderLine(cs))
		}
		// LOG is the CommitLog's data, SEGMENTS the space its segment
		// files take (preallocated), DISK USED the file system's use.
		header := []string{"CLUSTER", "BROKER", "ID", "ROLE", "EPOCH", "REPLICATION", "LAG", "ADDRESS", "VERSION", "FLUSH", "LOG",
			"SEGMENTS", "DISK USED", "TOPICS", "UP", "HEARTBEAT"}
		if controllerMode {
			header = slices.Insert(header, 5, "REPLICA", "SYNC SET")
		}
		t := newTable(header...)
		for _, r := range rows {
			var cells []any
			if r.Error != "" {
				cells = []any{r.Cluster, r.Broker, r.BrokerID, "?", "?", "?", "?", r.Addr, r.Version, "?", "?", "?", "?", r.Topics, "?",
					age(r.brokerHeartbeat, now) + " ago"}
				a.warn("broker %s (%s) did not answer: %s", r.Broker, r.Addr, r.Error)
			} else {
				cells = []any{r.Cluster, r.Broker, r.BrokerID, r.Role, r.Epoch, r.ReplicationMode, replicationLag(r), r.Addr, r.Version,
					r.Flush, humanBytes(r.CommitLogMax - r.CommitLogMin),
					humanBytes(r.StoreBytes), fmt.Sprintf("%.1f%%", 100*r.DiskUsedRatio), r.Topics,
					age(r.brokerStarted, now), age(r.brokerHeartbeat, now) + " ago"}
			}
			if controllerMode {
				replica, sss := "-", "-"
				if r.ControllerMode {
					replica, sss = strconv.FormatInt(r.ReplicaID, 10), idList(r.SyncStateSet)
				}
				if g, ok := groups[r.Broker]; ok {
					sss = idList(g.SyncStateSet) // as committed: a slave's own view may lag
				}
				cells = slices.Insert(cells, 5, any(replica), any(sss))
			}
			t.row(cells...)
		}
		return t.write(a.stdout)
	}
	c.Flags().StringVar(&cluster, "cluster", "", "only the brokers of this cluster")
	return c
}

// replicationLag is cluster list's LAG: a slave's bytes behind its master,
// a master's in-sync slaves.
func replicationLag(r brokerJSON) string {
	if r.Role == "SLAVE" {
		return humanBytes(r.LagBytes) + " behind"
	}
	if r.Slaves == 0 {
		return "no slaves"
	}
	return fmt.Sprintf("%d of %d in sync", r.InSyncSlaves, r.Slaves)
}
