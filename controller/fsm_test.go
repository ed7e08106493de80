package controller

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

func reg(name string, id int64) *Command {
	return &Command{Op: opRegister, Name: name, Cluster: "c1", ID: id, Addr: "a", HAAddr: "h"}
}

func elect(name string, newMaster, expMaster, expEpoch int64) *Command {
	return &Command{Op: opElect, Name: name, NewMaster: newMaster, ExpectMaster: expMaster, ExpectEpoch: expEpoch}
}

func alter(name string, master, epoch, sssEpoch int64, set ...int64) *Command {
	return &Command{Op: opAlterSSS, Name: name, MasterID: master, MasterEpoch: epoch, SSSEpoch: sssEpoch, NewSSS: set}
}

func mustApply(t *testing.T, st *State, c *Command, want ResultCode) Result {
	t.Helper()
	r := st.apply(c)
	if r.Code != want {
		t.Fatalf("%+v: got %v (%s), want %v", c, r.Code, r.Message, want)
	}
	return r
}

func TestFSMFirstElectionAndEpochs(t *testing.T) {
	st := &State{}
	mustApply(t, st, reg("g", 1), ResultOK)
	mustApply(t, st, reg("g", 1), ResultNoChange)
	mustApply(t, st, reg("g", 2), ResultOK)
	mustApply(t, st, reg("g", 0), ResultInvalid)
	r := mustApply(t, st, elect("g", 1, 0, 0), ResultOK)
	if g := r.Group; g.MasterID != 1 || g.MasterEpoch != 1 || !slices.Equal(g.SSS, []int64{1}) || g.SSSEpoch != 1 {
		t.Fatalf("after first election: %+v", g)
	}
	// A second "first election" decided on the same view is fenced.
	mustApply(t, st, elect("g", 2, 0, 0), ResultFenced)
	// Replica 2 is not in the SSS: a clean election of it is refused.
	mustApply(t, st, elect("g", 2, 1, 1), ResultFenced)
	mustApply(t, st, alter("g", 1, 1, 1, 1, 2), ResultOK)
	r = mustApply(t, st, elect("g", 2, 1, 1), ResultOK)
	if g := r.Group; g.MasterID != 2 || g.MasterEpoch != 2 || !slices.Equal(g.SSS, []int64{2}) || g.SSSEpoch != 3 {
		t.Fatalf("after the second election: %+v", g)
	}
	// No master: epoch and SSS kept; the next election bumps the epoch.
	r = mustApply(t, st, elect("g", 0, 2, 2), ResultOK)
	if g := r.Group; g.MasterID != 0 || g.MasterEpoch != 2 || !slices.Equal(g.SSS, []int64{2}) {
		t.Fatalf("no master: %+v", g)
	}
	mustApply(t, st, elect("g", 0, 0, 2), ResultNoChange)
	// Unclean: replica 1 is outside the SSS {2}.
	mustApply(t, st, elect("g", 1, 0, 2), ResultFenced)
	c := elect("g", 1, 0, 2)
	c.Unclean = true
	r = mustApply(t, st, c, ResultOK)
	if g := r.Group; g.MasterID != 1 || g.MasterEpoch != 3 {
		t.Fatalf("unclean: %+v", g)
	}
	mustApply(t, st, elect("g", 9, 1, 3), ResultInvalid)
	// A first election above the epoch the replica knows.
	mustApply(t, st, reg("k", 1), ResultOK)
	c = elect("k", 1, 0, 0)
	c.MinEpoch = 6
	if r := mustApply(t, st, c, ResultOK); r.Group.MasterEpoch != 6 {
		t.Fatalf("min epoch: %+v", r.Group)
	}
	mustApply(t, st, elect("nope", 1, 0, 0), ResultInvalid)
}

func TestFSMAlterSSSFencing(t *testing.T) {
	st := &State{}
	for id := int64(1); id <= 3; id++ {
		mustApply(t, st, reg("g", id), ResultOK)
	}
	mustApply(t, st, elect("g", 1, 0, 0), ResultOK) // master 1, epoch 1, sss {1} epoch 1
	for _, tc := range []struct {
		name string
		c    *Command
		want ResultCode
	}{
		{"not the master", alter("g", 2, 1, 1, 1, 2), ResultFenced},
		{"old master epoch", alter("g", 1, 0, 1, 1, 2), ResultFenced},
		{"old sss epoch", alter("g", 1, 1, 0, 1, 2), ResultFenced},
		{"unknown member", alter("g", 1, 1, 1, 1, 7), ResultInvalid},
		{"master left out", alter("g", 1, 1, 1, 2, 3), ResultInvalid},
		{"unchanged", alter("g", 1, 1, 1, 1), ResultNoChange},
		{"unknown group", alter("x", 1, 1, 1, 1), ResultInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) { mustApply(t, st, tc.c, tc.want) })
	}
	r := mustApply(t, st, alter("g", 1, 1, 1, 3, 1, 2, 2), ResultOK)
	if !slices.Equal(r.Group.SSS, []int64{1, 2, 3}) || r.Group.SSSEpoch != 2 {
		t.Fatalf("expanded: %+v", r.Group)
	}
	// The previous sss epoch is now stale.
	mustApply(t, st, alter("g", 1, 1, 1, 1), ResultFenced)
	r = mustApply(t, st, alter("g", 1, 1, 2, 1), ResultOK)
	if !slices.Equal(r.Group.SSS, []int64{1}) || r.Group.SSSEpoch != 3 {
		t.Fatalf("shrunk: %+v", r.Group)
	}
	// A deposed master (epoch 1) cannot alter the set after an election.
	mustApply(t, st, alter("g", 1, 1, 3, 1, 2), ResultOK)
	mustApply(t, st, elect("g", 2, 1, 1), ResultOK)
	mustApply(t, st, alter("g", 1, 1, 4, 1, 2), ResultFenced)
}

func TestFSMRemoveReplica(t *testing.T) {
	st := &State{}
	mustApply(t, st, reg("g", 1), ResultOK)
	mustApply(t, st, reg("g", 2), ResultOK)
	mustApply(t, st, elect("g", 1, 0, 0), ResultOK)
	mustApply(t, st, alter("g", 1, 1, 1, 1, 2), ResultOK)
	mustApply(t, st, &Command{Op: opRemoveRep, Name: "g", ID: 1}, ResultInvalid) // the master
	r := mustApply(t, st, &Command{Op: opRemoveRep, Name: "g", ID: 2}, ResultOK)
	if !slices.Equal(r.Group.SSS, []int64{1}) || r.Group.SSSEpoch != 3 || r.Group.Replicas[2] != nil {
		t.Fatalf("%+v", r.Group)
	}
	mustApply(t, st, &Command{Op: "bogus", Name: "g"}, ResultInvalid)
	mustApply(t, st, &Command{Op: opRegister}, ResultInvalid)
}

// log is a command sequence exercising every op.
func testLog() []*Command {
	c := elect("g", 1, 0, 2)
	c.Unclean = true
	return []*Command{reg("g", 1), reg("g", 2), elect("g", 1, 0, 0), alter("g", 1, 1, 1, 1, 2),
		elect("g", 2, 1, 1), reg("h", 5), elect("h", 5, 0, 0), elect("g", 0, 2, 2), c, reg("g", 3),
		{Op: opRemoveRep, Name: "g", ID: 3}, alter("g", 9, 9, 9, 9)}
}

// Two FSMs fed the same log reach the same state, and a snapshot
// restores it exactly.
func TestFSMDeterministicAndSnapshot(t *testing.T) {
	var changed []string
	a, b := newFSM(func(n string) { changed = append(changed, n) }), newFSM(nil)
	for i, c := range testLog() {
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		ra := a.Apply(&raft.Log{Index: uint64(i + 1), Data: data})
		rb := b.Apply(&raft.Log{Index: uint64(i + 1), Data: data})
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("entry %d: %v vs %v", i, ra, rb)
		}
	}
	if !reflect.DeepEqual(a.st, b.st) {
		t.Fatalf("states differ:\n%+v\n%+v", a.st, b.st)
	}
	if len(changed) == 0 {
		t.Fatal("onChange never called")
	}
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	c := newFSM(nil)
	if err := c.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.st, c.st) {
		t.Fatalf("restored state differs:\n%+v\n%+v", a.st, c.st)
	}
	if r := a.Apply(&raft.Log{Index: 99, Data: []byte("{")}); r == nil {
		t.Fatal("undecodable entry accepted")
	} else if _, ok := r.(error); !ok {
		t.Fatalf("undecodable entry: %T", r)
	}
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

func TestElectionOrder(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name  string
		cands []Candidate
		want  int64
	}{
		{"epoch first", []Candidate{{ID: 1, Epoch: 3, MaxOffset: 10}, {ID: 2, Epoch: 4, MaxOffset: 1}}, 2},
		{"then offset", []Candidate{{ID: 1, Epoch: 3, MaxOffset: 10}, {ID: 2, Epoch: 3, MaxOffset: 11}}, 2},
		{"offset gap over 2 GiB", []Candidate{{ID: 1, Epoch: 3, MaxOffset: 3 * gib}, {ID: 2, Epoch: 3, MaxOffset: 10}}, 1},
		{"offset gap over 2 GiB, reversed", []Candidate{{ID: 2, Epoch: 3, MaxOffset: 10}, {ID: 1, Epoch: 3, MaxOffset: 3*gib + 10}}, 1},
		{"gap of exactly 2^31", []Candidate{{ID: 2, Epoch: 1, MaxOffset: 0}, {ID: 1, Epoch: 1, MaxOffset: 2 * gib}}, 1},
		{"gap over 4 GiB", []Candidate{{ID: 1, Epoch: 1, MaxOffset: 5 * gib}, {ID: 2, Epoch: 1, MaxOffset: 5*gib + 1}}, 2},
		{"then priority", []Candidate{{ID: 1, MaxOffset: 5, Priority: 2}, {ID: 2, MaxOffset: 5, Priority: 1}}, 2},
		{"then id", []Candidate{{ID: 3, MaxOffset: 5}, {ID: 2, MaxOffset: 5}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := choose(tc.cands)
			if !ok || got.ID != tc.want {
				t.Fatalf("chose %d, want %d", got.ID, tc.want)
			}
			slices.Reverse(tc.cands)
			if got, _ := choose(tc.cands); got.ID != tc.want {
				t.Fatalf("reversed: chose %d, want %d", got.ID, tc.want)
			}
		})
	}
	if _, ok := choose(nil); ok {
		t.Fatal("chose from nothing")
	}
}

func TestDecide(t *testing.T) {
	g := &Group{Name: "g", Replicas: map[int64]*Replica{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}}, MasterID: 1,
		MasterEpoch: 4, SSS: []int64{1, 2}}
	alive := map[int64]Candidate{2: {ID: 2, Epoch: 4, MaxOffset: 5}, 3: {ID: 3, Epoch: 4, MaxOffset: 99}}
	if out := decide(electionInput{group: g, alive: alive}); out.NewMaster != 2 || out.Unclean {
		t.Fatalf("clean: %+v", out)
	}
	delete(alive, 2)
	if out := decide(electionInput{group: g, alive: alive}); out.NewMaster != 0 {
		t.Fatalf("none in SSS, clean: %+v", out)
	}
	if out := decide(electionInput{group: g, alive: alive, unclean: true}); out.NewMaster != 3 || !out.Unclean {
		t.Fatalf("unclean: %+v", out)
	}
	// A replica alive but unknown to the group is never a candidate.
	if out := decide(electionInput{group: g, alive: map[int64]Candidate{9: {ID: 9}}, unclean: true}); out.NewMaster != 0 {
		t.Fatalf("unknown replica: %+v", out)
	}
}
