package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
)

func newControllerCmd(a *app) *cobra.Command {
	return groupCmd("controller", "Inspect the controllers that fail broker groups over automatically",
		"  bolide controller status\n  bolide controller status -o json",
		newControllerStatusCmd(a),
	)
}

// controllerJSON is controller status's output.
type controllerJSON struct {
	Leader           string               `json:"leader"`
	LeaderRaftAddr   string               `json:"leaderRaftAddr"`
	LeaderNameServer string               `json:"leaderNameServer"`
	Term             uint64               `json:"term"`
	CommitIndex      uint64               `json:"commitIndex"`
	From             string               `json:"from"`
	Peers            []controllerPeerJSON `json:"peers"`
	NameServers      []controllerNodeJSON `json:"nameServers"`
	Groups           []groupStateJSON     `json:"groups"`
}

// controllerPeerJSON is one Raft voter; NameServer, Term and CommitIndex
// come from that controller's own answer when one of the NameServers asked
// is it.
type controllerPeerJSON struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raftAddr"`
	State       string `json:"state"`
	NameServer  string `json:"nameServer,omitempty"`
	Term        uint64 `json:"term,omitempty"`
	CommitIndex uint64 `json:"commitIndex,omitempty"`
}

// controllerNodeJSON is one NameServer's answer.
type controllerNodeJSON struct {
	NameServer  string `json:"nameServer"`
	ID          string `json:"id,omitempty"`
	Leader      string `json:"leader,omitempty"`
	Term        uint64 `json:"term,omitempty"`
	CommitIndex uint64 `json:"commitIndex,omitempty"`
	Error       string `json:"error,omitempty"`
}

// groupStateJSON is one broker group as the controller committed it.
type groupStateJSON struct {
	Cluster           string        `json:"cluster"`
	Broker            string        `json:"broker"`
	MasterID          int64         `json:"masterId"`
	MasterAddr        string        `json:"masterAddr"`
	MasterHAAddr      string        `json:"masterHaAddr"`
	Epoch             int64         `json:"epoch"`
	SyncStateSet      []int64       `json:"syncStateSet"`
	SyncStateSetEpoch int64         `json:"syncStateSetEpoch"`
	Replicas          []replicaJSON `json:"replicas"`
}

// replicaJSON is one replica as the controller sees its heartbeats.
type replicaJSON struct {
	ID            int64  `json:"id"`
	Addr          string `json:"addr"`
	HAAddr        string `json:"haAddr"`
	Alive         bool   `json:"alive"`
	Role          string `json:"role"`
	Epoch         int64  `json:"epoch"`
	MaxOffset     int64  `json:"maxOffset"`
	InSync        bool   `json:"inSync"`
	LastBeatMsAgo int64  `json:"lastBeatMsAgo"`
}

func toControllerJSON(cs *client.ControllerStatus) controllerJSON {
	j := controllerJSON{
		Leader: cs.Leader, LeaderRaftAddr: cs.LeaderRaftAddr, LeaderNameServer: cs.LeaderNameServer, Term: cs.Term,
		CommitIndex: cs.CommitIndex, From: cs.From, Peers: []controllerPeerJSON{}, NameServers: []controllerNodeJSON{},
		Groups: []groupStateJSON{},
	}
	nodes := map[string]client.ControllerNode{}
	for _, n := range cs.NameServers {
		nj := controllerNodeJSON{NameServer: n.NameServer, ID: n.ID, Leader: n.Leader, Term: n.Term, CommitIndex: n.Commit}
		if errors.Is(n.Err, client.ErrNoController) {
			nj.Error = "no controller"
		} else if n.Err != nil {
			nj.Error = oneLine(n.Err.Error())
		} else if n.ID != "" {
			nodes[n.ID] = n
		}
		j.NameServers = append(j.NameServers, nj)
	}
	for _, p := range cs.Peers {
		pj := controllerPeerJSON{ID: p.ID, RaftAddr: p.RaftAddr, State: p.State}
		if n, ok := nodes[p.ID]; ok {
			pj.NameServer, pj.Term, pj.CommitIndex = n.NameServer, n.Term, n.Commit
			if pj.State == "" || pj.State == "unknown" {
				// The answering controller does not know; the peer's own
				// answer says whom it follows.
				switch {
				case n.Leader != "" && n.Leader == n.ID:
					pj.State = "leader"
				case n.Leader != "":
					pj.State = "follower"
				}
			}
		}
		j.Peers = append(j.Peers, pj)
	}
	for _, g := range cs.Groups {
		j.Groups = append(j.Groups, toGroupStateJSON(g))
	}
	return j
}

func toGroupStateJSON(g client.ControllerGroup) groupStateJSON {
	gj := groupStateJSON{
		Cluster: g.Cluster, Broker: g.BrokerName, MasterID: g.MasterID, MasterAddr: g.MasterAddr, MasterHAAddr: g.MasterHAAddr,
		Epoch: g.MasterEpoch, SyncStateSet: append([]int64{}, g.SyncStateSet...), SyncStateSetEpoch: g.SyncStateSetEpoch,
		Replicas: []replicaJSON{},
	}
	for _, r := range g.Replicas {
		gj.Replicas = append(gj.Replicas, replicaJSON{
			ID: r.ID, Addr: r.Addr, HAAddr: r.HAAddr, Alive: r.Alive, Role: r.Role, Epoch: r.Epoch, MaxOffset: r.MaxOffset,
			InSync: g.InSync(r.ID), LastBeatMsAgo: r.LastBeat.Milliseconds(),
		})
	}
	return gj
}

func newControllerStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the controllers' Raft group and every broker group's master, epoch and sync state set",
		Long: `Ask the NameServers (--namesrv) for the controller group that fails broker groups over
automatically (NameServers started with --controller; see docs/failover.md): the Raft
leader, its term and commit index, every controller with its state, and for every broker
group the master (replica id and address), the master epoch, the sync state set (SYNC SET:
the replicas that hold every acknowledged message; only they can be elected without
losing any) with its epoch, and each replica as the leader sees its heartbeats: alive,
role, epoch and CommitLog end.

The groups come from the leader's answer; when the leader does not answer, from the
answer with the highest term and commit index (a follower's view may lag). A NameServer
that runs no controller is listed as such; when none runs one the command fails.`,
		Example: `  bolide controller status
  bolide controller status -n '10.0.0.1:9876;10.0.0.2:9876;10.0.0.3:9876' -o json`,
		Args: exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			cs, err := adm.DescribeController(ctx)
			if errors.Is(err, client.ErrNoController) {
				return fmt.Errorf("%w at %s: start the NameServers with --controller (see docs/failover.md)", err, a.namesrv)
			}
			if err != nil {
				return err
			}
			j := toControllerJSON(cs)
			if a.json() {
				return a.emit(j)
			}
			return writeController(a.stdout, j)
		},
	}
}

// writeController prints controller status's table output.
func writeController(w io.Writer, j controllerJSON) error {
	field := func(name string, v any) { fmt.Fprintf(w, "%-14s %s\n", name+":", cell(v)) }
	leader := cell(j.Leader)
	if j.Leader == "" {
		leader = "none known (no quorum, or an election is running)"
	} else {
		var at []string
		if j.LeaderRaftAddr != "" {
			at = append(at, "raft "+j.LeaderRaftAddr)
		}
		if j.LeaderNameServer != "" {
			at = append(at, "NameServer "+j.LeaderNameServer)
		}
		if len(at) > 0 {
			leader += " (" + strings.Join(at, ", ") + ")"
		}
	}
	field("Leader", leader)
	field("Term", j.Term)
	field("Commit index", j.CommitIndex)
	field("Answered by", j.From)
	fmt.Fprintln(w)
	t := newTable("CONTROLLER", "RAFT ADDRESS", "STATE", "NAMESERVER", "TERM", "COMMIT")
	listed := map[string]bool{}
	for _, p := range j.Peers {
		term, commit := "-", "-"
		if p.NameServer != "" {
			term, commit = strconv.FormatUint(p.Term, 10), strconv.FormatUint(p.CommitIndex, 10)
			listed[p.NameServer] = true
		}
		t.row(p.ID, p.RaftAddr, p.State, p.NameServer, term, commit)
	}
	for _, n := range j.NameServers {
		if listed[n.NameServer] {
			continue
		}
		switch {
		case n.Error == "no controller":
			t.row("-", "-", "no controller", n.NameServer, "-", "-")
		case n.Error != "":
			t.row("?", "-", "no answer: "+n.Error, n.NameServer, "-", "-")
		default:
			t.row(n.ID, "-", "not a voter", n.NameServer, n.Term, n.CommitIndex)
		}
	}
	if err := t.write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(j.Groups) == 0 {
		fmt.Fprintln(w, "No broker group has registered with the controllers yet.")
		return nil
	}
	g := newTable("CLUSTER", "BROKER", "MASTER", "MASTER ADDRESS", "EPOCH", "SYNC SET", "SYNC SET EPOCH")
	for _, s := range j.Groups {
		master := "none"
		if s.MasterID != 0 {
			master = strconv.FormatInt(s.MasterID, 10)
		}
		g.row(s.Cluster, s.Broker, master, s.MasterAddr, s.Epoch, idList(s.SyncStateSet), s.SyncStateSetEpoch)
	}
	if err := g.write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	r := newTable("BROKER", "REPLICA", "ADDRESS", "ALIVE", "ROLE", "EPOCH", "MAX OFFSET", "IN SYNC", "LAST BEAT")
	for _, s := range j.Groups {
		for _, x := range s.Replicas {
			beat := "-"
			if x.LastBeatMsAgo >= 0 && (x.Alive || x.LastBeatMsAgo > 0) {
				beat = age(time.Now().Add(-time.Duration(x.LastBeatMsAgo)*time.Millisecond), time.Now()) + " ago"
			}
			r.row(s.Broker, x.ID, x.Addr, yesNo(x.Alive), x.Role, x.Epoch, x.MaxOffset, yesNo(x.InSync), beat)
		}
	}
	return r.write(w)
}

// idList renders replica ids "1,2,3", or "-".
func idList(ids []int64) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// controllerGroups returns the broker groups the controllers know, by
// name, and the controller status; both nil when no NameServer runs a
// controller or none answered (the cluster list and broker status then
// show what the brokers say).
func (a *app) controllerGroups(ctx context.Context, adm *client.Admin) (*client.ControllerStatus, map[string]client.ControllerGroup) {
	cs, err := adm.DescribeController(ctx)
	if err != nil {
		if !errors.Is(err, client.ErrNoController) {
			a.warn("the controllers did not answer: %s", oneLine(err.Error()))
		}
		return nil, nil
	}
	groups := make(map[string]client.ControllerGroup, len(cs.Groups))
	for _, g := range cs.Groups {
		groups[g.BrokerName] = g
	}
	return cs, groups
}

// leaderLine describes the controller leader in one line.
func leaderLine(cs *client.ControllerStatus) string {
	if cs.Leader == "" {
		return "none known (no quorum, or an election is running)"
	}
	s := cs.Leader
	if cs.LeaderNameServer != "" {
		s += " at NameServer " + cs.LeaderNameServer
	}
	return fmt.Sprintf("%s, term %d", s, cs.Term)
}
