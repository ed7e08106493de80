package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/console"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/nameserver"
)

// serveNameServer runs a real NameServer under Serve with con and sec, and
// returns its admin listener's base URL; the daemon stops at cleanup.
func serveNameServer(t *testing.T, con Console, authCfg auth.Config) string {
	t.Helper()
	dir := t.TempDir()
	o := serveOptions(dir)
	o.Name = "nameserver"
	o.Console = con
	o.Auth = authCfg
	o.TLS = tlsconf.Config{Mode: tlsconf.Off}
	no := nameserver.DefaultOptions()
	no.ListenAddr, no.GossipAddr, no.Auth = "127.0.0.1:0", "off", authCfg
	lg := zaptest.NewLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	code, served := make(chan int, 1), make(chan struct{})
	go func() {
		defer close(served)
		code <- Serve(ctx, func() (Server, error) { return nameserver.New(no, lg.Named("ns")) }, o, lg)
	}()
	t.Cleanup(func() {
		cancel()
		<-served
		if c := <-code; c != 0 {
			t.Errorf("nameserver exit %d", c)
		}
	})
	testutil.WaitFor(t, 10*time.Second, "admin address file", func() error {
		_, err := os.Stat(o.AdminAddrFile)
		return err
	})
	return "http://" + readFile(t, o.AdminAddrFile)
}

// The admin listener serves the console (pages and API) next to its own
// routes; --console=false serves none of it.
func TestAdminConsole(t *testing.T) {
	base := serveNameServer(t, Console{Enabled: true, Daemon: console.NameServer}, auth.Config{})
	c := httpClient(nil, false)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		path string
		want int
		has  string
	}{
		{"/", http.StatusFound, ""},
		{"/console/", 200, "<html"},
		{"/console/app.js", 200, ""},
		{"/console/api/whoami", 200, `"daemon":"nameserver"`},
		{"/console/api/cluster", 200, `"brokers":[]`},
		{"/console/api/nothing", 404, `"REQUEST_NOT_SUPPORTED"`},
		{"/healthz", 200, "ok"},
		{"/metrics", 200, "bolide_build_info"},
		{"/elsewhere", 404, ""},
	} {
		code, body, err := get(t, c, base+tc.path, "", "")
		if err != nil || code != tc.want || !strings.Contains(body, tc.has) {
			t.Errorf("%s: %d %.200q, %v; want %d with %q", tc.path, code, body, err, tc.want, tc.has)
		}
	}
	_, body, _ := get(t, c, base+"/console/api/whoami", "", "")
	var who struct{ Addr, Name string }
	if err := json.Unmarshal([]byte(body), &who); err != nil || who.Addr == "" || who.Name != who.Addr {
		t.Fatalf("whoami %s: %v", body, err)
	}

	off := serveNameServer(t, Console{Enabled: false, Daemon: console.NameServer}, auth.Config{})
	for _, p := range []string{"/", "/console/", "/console/api/whoami"} {
		if code, _, err := get(t, c, off+p, "", ""); err != nil || code != 404 {
			t.Errorf("--console=false %s: %d, %v; want 404", p, code, err)
		}
	}
}

// With ACL on, any user of the ACL file opens the console; /metrics and
// /debug/pprof stay admin-only.
func TestAdminConsoleACL(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(aclFile, &auth.File{Accounts: []auth.Account{
		{AccessKey: "rootadmin", SecretKey: "rootsecret", Admin: true},
		{AccessKey: "appuser", SecretKey: "appsecret", DefaultTopicPerm: "SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	base := serveNameServer(t, Console{Enabled: true, Daemon: console.NameServer},
		auth.Config{Enabled: true, File: aclFile, MaxSkew: auth.DefaultMaxSkew})
	c := httpClient(nil, false)
	for _, tc := range []struct {
		path, ak, sk string
		want         int
		has          string
	}{
		{"/console/", "", "", 401, ""},
		{"/console/api/whoami", "", "", 401, `"UNAUTHENTICATED"`},
		{"/console/api/whoami", "appuser", "wrong", 401, `"UNAUTHENTICATED"`},
		{"/console/", "appuser", "appsecret", 200, "<html"},
		{"/console/api/whoami", "appuser", "appsecret", 200, `"user":"appuser"`},
		{"/metrics", "appuser", "appsecret", 403, ""},
		{"/debug/pprof/cmdline", "appuser", "appsecret", 403, ""},
		{"/metrics", "rootadmin", "rootsecret", 200, ""},
		{"/healthz", "", "", 200, ""},
	} {
		code, body, err := get(t, c, base+tc.path, tc.ak, tc.sk)
		if err != nil || code != tc.want || !strings.Contains(body, tc.has) {
			t.Errorf("%s as %q: %d %.200q, %v; want %d with %q", tc.path, tc.ak, code, body, err, tc.want, tc.has)
		}
	}
}

// With ACL off the console takes changes from a browser on another host
// only when the daemon runs with --allow-remote-admin, as the cluster does
// for the CLI.
func TestConsoleRemoteAdminFlag(t *testing.T) {
	for _, allow := range []bool{false, true} {
		sec := AdminSecurity{TLS: tlsconf.Config{Mode: tlsconf.Off}, Auth: auth.Config{AllowRemoteAdmin: allow}}
		g, err := auth.New(sec.Auth, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		// No NameServer answers at this address: an accepted change fails
		// reaching the cluster, a refused one never tries.
		c, err := newConsole(console.Options{Daemon: console.NameServer, Addr: "127.0.0.1:1",
			NameServers: []string{"127.0.0.1:1"}, Timeout: 2 * time.Second}, sec, g, nil, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/console/api/topics", strings.NewReader(`{"topic":"remote-t","queues":1}`))
		req.RemoteAddr = "203.0.113.9:40000"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Bolide-Console", "1")
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		_ = c.Close()
		refused := rec.Code == http.StatusForbidden && strings.Contains(rec.Body.String(), "allow-remote-admin")
		if refused == allow {
			t.Errorf("allow-remote-admin=%v: remote change answered %d %s", allow, rec.Code, rec.Body.String())
		}
	}
}
