package tlsconf

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

// echo serves lis with a line echo until the test ends: each connection
// reads one line and writes it back prefixed with "tls " or "plain ".
func echo(t *testing.T, lis net.Listener) string {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				kind := "plain "
				if _, ok := c.(*tls.Conn); ok {
					kind = "tls "
				}
				_, _ = io.WriteString(c, kind+line)
			}()
		}
	}()
	t.Cleanup(func() { _ = lis.Close(); wg.Wait() })
	return lis.Addr().String()
}

// talk sends "hi\n" over c and returns the answer, or the error.
func talk(c net.Conn) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "hi\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func plain(t *testing.T, addr string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return talk(c)
}

func overTLS(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	return talk(c)
}

func listen(t *testing.T, c Config, src *Source) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return echo(t, Listen(lis, c, src, nil))
}

func TestListenModes(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "server", "bolide.test")
	src, err := Open(Config{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	verified, err := ClientConfig(Config{CAFile: ca.File}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode           Mode
		plainOK, tlsOK bool
	}{
		{Off, true, false},
		{Permissive, true, true},
		{Enforcing, false, true},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			addr := listen(t, Config{Mode: tc.mode}, src)
			before := Refused(RefusedPlaintext)
			got, err := plain(t, addr)
			if tc.plainOK && (err != nil || got != "plain hi\n") {
				t.Fatalf("plain text: got %q, %v; want served", got, err)
			}
			if !tc.plainOK {
				if err == nil {
					t.Fatalf("plain text served in %s mode: %q", tc.mode, got)
				}
				if n := Refused(RefusedPlaintext) - before; n != 1 {
					t.Fatalf("plain-text refusals counted %d, want 1", n)
				}
			}
			got, err = overTLS(t, addr, verified)
			if tc.tlsOK && (err != nil || got != "tls hi\n") {
				t.Fatalf("TLS: got %q, %v; want served", got, err)
			}
			if !tc.tlsOK && err == nil {
				t.Fatalf("TLS served in %s mode: %q", tc.mode, got)
			}
		})
	}
}

func TestListenClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "clients")
	other := tlstest.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "server", "bolide.test")
	good := ca.Client(t, dir, "good", "app")
	stranger := other.Client(t, dir, "stranger", "intruder")
	base := &tls.Config{RootCAs: ca.Pool, ServerName: "bolide.test"}
	with := func(p *tlstest.Pair) *tls.Config {
		c := base.Clone()
		if p != nil {
			// Presented whatever CAs the server names (a Go client
			// with Certificates sends none the server would not take).
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &p.Cert, nil }
		}
		return c
	}
	for _, tc := range []struct {
		auth                     ClientAuth
		none, valid, unknownCert bool // served?
	}{
		{ClientCertNone, true, true, true},
		{ClientCertOptional, true, true, false},
		{ClientCertRequire, false, true, false},
	} {
		t.Run(tc.auth.String(), func(t *testing.T) {
			cfg := Config{Mode: Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientAuth: tc.auth}
			if tc.auth != ClientCertNone {
				cfg.ClientCAFile = ca.File
			}
			src, err := Open(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := listen(t, cfg, src)
			for _, c := range []struct {
				name string
				tls  *tls.Config
				want bool
			}{
				{"no certificate", with(nil), tc.none},
				{"certificate of the CA", with(&good), tc.valid},
				{"certificate of another CA", with(&stranger), tc.unknownCert},
			} {
				got, err := overTLS(t, addr, c.tls)
				if c.want && (err != nil || got != "tls hi\n") {
					t.Errorf("%s: got %q, %v; want served", c.name, got, err)
				}
				if !c.want && err == nil {
					t.Errorf("%s: served %q; want refused", c.name, got)
				}
			}
		})
	}
}

func TestRequireWithoutClientCAIsRefused(t *testing.T) {
	if _, err := Open(Config{ClientAuth: ClientCertRequire}, nil); err == nil {
		t.Fatal("client certificates required without a CA: accepted")
	}
}

// A renewed client CA bundle applies to new connections.
func TestClientCAReload(t *testing.T) {
	dir := t.TempDir()
	first := tlstest.NewCA(t, dir, "first")
	second := tlstest.NewCA(t, dir, "second")
	srv := first.Server(t, dir, "server", "bolide.test")
	byFirst := first.Client(t, dir, "c1", "app1")
	bySecond := second.Client(t, dir, "c2", "app2")
	bundle := dir + "/clients.pem"
	copyFile(t, first.File, bundle)
	cfg := Config{Mode: Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: bundle, ClientAuth: ClientCertRequire}
	src, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.clients.interval = 0
	addr := listen(t, cfg, src)
	dial := func(p tlstest.Pair) error {
		_, err := overTLS(t, addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{p.Cert}})
		return err
	}
	if err := dial(byFirst); err != nil {
		t.Fatalf("client of the configured CA refused: %v", err)
	}
	if err := dial(bySecond); err == nil {
		t.Fatal("client of an unconfigured CA served")
	}
	copyFile(t, second.File, bundle)
	if err := dial(bySecond); err != nil {
		t.Fatalf("after the bundle changed, client of the new CA refused: %v", err)
	}
	if err := dial(byFirst); err == nil {
		t.Fatal("after the bundle changed, client of the removed CA served")
	}
	tlstest.Replace(t, bundle, []byte("garbage"))
	if err := dial(bySecond); err != nil {
		t.Fatalf("a broken bundle dropped the loaded one: %v", err)
	}
}

// A renewed server certificate is presented to new connections of a
// listener from Listen.
func TestListenRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	ca.Server(t, dir, "server", "first.test")
	src, err := Open(Config{CertFile: dir + "/server.crt", KeyFile: dir + "/server.key"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.interval = 0
	addr := listen(t, Config{Mode: Enforcing}, src)
	name := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := name(); got != "first.test" {
		t.Fatalf("presented %q, want first.test", got)
	}
	ca.Server(t, dir, "server", "second.test")
	if got := name(); got != "second.test" {
		t.Fatalf("after renewal presented %q, want second.test", got)
	}
}

func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	other := tlstest.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "server", "bolide.test")
	daemon := ca.Client(t, dir, "daemon", "broker-a")
	// The dialled server requires a client certificate of ca.
	scfg := Config{Mode: Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File, ClientAuth: ClientCertRequire}
	ssrc, err := Open(scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, scfg, ssrc)
	own, err := New(daemon.CertFile, daemon.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Verified with the CA, presenting the daemon's own certificate.
	cc, err := ClientConfig(Config{CAFile: ca.File, ServerName: "bolide.test"}, own)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := overTLS(t, addr, cc); err != nil || got != "tls hi\n" {
		t.Fatalf("verified dial with a client certificate: %q, %v", got, err)
	}
	// Without its certificate the server refuses.
	cc, _ = ClientConfig(Config{CAFile: ca.File, ServerName: "bolide.test"}, nil)
	if _, err := overTLS(t, addr, cc); err == nil {
		t.Fatal("served without a client certificate")
	}
	// Another CA does not verify the server.
	cc, _ = ClientConfig(Config{CAFile: other.File}, own)
	if _, err := overTLS(t, addr, cc); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("server verified by an unrelated CA: %v", err)
	}
	// A wrong name does not verify.
	cc, _ = ClientConfig(Config{CAFile: ca.File, ServerName: "elsewhere.test"}, own)
	if _, err := overTLS(t, addr, cc); err == nil {
		t.Fatal("server verified under another name")
	}
	// No CA: not verified, served.
	cc, _ = ClientConfig(Config{}, own)
	if !cc.InsecureSkipVerify {
		t.Fatal("no CA file: want InsecureSkipVerify")
	}
	if got, err := overTLS(t, addr, cc); err != nil || got != "tls hi\n" {
		t.Fatalf("unverified dial: %q, %v", got, err)
	}
	if _, err := ClientConfig(Config{CAFile: dir + "/missing.pem"}, nil); err == nil {
		t.Fatal("a missing CA file accepted")
	}
}

// A client that connects and says nothing holds up no one else.
func TestListenSilentClientDoesNotBlock(t *testing.T) {
	src, err := Open(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, Config{Mode: Permissive}, src)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if got, err := plain(t, addr); err != nil || got != "plain hi\n" {
		t.Fatalf("plain text behind a silent client: %q, %v", got, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tlstest.Replace(t, to, b)
}
