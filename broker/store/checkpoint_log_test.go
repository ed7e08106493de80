package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
