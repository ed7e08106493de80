package controller

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/testutil"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var waitFor = testutil.WaitFor

// Test timings: Raft 300 ms, broker timeout 1 s, lease 600 ms.
func testOptions(id string) Options {
	o := DefaultOptions()
	o.ID = id
	o.RaftListen = "127.0.0.1:0"
	o.InMemory = true
	o.BrokerTimeout = time.Second
	o.Lease = 600 * time.Millisecond
	o.StreamGrace = time.Second
	o.ScanInterval = 50 * time.Millisecond
	o.RaftHeartbeat = 300 * time.Millisecond
	o.RaftElectionTimeout = 300 * time.Millisecond
	return o
}

// testLogger logs into t until the test ends, then drops lines (Raft's
// goroutines may log while winding down).
func testLogger(t *testing.T) *zap.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.off)
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.InfoLevel)).Named(t.Name())
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

// node is a controller served on its own gRPC server.
type node struct {
	t    *testing.T
	opts Options
	c    *Controller
	srv  *grpc.Server
	addr string // gRPC
	once sync.Once
}

func startNode(t *testing.T, o Options) *node {
	t.Helper()
	c, err := New(o, testLogger(t).Named(o.ID))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	c.Register(srv)
	n := &node{t: t, opts: o, c: c, srv: srv, addr: lis.Addr().String()}
	if err := c.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(n.stop)
	return n
}

// stop closes the controller (ending its streams), then the server.
func (n *node) stop() {
	n.once.Do(func() {
		if err := n.c.Close(); err != nil {
			n.t.Errorf("Close %s: %v", n.opts.ID, err)
		}
		n.srv.Stop()
	})
}

// freeAddrs picks n loopback addresses for Raft transports, which keep
// them across restarts (freeport.Addr).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		addr, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// startCluster starts three controllers with a fixed configuration.
func startCluster(t *testing.T, mod func(*Options)) []*node {
	t.Helper()
	addrs := freeAddrs(t, 3)
	ids := []string{"n0", "n1", "n2"}
	var peers []Peer
	for i, id := range ids {
		peers = append(peers, Peer{ID: id, RaftAddr: addrs[i]})
	}
	var nodes []*node
	for i, id := range ids {
		o := testOptions(id)
		o.RaftListen = addrs[i]
		o.Peers = peers
		if mod != nil {
			mod(&o)
		}
		nodes = append(nodes, startNode(t, o))
	}
	return nodes
}

// leader waits for exactly one ready leader among the running nodes.
func leader(t *testing.T, nodes []*node) *node {
	t.Helper()
	var l *node
	testutil.Eventually(t, 10*time.Second, "a ready controller leader", func() bool {
		l = nil
		for _, n := range nodes {
			if n.c.leadership().ready {
				if l != nil {
					return false
				}
				l = n
			}
		}
		return l != nil
	})
	return l
}

func dialController(t *testing.T, addr string) pb.ControllerClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewControllerClient(cc)
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}
