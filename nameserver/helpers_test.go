package nameserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/internal/testutil"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
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

// startServer starts a NameServer on 127.0.0.1:0 with gossip on a free
// port and the fast profile, closed when the test ends.
func startServer(t *testing.T, mod func(*Options)) *Server {
	t.Helper()
	o := DefaultOptions()
	o.ListenAddr = "127.0.0.1:0"
	o.GossipProfile = "fast"
	if mod != nil {
		mod(&o)
	}
	s, err := New(o, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// dial returns a NameServer client of addr.
func dial(t *testing.T, addr string) pb.NameServerClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewNameServerClient(cc)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}
