package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

func TestResolveAdminAddr(t *testing.T) {
	for _, c := range []struct {
		value, listen, want string
		derived, fails      bool
	}{
		{"auto", "127.0.0.1:10911", "127.0.0.1:10913", true, false},
		{"auto", "0.0.0.0:9876", "127.0.0.1:9878", true, false},
		{"auto", "127.0.0.1:0", "127.0.0.1:0", true, false},
		{"auto", ":10911", "127.0.0.1:10913", true, false},
		{"", "127.0.0.1:10911", "", false, false},
		{"off", "127.0.0.1:10911", "", false, false},
		{"0.0.0.0:10980", "127.0.0.1:10911", "0.0.0.0:10980", false, false},
		{"everywhere", "127.0.0.1:10911", "", false, true},
		{"auto", "nonsense", "", false, true},
		{"auto", "127.0.0.1:65535", "", false, true},
	} {
		got, derived, err := ResolveAdminAddr(c.value, c.listen)
		if (err != nil) != c.fails || got != c.want || derived != c.derived {
			t.Errorf("ResolveAdminAddr(%q, %q) = %q, %v, %v", c.value, c.listen, got, derived, err)
		}
		if err != nil && !strings.Contains(err.Error(), "admin-listen") {
			t.Errorf("error %q does not name admin-listen", err)
		}
	}
}

func TestStartAdmin(t *testing.T) {
	lg := zaptest.NewLogger(t)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "admin")
	if err := os.WriteFile(addrFile, []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bolide_test_gauge", Help: "test"})
	a, err := StartAdmin("127.0.0.1:0", false, addrFile, g, func() error { return errors.New("warming up") }, AdminSecurity{}, lg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(addrFile)
	if err != nil || strings.TrimSpace(string(b)) != a.Addr() {
		t.Fatalf("address file %q (%v), admin at %s", b, err, a.Addr())
	}
	resp, err := http.Get("http://" + a.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "warming up") {
		t.Fatalf("readyz %d %q", resp.StatusCode, body)
	}

	// The same port again: derived is skipped, explicit is an error.
	if other, err := StartAdmin(a.Addr(), true, "", nil, nil, AdminSecurity{}, lg); err != nil || other != nil {
		t.Fatalf("derived address taken: %v %v", other, err)
	}
	if _, err := StartAdmin(a.Addr(), false, "", nil, nil, AdminSecurity{}, lg); err == nil {
		t.Fatal("explicit address taken: accepted")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(addrFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("address file left: %v", err)
	}
	if _, err := net.DialTimeout("tcp", a.Addr(), time.Second); err == nil {
		t.Fatal("still listening")
	}

	// Off: nothing listens, a stale file goes, and the nil Admin is usable.
	if err := os.WriteFile(addrFile, []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	off, err := StartAdmin("", false, addrFile, nil, nil, AdminSecurity{}, lg)
	if err != nil || off != nil || off.Addr() != "" || off.Close(ctx) != nil {
		t.Fatalf("off: %v %v", off, err)
	}
	if _, err := os.Stat(addrFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale address file kept: %v", err)
	}
}

func TestRequirePositive(t *testing.T) {
	t.Setenv("BOLIDE_SCAN_INTERVAL", "-3s")
	f := newTestFlags()
	var queues int
	var size int64
	f.fs.IntVar(&queues, "queues", 8, "")
	f.fs.Int64Var(&size, "segment-size", 1<<30, "")
	if err := f.fs.Parse([]string{"--queues", "0"}); err != nil {
		t.Fatal(err)
	}
	c := NewConfig(f.fs, EnvPrefix, "config")
	if err := c.Load(writeFile(t, "segment-size: -1\n")); err != nil {
		t.Fatal(err)
	}
	err := c.RequirePositive("broker-timeout", "scan-interval", "queues", "segment-size")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"scan-interval must be > 0, not -3s (from BOLIDE_SCAN_INTERVAL)",
		"queues must be > 0, not 0 (from --queues)", "segment-size must be > 0, not -1 (from the config file)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "broker-timeout") {
		t.Errorf("a positive setting is named: %v", err)
	}
	if err := c.RequirePositive("listen"); err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Errorf("a text setting: %v", err)
	}
}

func TestDocTable(t *testing.T) {
	f := newTestFlags()
	f.fs.Lookup("listen").Usage = "address | port"
	c := NewConfig(f.fs, EnvPrefix, "config")
	table := c.DocTable()
	for _, want := range []string{
		"| `listen` | `127.0.0.1:9876` | `BOLIDE_LISTEN` | address \\| port |",
		"| `broker-timeout` | `2m0s` | `BOLIDE_BROKER_TIMEOUT` |",
		"| `gossip-seeds` | \"\" | `BOLIDE_GOSSIP_SEEDS` |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "`config`") {
		t.Error("the config flag is listed")
	}

	doc := filepath.Join(t.TempDir(), "config.md")
	begin, end := docMarkers("bolide-test")
	if err := os.WriteFile(doc, []byte("# title\n"+begin+"| old |\n"+end+"\ntail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SyncDocTable(doc, "bolide-test", table, false); !errors.Is(err, ErrDocStale) {
		t.Fatalf("stale table: %v", err)
	}
	if err := SyncDocTable(doc, "bolide-test", table, true); err != nil {
		t.Fatal(err)
	}
	if err := SyncDocTable(doc, "bolide-test", table, false); err != nil {
		t.Fatalf("after update: %v", err)
	}
	b, _ := os.ReadFile(doc)
	if !strings.HasPrefix(string(b), "# title\n") || !strings.HasSuffix(string(b), end+"\ntail\n") {
		t.Fatalf("update touched more than the table:\n%s", b)
	}
	if err := SyncDocTable(doc, "bolide-other", table, false); err == nil {
		t.Fatal("missing section accepted")
	}
}
