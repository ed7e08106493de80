package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// fakeServer records what Serve does to it.
type fakeServer struct {
	startErr, stopErr error

	mu       sync.Mutex
	started  bool
	closed   bool
	drain    time.Duration // until the deadline of Shutdown's context
	shutdown bool
}

func (s *fakeServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	return s.startErr
}

func (s *fakeServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown = true
	if d, ok := ctx.Deadline(); ok {
		s.drain = time.Until(d)
	}
	return s.stopErr
}

func (s *fakeServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *fakeServer) Addr() string                    { return "127.0.0.1:10911" }
func (s *fakeServer) Collector() prometheus.Collector { return nil }
func (s *fakeServer) Ready() error                    { return errors.New("not registered") }

func (s *fakeServer) state() (started, closed, shutdown bool, drain time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.closed, s.shutdown, s.drain
}

func serveOptions(dir string) ServeOptions {
	return ServeOptions{
		Name:          "fake",
		ListenAddr:    "127.0.0.1:0",
		AddrFile:      filepath.Join(dir, "addr"),
		AdminListen:   "127.0.0.1:0",
		AdminAddrFile: filepath.Join(dir, "admin"),
		DrainTimeout:  7 * time.Second,
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func gone(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", filepath.Base(p), err)
		}
	}
}

// TestServe: a stale address file goes before the server is built; the
// admin listener answers /readyz with the server's Ready while it serves;
// stopping shuts the server down within the drain timeout and removes
// both address files.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions(dir)
	if err := os.WriteFile(o.AddrFile, []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := &fakeServer{}
	ctx, cancel := context.WithCancel(context.Background())
	code, served := make(chan int, 1), make(chan struct{})
	defer func() { cancel(); <-served }()
	go func() {
		defer close(served)
		code <- Serve(ctx, func() (Server, error) {
			if _, err := os.Stat(o.AddrFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stale address file kept while building: %v", err)
			}
			return srv, nil
		}, o, zaptest.NewLogger(t))
	}()
	testutil.WaitFor(t, 10*time.Second, "address file", func() error {
		b, err := os.ReadFile(o.AddrFile)
		if err == nil && strings.TrimSpace(string(b)) != srv.Addr() {
			err = fmt.Errorf("address file %q, want %q", b, srv.Addr())
		}
		return err
	})
	resp, err := http.Get("http://" + readFile(t, o.AdminAddrFile) + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "not registered") {
		t.Fatalf("readyz %d %q", resp.StatusCode, body)
	}
	adminAddr := readFile(t, o.AdminAddrFile)

	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
	started, closed, shutdown, drain := srv.state()
	if !started || !shutdown || closed {
		t.Fatalf("started %v, shut down %v, closed %v", started, shutdown, closed)
	}
	if drain < 6*time.Second || drain > 7*time.Second {
		t.Errorf("Shutdown's deadline %v away, want about 7s", drain)
	}
	gone(t, o.AddrFile, o.AdminAddrFile)
	if c, err := net.DialTimeout("tcp", adminAddr, time.Second); err == nil {
		_ = c.Close()
		t.Error("admin listener still up")
	}
}

// TestServeFailures: each failure exits 1, closes what was built and
// leaves no address file.
func TestServeFailures(t *testing.T) {
	lg := zaptest.NewLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop at once once started

	t.Run("build", func(t *testing.T) {
		o := serveOptions(t.TempDir())
		if err := os.WriteFile(o.AddrFile, []byte("stale\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code := Serve(ctx, func() (Server, error) { return nil, errors.New("store: corrupt") }, o, lg)
		if code != 1 {
			t.Fatalf("exit %d", code)
		}
		gone(t, o.AddrFile, o.AdminAddrFile)
	})

	t.Run("start", func(t *testing.T) {
		o := serveOptions(t.TempDir())
		srv := &fakeServer{startErr: errors.New("bind: address already in use")}
		if code := Serve(ctx, func() (Server, error) { return srv, nil }, o, lg); code != 1 {
			t.Fatalf("exit %d", code)
		}
		if started, closed, shutdown, _ := srv.state(); !started || !closed || shutdown {
			t.Fatalf("started %v, closed %v, shut down %v", started, closed, shutdown)
		}
		gone(t, o.AddrFile, o.AdminAddrFile)
	})

	t.Run("admin address taken", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		o := serveOptions(t.TempDir())
		o.AdminListen = l.Addr().String()
		srv := &fakeServer{}
		if code := Serve(ctx, func() (Server, error) { return srv, nil }, o, lg); code != 1 {
			t.Fatalf("exit %d", code)
		}
		if started, closed, _, _ := srv.state(); started || !closed {
			t.Fatalf("started %v, closed %v", started, closed)
		}
		gone(t, o.AddrFile, o.AdminAddrFile)
	})

	t.Run("stop", func(t *testing.T) {
		o := serveOptions(t.TempDir())
		srv := &fakeServer{stopErr: errors.New("flush failed")}
		if code := Serve(ctx, func() (Server, error) { return srv, nil }, o, lg); code != 1 {
			t.Fatalf("exit %d", code)
		}
		if _, _, shutdown, _ := srv.state(); !shutdown {
			t.Fatal("not shut down")
		}
		gone(t, o.AddrFile, o.AdminAddrFile)
	})
}
