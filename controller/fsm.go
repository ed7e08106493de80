package controller

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	"github.com/hashicorp/raft"
)

// Replica is one broker of a group as committed in the log: its permanent
// id and its addresses.
type Replica struct {
	ID     int64  `json:"id"`
	Addr   string `json:"addr"`
	HAAddr string `json:"ha_addr"`
}

// Group is one broker group (one broker name) as committed in the log.
type Group struct {
	Cluster  string             `json:"cluster"`
	Name     string             `json:"name"`
	Replicas map[int64]*Replica `json:"replicas"`
	// MasterID is the master's replica id, 0 when the group has none.
	MasterID int64 `json:"master_id"`
	// MasterEpoch is 0 until the group's first election, then +1 at every
	// election.
	MasterEpoch int64 `json:"master_epoch"`
	// SSS is the sync state set, sorted; SSSEpoch +1 at every change.
	SSS      []int64 `json:"sss"`
	SSSEpoch int64   `json:"sss_epoch"`
}

// clone is a deep copy, safe to hand out of the FSM's lock.
func (g *Group) clone() *Group {
	c := *g
	c.Replicas = make(map[int64]*Replica, len(g.Replicas))
	for id, r := range g.Replicas {
		rc := *r
		c.Replicas[id] = &rc
	}
	c.SSS = slices.Clone(g.SSS)
	return &c
}

// inSSS reports whether id is a member of the sync state set.
func (g *Group) inSSS(id int64) bool { return slices.Contains(g.SSS, id) }

// ReplicaIDs are the group's replica ids, ascending.
func (g *Group) ReplicaIDs() []int64 {
	ids := make([]int64, 0, len(g.Replicas))
	for id := range g.Replicas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// State is everything the log holds: every broker group by name.
type State struct {
	Groups map[string]*Group `json:"groups"`
}

// Command kinds (the op of a log entry).
const (
	opRegister  = "register"   // RegisterReplica: add a replica or change its addresses
	opElect     = "elect"      // ElectMaster: a new master (or none)
	opAlterSSS  = "alter_sss"  // AlterSyncStateSet: fenced by both epochs
	opRemoveRep = "remove_rep" // RemoveReplica: forget a replica that is not the master
)

// Command is one Raft log entry. Only the fields of its op are set. The
// leader computes decisions (who to elect) from liveness it alone sees; the
// FSM re-validates them against the committed state, so a decision taken on
// a stale view is refused rather than applied.
type Command struct {
	Op   string `json:"op"`
	Name string `json:"name"` // broker name (the group)

	// register
	Cluster string `json:"cluster,omitempty"`
	ID      int64  `json:"id,omitempty"`
	Addr    string `json:"addr,omitempty"`
	HAAddr  string `json:"ha_addr,omitempty"`

	// elect: NewMaster (0 = no master) replaces ExpectMaster at
	// ExpectEpoch; the new epoch is ExpectEpoch+1, or MinEpoch when
	// higher (a group's first election above the epoch its replica already
	// knows: a controller whose state was lost); Reason is for logs.
	NewMaster    int64  `json:"new_master,omitempty"`
	MinEpoch     int64  `json:"min_epoch,omitempty"`
	ExpectMaster int64  `json:"expect_master,omitempty"`
	ExpectEpoch  int64  `json:"expect_epoch,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Unclean      bool   `json:"unclean,omitempty"`

	// alter_sss: the requesting master's view and the set it wants.
	MasterID    int64   `json:"master_id,omitempty"`
	MasterEpoch int64   `json:"master_epoch,omitempty"`
	SSSEpoch    int64   `json:"sss_epoch,omitempty"`
	NewSSS      []int64 `json:"new_sss,omitempty"`
}

// Result is what applying a command returns: a code (OK, FENCED, ...), a
// reason and the group after the command.
type Result struct {
	Code    ResultCode
	Message string
	Group   *Group // a copy; nil when the group does not exist
	Changed bool   // the command changed the group
}

// ResultCode is the outcome of a command.
type ResultCode int

// Outcomes.
const (
	ResultOK       ResultCode = iota
	ResultFenced              // an epoch or the master did not match
	ResultInvalid             // malformed, unknown group or replica
	ResultNoChange            // valid but nothing to do
)

func (c ResultCode) String() string {
	switch c {
	case ResultOK:
		return "ok"
	case ResultFenced:
		return "fenced"
	case ResultInvalid:
		return "invalid"
	case ResultNoChange:
		return "no change"
	}
	return fmt.Sprintf("ResultCode(%d)", int(c))
}

// apply applies one command to st. It is pure: no clock, no randomness, no
// I/O, so every controller reaches the same state from the same log.
func (st *State) apply(c *Command) Result {
	if st.Groups == nil {
		st.Groups = map[string]*Group{}
	}
	if c.Name == "" {
		return Result{Code: ResultInvalid, Message: "no broker name"}
	}
	switch c.Op {
	case opRegister:
		return st.register(c)
	case opElect:
		return st.elect(c)
	case opAlterSSS:
		return st.alterSSS(c)
	case opRemoveRep:
		return st.removeReplica(c)
	}
	return Result{Code: ResultInvalid, Message: fmt.Sprintf("unknown op %q", c.Op)}
}

func (st *State) register(c *Command) Result {
	if c.ID < 1 {
		return Result{Code: ResultInvalid, Message: fmt.Sprintf("replica id %d: must be >= 1", c.ID)}
	}
	g := st.Groups[c.Name]
	if g == nil {
		g = &Group{Cluster: c.Cluster, Name: c.Name, Replicas: map[int64]*Replica{}}
		st.Groups[c.Name] = g
	}
	if c.Cluster != "" {
		g.Cluster = c.Cluster
	}
	r := g.Replicas[c.ID]
	if r != nil && r.Addr == c.Addr && r.HAAddr == c.HAAddr {
		return Result{Code: ResultNoChange, Group: g.clone()}
	}
	g.Replicas[c.ID] = &Replica{ID: c.ID, Addr: c.Addr, HAAddr: c.HAAddr}
	return Result{Code: ResultOK, Group: g.clone(), Changed: true}
}

func (st *State) elect(c *Command) Result {
	g := st.Groups[c.Name]
	if g == nil {
		return Result{Code: ResultInvalid, Message: "unknown group"}
	}
	if g.MasterID != c.ExpectMaster || g.MasterEpoch != c.ExpectEpoch {
		return Result{Code: ResultFenced, Group: g.clone(), Message: fmt.Sprintf(
			"decided on master %d epoch %d, committed master %d epoch %d",
			c.ExpectMaster, c.ExpectEpoch, g.MasterID, g.MasterEpoch)}
	}
	if c.NewMaster == 0 {
		if g.MasterID == 0 {
			return Result{Code: ResultNoChange, Group: g.clone()}
		}
		// No master: the group is read-only until a candidate is alive.
		// Epoch and SSS stay: the next election bumps the epoch and the
		// old SSS members remain the only clean candidates.
		g.MasterID = 0
		return Result{Code: ResultOK, Group: g.clone(), Changed: true}
	}
	if g.Replicas[c.NewMaster] == nil {
		return Result{Code: ResultInvalid, Group: g.clone(), Message: fmt.Sprintf("replica %d unknown", c.NewMaster)}
	}
	if !c.Unclean && g.MasterEpoch > 0 && !g.inSSS(c.NewMaster) {
		return Result{Code: ResultFenced, Group: g.clone(), Message: fmt.Sprintf("replica %d is not in the sync state set", c.NewMaster)}
	}
	g.MasterID = c.NewMaster
	g.MasterEpoch = max(g.MasterEpoch+1, c.MinEpoch)
	g.SSS = []int64{c.NewMaster}
	g.SSSEpoch++
	return Result{Code: ResultOK, Group: g.clone(), Changed: true}
}

// alterSSS is RocketMQ's alterSyncStateSet fence, less the liveness check
// (the leader does it before proposing: liveness is not in the log).
func (st *State) alterSSS(c *Command) Result {
	g := st.Groups[c.Name]
	if g == nil {
		return Result{Code: ResultInvalid, Message: "unknown group"}
	}
	if err := checkAlterSSS(g, c.MasterID, c.MasterEpoch, c.SSSEpoch, c.NewSSS); err != nil {
		return Result{Code: err.code, Message: err.msg, Group: g.clone()}
	}
	set := normSet(c.NewSSS)
	if slices.Equal(set, g.SSS) {
		return Result{Code: ResultNoChange, Group: g.clone()}
	}
	g.SSS = set
	g.SSSEpoch++
	return Result{Code: ResultOK, Group: g.clone(), Changed: true}
}

type checkErr struct {
	code ResultCode
	msg  string
}

// checkAlterSSS checks a proposal against the committed group, in
// RocketMQ's order: the requester is the master of the current epoch, the
// set's epoch matches, every member exists, the master stays in.
func checkAlterSSS(g *Group, masterID, masterEpoch, sssEpoch int64, newSet []int64) *checkErr {
	switch {
	case g.MasterID == 0 || g.MasterID != masterID:
		return &checkErr{ResultFenced, fmt.Sprintf("replica %d is not the master (master %d)", masterID, g.MasterID)}
	case g.MasterEpoch != masterEpoch:
		return &checkErr{ResultFenced, fmt.Sprintf("master epoch %d, committed %d", masterEpoch, g.MasterEpoch)}
	case g.SSSEpoch != sssEpoch:
		return &checkErr{ResultFenced, fmt.Sprintf("sync state set epoch %d, committed %d", sssEpoch, g.SSSEpoch)}
	}
	for _, id := range newSet {
		if g.Replicas[id] == nil {
			return &checkErr{ResultInvalid, fmt.Sprintf("replica %d unknown", id)}
		}
	}
	if !slices.Contains(newSet, masterID) {
		return &checkErr{ResultInvalid, "the master must stay in the sync state set"}
	}
	return nil
}

func (st *State) removeReplica(c *Command) Result {
	g := st.Groups[c.Name]
	if g == nil || g.Replicas[c.ID] == nil {
		return Result{Code: ResultInvalid, Message: "unknown replica"}
	}
	if g.MasterID == c.ID {
		return Result{Code: ResultInvalid, Group: g.clone(), Message: "the master cannot be removed"}
	}
	delete(g.Replicas, c.ID)
	if i := slices.Index(g.SSS, c.ID); i >= 0 {
		g.SSS = slices.Delete(g.SSS, i, i+1)
		g.SSSEpoch++
	}
	return Result{Code: ResultOK, Group: g.clone(), Changed: true}
}

// normSet sorts and deduplicates a set of ids.
func normSet(ids []int64) []int64 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return slices.Compact(s)
}

// fsm is the raft.FSM: State behind a lock, plus a hook told (outside the
// lock, after the change) which group a committed command changed.
type fsm struct {
	mu sync.RWMutex // mu protects st
	st State

	onChange func(name string) // may be nil; must not block
}

func newFSM(onChange func(string)) *fsm {
	return &fsm{st: State{Groups: map[string]*Group{}}, onChange: onChange}
}

// Apply decodes and applies one log entry; it returns a Result (or an
// error for an undecodable entry).
func (f *fsm) Apply(l *raft.Log) any {
	var c Command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("controller: decode log entry %d: %w", l.Index, err)
	}
	f.mu.Lock()
	res := f.st.apply(&c)
	f.mu.Unlock()
	if res.Changed && f.onChange != nil {
		f.onChange(c.Name)
	}
	return res
}

// group returns a copy of a committed group, nil if unknown.
func (f *fsm) group(name string) *Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g := f.st.Groups[name]; g != nil {
		return g.clone()
	}
	return nil
}

// groups returns copies of every committed group, sorted by name.
func (f *fsm) groups() []*Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Group, 0, len(f.st.Groups))
	for _, g := range f.st.Groups {
		out = append(out, g.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Snapshot captures the state as JSON.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(&f.st)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	return snapshot(b), nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var st State
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("controller: restore snapshot: %w", err)
	}
	if st.Groups == nil {
		st.Groups = map[string]*Group{}
	}
	f.mu.Lock()
	f.st = st
	names := make([]string, 0, len(st.Groups))
	for n := range st.Groups {
		names = append(names, n)
	}
	f.mu.Unlock()
	if f.onChange != nil {
		for _, n := range names {
			f.onChange(n)
		}
	}
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: write snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshot) Release() {}
