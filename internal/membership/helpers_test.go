package membership

import (
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/bolide-mq/bolide/internal/testutil"
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

// waitFor polls cond until it returns nil or d passes.
var waitFor = testutil.WaitFor
