package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bolide-mq/bolide/commitlog"
)

// TestMissingCheckpointLog: a new store has no checkpoint, which is not
// worth a warning; a store with a log but no checkpoint is.
func TestMissingCheckpointLog(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Store, *observer.ObservedLogs) {
		t.Helper()
		core, logs := observer.New(zapcore.DebugLevel)
		s, err := Open(testOptions(dir, commitlog.FlushSync), zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		return s, logs
	}
	s, logs := open()
	if warn := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(warn) > 0 {
		t.Errorf("a new store logs a warning: %q", warn[0].Message)
	}
	if logs.FilterMessage("new store: no checkpoint and an empty log").Len() != 1 {
		t.Error("a new store is not logged as new")
	}
	if _, err := s.Put(context.Background(), newMsg("T", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil {
		t.Fatal(err)
	}
	s, logs = open()
	defer s.Close()
	warn := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessage("no valid checkpoint; verified the whole log").All()
	if len(warn) != 1 {
		t.Fatalf("a store with a log and no checkpoint: %d warnings", len(warn))
	}
	if n := warn[0].ContextMap()["records"]; n != int64(1) {
		t.Errorf("records = %v, want 1", n)
	}
}

// TestOpenLogsResources: Open says what the store needs of the process's
// limits: its files, the descriptors and mappings they hold, and the
// limits themselves.
func TestOpenLogsResources(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir, commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := s.Put(context.Background(), newMsg("R", int32(i%2), i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	s, err = Open(testOptions(dir, commitlog.FlushAsync), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var found []observer.LoggedEntry
	for _, e := range logs.All() {
		if _, ok := e.ContextMap()["consumeQueueFiles"]; ok {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d resource lines logged at open", len(found))
	}
	m := found[0].ContextMap()
	if m["consumeQueueFiles"] != int64(2) || m["commitLogSegments"].(int64) < 1 ||
		m["rlimitNofile"].(uint64) == 0 || m["vmMaxMapCount"].(int64) == 0 || m["descriptorsNeeded"].(int64) <= m["mappingsNeeded"].(int64) {
		t.Fatalf("resource line: %v", m)
	}
}

// TestCheckpointLeavesLightQueuesStaged: with many queues written lightly,
// a periodic checkpoint leaves their units staged and journaled, records
// DispatchFrom at the dispatched end and StagedFrom at the first staged
// unit; Close flushes everything. A crash image taken after it recovers
// from the journal without dispatching again, and from StagedFrom when
// the journal lost its blocks. (The crash tests, whose options count four
// queues as many, kill the writer after such checkpoints.)
func TestCheckpointLeavesLightQueuesStaged(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, commitlog.FlushAsync)
	opts.ConsumeQueue.SyncFSAbove = 2
	opts.QueueFlushEvery = 1 << 30
	opts.CheckpointInterval = time.Hour // the test takes them
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first, last PutResult
	for round := range 2 {
		for i := range 8 {
			r, err := s.Put(context.Background(), newMsg("L", int32(i), i))
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = r
			}
			last = r
		}
		if err := waitDispatched(s, last.End(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if err := s.Flush(); err != nil { // the new files' entries
				t.Fatal(err)
			}
		}
	}
	read := func() checkpoint {
		t.Helper()
		cf, cp, ok, err := openCheckpoint(filepath.Join(dir, checkpointName))
		if err != nil || !ok {
			t.Fatalf("checkpoint: %v %v", ok, err)
		}
		cf.close()
		return cp
	}
	s.cpMu.Lock()
	s.checkpoints = 1
	err = s.checkpointLocked(false)
	var image string
	if err == nil {
		// What a crash right now would leave: the files as they are.
		image = t.TempDir()
		err = os.CopyFS(image, os.DirFS(dir))
	}
	s.cpMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	cp := read()
	if cp.DispatchFrom != last.End() || cp.StagedFrom > first.PhysicalOffset || cp.Journal.End == 0 {
		t.Fatalf("periodic checkpoint %+v: want DispatchFrom %d (the staged units journaled), StagedFrom at most %d",
			cp, last.End(), first.PhysicalOffset)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if cp := read(); cp.DispatchFrom != last.End() || cp.StagedFrom != cp.DispatchFrom || cp.Journal.End != 0 {
		t.Fatalf("checkpoint at Close: %+v, want DispatchFrom %d and nothing staged", cp, last.End())
	}
	holds := func(s *Store) {
		t.Helper()
		for i := range 8 {
			if _, maxOff := s.QueueOffsets("L", int32(i)); maxOff != 2 {
				t.Fatalf("queue %d holds %d after reopen", i, maxOff)
			}
		}
	}
	s, err = Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	holds(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// After the crash, the journal puts the staged units back: nothing
	// is dispatched again.
	damaged := t.TempDir()
	if err := os.CopyFS(damaged, os.DirFS(image)); err != nil {
		t.Fatal(err)
	}
	opts.Dir = image
	s, err = Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := s.Recovery()
	if rec.CleanShutdown || rec.Journal.Units != 8 || !rec.Journal.Covers(cp.Journal) || rec.DispatchFrom != cp.DispatchFrom || rec.Redispatched != 0 {
		t.Fatalf("recovery from the crash image: %+v", rec)
	}
	holds(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A journal lost with its blocks: the store rebuilds from the first
	// staged unit instead.
	if err := os.Truncate(filepath.Join(damaged, "consumequeue", "staged.journal"), 20); err != nil {
		t.Fatal(err)
	}
	opts.Dir = damaged
	s, err = Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec = s.Recovery()
	if rec.Journal.Units != 0 || rec.DispatchFrom != cp.StagedFrom || rec.Redispatched < 8 {
		t.Fatalf("recovery without the journal's blocks: %+v (checkpoint %+v)", rec, cp)
	}
	holds(s)
}
