package membership

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// testLogger logs into t until the test ends, then drops lines, so that a
// memberlist goroutine winding down cannot log into a finished test.
func testLogger(t *testing.T) *zap.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.off) // registered first, so it runs last
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.DebugLevel)).Named(t.Name())
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

func (w *testWriter) off() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// waitFor polls cond until it returns nil or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
