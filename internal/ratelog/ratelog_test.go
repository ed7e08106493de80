package ratelog

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestWarner(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	var w Warner
	w.Warn(log, "refused", zap.Int("n", 1))
	w.Warn(log, "refused", zap.Int("n", 2))
	w.Warn(log, "refused", zap.Int("n", 3))
	if got := logs.Len(); got != 1 {
		t.Fatalf("%d WARNs within Interval, want 1", got)
	}
	if _, ok := logs.All()[0].ContextMap()["suppressed_since_last"]; ok {
		t.Fatal("the first WARN counts suppressed ones")
	}

	w.mu.Lock()
	w.last = time.Now().Add(-Interval)
	w.mu.Unlock()
	w.Warn(log, "refused", zap.Int("n", 4))
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d WARNs after Interval, want 2", len(all))
	}
	m := all[1].ContextMap()
	if m["suppressed_since_last"] != int64(2) || m["n"] != int64(4) {
		t.Fatalf("second WARN's fields %v, want n=4 suppressed_since_last=2", m)
	}
}
