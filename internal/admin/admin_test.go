package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestServerRoutes(t *testing.T) {
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "bolide_test_hits_total", Help: "test"})
	hits.Add(3)
	reg, err := NewRegistry("v9.9.9", hits)
	if err != nil {
		t.Fatal(err)
	}
	var notReady atomic.Pointer[error]
	reason := errors.New("not registered with a name server")
	notReady.Store(&reason)
	s, err := New(Options{Addr: "127.0.0.1:0", Gatherer: reg, Ready: func() error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	base := "http://" + s.Addr()

	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, reason.Error()) {
		t.Fatalf("readyz before: %d %q", code, body)
	}
	notReady.Store(nil)
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("readyz after: %d %q", code, body)
	}
	code, body := get(t, base+"/metrics")
	for _, want := range []string{"bolide_test_hits_total 3", `bolide_build_info{version="v9.9.9"} 1`, "go_goroutines", "process_resident_memory_bytes"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %q (%d)", want, code)
		}
	}
	if code, body := get(t, base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof index: %d", code)
	}
	if code, _ := get(t, base+"/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Fatalf("pprof goroutine: %d", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestServerCloseWithoutStart(t *testing.T) {
	s, err := New(Options{Addr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Start() // after Close: nothing
	// The port is free again.
	s2, err := New(Options{Addr: addr}, nil)
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	_ = s2.Close(context.Background())
	if _, err := New(Options{Addr: ""}, nil); err == nil {
		t.Fatal("empty address accepted")
	}
}
