package daemon

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

func startTestAdmin(t *testing.T, sec AdminSecurity) *Admin {
	t.Helper()
	a, err := StartAdmin("127.0.0.1:0", false, "", nil, nil, sec, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	return a
}

// get fetches url with client and optional Basic credentials; the status
// code, or the error.
func get(t *testing.T, client *http.Client, url, ak, sk string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ak != "" {
		req.SetBasicAuth(ak, sk)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func httpClient(cfg *tls.Config, h2 bool) *http.Client {
	if cfg != nil {
		cfg = cfg.Clone() // the transport adds "h2" to its configuration
	}
	return &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2, DisableKeepAlives: true}}
}

// The admin listener applies the TLS mode: off serves plain HTTP only,
// permissive both, enforcing HTTPS only (HTTP/1.1 and HTTP/2).
func TestAdminTLSModes(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "admin", "admin.test")
	verified := &tls.Config{RootCAs: ca.Pool, ServerName: "admin.test"}
	for _, mode := range []tlsconf.Mode{tlsconf.Off, tlsconf.Permissive, tlsconf.Enforcing} {
		t.Run(mode.String(), func(t *testing.T) {
			a := startTestAdmin(t, AdminSecurity{TLS: tlsconf.Config{Mode: mode, CertFile: srv.CertFile, KeyFile: srv.KeyFile}})
			code, body, err := get(t, httpClient(nil, false), "http://"+a.Addr()+"/metrics", "", "")
			if plainOK := mode != tlsconf.Enforcing; plainOK != (err == nil && code == 200) {
				t.Errorf("plain HTTP: %d, %v; want served=%v", code, err, plainOK)
			}
			// Enforcing: plain HTTP is told to use HTTPS.
			if mode == tlsconf.Enforcing && (err != nil || code != http.StatusBadRequest || !strings.Contains(body, "TLS")) {
				t.Errorf("plain HTTP to an enforcing admin port: %d %q, %v; want 400 naming TLS", code, body, err)
			}
			for _, h2 := range []bool{false, true} {
				code, body, err := get(t, httpClient(verified, h2), "https://"+a.Addr()+"/metrics", "", "")
				if tlsOK := mode != tlsconf.Off; tlsOK != (err == nil && code == 200) {
					t.Errorf("HTTPS (h2 %v): %d, %v; want served=%v", h2, code, err, tlsOK)
				}
				if err == nil && code == 200 && len(body) == 0 {
					t.Errorf("HTTPS (h2 %v): empty metrics", h2)
				}
			}
		})
	}
}

// Client certificates apply to the admin listener too.
func TestAdminClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "admin", "admin.test")
	ops := ca.Client(t, dir, "ops", "ops")
	a := startTestAdmin(t, AdminSecurity{TLS: tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile,
		ClientCAFile: ca.File, ClientAuth: tlsconf.ClientCertRequire}})
	if _, _, err := get(t, httpClient(&tls.Config{RootCAs: ca.Pool, ServerName: "admin.test"}, false), "https://"+a.Addr()+"/healthz", "", ""); err == nil {
		t.Fatal("served without a client certificate")
	}
	withCert := &tls.Config{RootCAs: ca.Pool, ServerName: "admin.test", Certificates: []tls.Certificate{ops.Cert}}
	if code, _, err := get(t, httpClient(withCert, false), "https://"+a.Addr()+"/healthz", "", ""); err != nil || code != 200 {
		t.Fatalf("with a client certificate: %d, %v", code, err)
	}
}

// With ACL on every path but /healthz and /readyz needs an admin user's
// Basic credentials: 401 without or with a wrong secret, 403 for a user
// who is not an admin.
func TestAdminBasicAuth(t *testing.T) {
	dir := t.TempDir()
	aclFile := filepath.Join(dir, "plain_acl.yml")
	if err := auth.WriteFile(aclFile, &auth.File{Accounts: []auth.Account{
		{AccessKey: "rootadmin", SecretKey: "rootsecret", Admin: true},
		{AccessKey: "appuser", SecretKey: "appsecret", DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "admin", "admin.test")
	a := startTestAdmin(t, AdminSecurity{
		TLS:  tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile},
		Auth: auth.Config{Enabled: true, File: aclFile, MaxSkew: auth.DefaultMaxSkew},
	})
	c := httpClient(&tls.Config{RootCAs: ca.Pool, ServerName: "admin.test"}, false)
	base := "https://" + a.Addr()
	for _, tc := range []struct {
		path, ak, sk string
		want         int
	}{
		{"/healthz", "", "", 200},
		{"/readyz", "", "", 200},
		{"/metrics", "", "", 401},
		{"/debug/pprof/", "", "", 401},
		{"/metrics", "rootadmin", "wrongsecret", 401},
		{"/metrics", "nobody", "rootsecret", 401},
		{"/metrics", "appuser", "appsecret", 403},
		{"/debug/pprof/cmdline", "appuser", "appsecret", 403},
		{"/metrics", "rootadmin", "rootsecret", 200},
		{"/debug/pprof/cmdline", "rootadmin", "rootsecret", 200},
	} {
		code, body, err := get(t, c, base+tc.path, tc.ak, tc.sk)
		if err != nil || code != tc.want {
			t.Errorf("%s as %q: %d %q, %v; want %d", tc.path, tc.ak, code, body, err, tc.want)
		}
	}
	// Without ACL the same listener asks for nothing.
	open := startTestAdmin(t, AdminSecurity{TLS: tlsconf.Config{Mode: tlsconf.Off}})
	if code, _, err := get(t, httpClient(nil, false), "http://"+open.Addr()+"/metrics", "", ""); err != nil || code != 200 {
		t.Fatalf("ACL off: %d, %v", code, err)
	}
}
