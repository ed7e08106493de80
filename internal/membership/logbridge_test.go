package membership

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestLogBridgeLevels(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	b := newLogBridge(zap.New(core))
	std := b.stdLogger()
	std.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	std.Printf("[INFO] memberlist: Suspect n1 has failed")
	std.Printf("[WARN] memberlist: Refuting a dead message")
	std.Printf("[ERR] memberlist: Failed fallback ping")
	std.Printf("no level at all")
	b.closed.Store(true)
	std.Printf("[ERR] memberlist: after close")

	want := []struct {
		level zapcore.Level
		msg   string
	}{
		{zapcore.DebugLevel, "Stream connection from=127.0.0.1:1"},
		{zapcore.InfoLevel, "Suspect n1 has failed"},
		{zapcore.WarnLevel, "Refuting a dead message"},
		{zapcore.ErrorLevel, "Failed fallback ping"},
		{zapcore.InfoLevel, "no level at all"},
	}
	got := logs.All()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Level != w.level || got[i].Message != w.msg {
			t.Errorf("entry %d = %v %q, want %v %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}
