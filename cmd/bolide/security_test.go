package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	"github.com/bolide-mq/bolide/nameserver"
)

// The users of the secure clusters' ACL files.
const (
	adminKey    = "admin-key"
	adminSecret = "admin-secret"
)

// secureCluster is one NameServer and one broker (broker-a) with access
// control and TLS as asked: both daemons run with the same settings, each
// with its own ACL file, and the broker signs its registration with the
// admin keys and dials the NameServer over TLS when it serves TLS.
type secureCluster struct {
	ns, broker string // addresses
	ca         *tlstest.CA
	aclFiles   []string
}

type secureOptions struct {
	acl bool
	tls tlsconf.Mode // with tls != Off the daemons serve a certificate ca signed
	// nsPermissive: the NameServer serves TLS and plain text, whatever tls
	// says for the broker.
	nsPermissive bool
	// brokerClientCert: the broker requires a client certificate ca signed.
	brokerClientCert bool
}

func startSecureCluster(t *testing.T, o secureOptions) *secureCluster {
	t.Helper()
	dir := t.TempDir()
	c := &secureCluster{ca: tlstest.NewCA(t, dir, "cli")}
	pair := c.ca.Server(t, dir, "daemon", "localhost")
	tc := tlsconf.Config{Mode: o.tls}
	if o.tls != tlsconf.Off {
		tc.CertFile, tc.KeyFile = pair.CertFile, pair.KeyFile
		tc.Dial, tc.CAFile = true, c.ca.File
	}
	ac := func(name string) auth.Config {
		file := filepath.Join(dir, name+"-acl.yml")
		if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{{AccessKey: adminKey, SecretKey: adminSecret, Admin: true}}}); err != nil {
			t.Fatal(err)
		}
		c.aclFiles = append(c.aclFiles, file)
		return auth.Config{Enabled: o.acl, File: file, MaxSkew: auth.DefaultMaxSkew}
	}
	creds := auth.Credentials{AccessKey: adminKey, SecretKey: adminSecret}

	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.ScanInterval = 500 * time.Millisecond
	no.TLS = tc
	if o.nsPermissive {
		no.TLS.Mode = tlsconf.Permissive
	}
	no.TLSCertFile, no.TLSKeyFile = tc.CertFile, tc.KeyFile
	no.TLS.CertFile, no.TLS.KeyFile = "", ""
	no.Auth = ac("ns")
	no.Credentials = creds
	ns, err := nameserver.New(no, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	c.ns = ns.Addr()

	bo := broker.DefaultOptions(filepath.Join(dir, "broker-a"))
	bo.BrokerName = "broker-a"
	bo.ListenAddr = "127.0.0.1:0"
	bo.NameServers = []string{c.ns}
	bo.RegisterInterval = 500 * time.Millisecond
	bo.Store.CommitLog.SegmentSize = 64 << 20
	bo.Store.ConsumeQueue.UnitsPerFile = 100_000
	bo.Store.Index.SlotCount = 100_000
	bo.Store.Index.MaxEntries = 400_000
	bo.Replication.HAListenAddr = "127.0.0.1:0"
	bo.GossipAddr = "off"
	bo.TLS = tc
	if o.brokerClientCert {
		bo.TLS.ClientCAFile, bo.TLS.ClientAuth = c.ca.File, tlsconf.ClientCertRequire
	}
	bo.Auth = ac("broker")
	bo.Credentials = creds
	b, err := server.New(bo, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c.broker = b.Addr()

	// Registered: the CLI lists the broker (as admin, over TLS as needed).
	testutil.WaitFor(t, 20*time.Second, "broker-a registered", func() error {
		code, out, errb := runCLI(t, "", c.args("cluster", "list", "-o", "json", "--access-key", adminKey, "--secret-key", adminSecret, "--tls-ca", c.ca.File)...)
		if o.tls == tlsconf.Off || o.nsPermissive {
			code, out, errb = runCLI(t, "", c.args("cluster", "list", "-o", "json", "--access-key", adminKey, "--secret-key", adminSecret)...)
		}
		if code != 0 || !strings.Contains(out, "broker-a") {
			return fmt.Errorf("exit %d: %s%s", code, out, errb)
		}
		return nil
	})
	return c
}

// args appends --namesrv to a command line.
func (c *secureCluster) args(args ...string) []string {
	return append(args, "--namesrv", c.ns)
}

// TestTLSFlags: with the daemons enforcing TLS the CLI works with --tls
// --tls-ca (and through BOLIDE_TLS and BOLIDE_TLS_CA), and with --tls
// alone (not verified); plain text is refused with an error that says
// TLS, and a certificate from another CA is refused.
func TestTLSFlags(t *testing.T) {
	c := startSecureCluster(t, secureOptions{tls: tlsconf.Enforcing})
	tlsArgs := []string{"--tls", "--tls-ca", c.ca.File}
	ok := func(args ...string) string {
		t.Helper()
		code, out, errb := runCLI(t, "", c.args(args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errb)
		}
		return out
	}
	ok(append([]string{"topic", "create", "tls-orders", "--queues", "2"}, tlsArgs...)...)
	ok(append([]string{"send", "--topic", "tls-orders", "hello over TLS"}, tlsArgs...)...)
	ok(append([]string{"bench", "produce", "--topic", "tls-orders", "--count", "5", "--transport", "grpc"}, tlsArgs...)...)
	// --tls alone encrypts without verifying.
	ok("bench", "produce", "--topic", "tls-orders", "--count", "5", "--transport", "frame", "--tls")
	out := ok(append([]string{"consume", "--topic", "tls-orders", "--group", "tls-g", "--from", "first", "--count", "11", "-o", "json"}, tlsArgs...)...)
	if n := strings.Count(out, "\n"); n != 11 || !strings.Contains(out, "hello over TLS") {
		t.Fatalf("consumed over TLS %d messages: %s", n, out)
	}
	ok("topic", "list", "--tls")

	// The environment, as scripts use it.
	t.Setenv(envTLS, "1")
	t.Setenv(envTLSCA, c.ca.File)
	ok("send", "--topic", "tls-orders", "from the environment")
	t.Setenv(envTLS, "")
	t.Setenv(envTLSCA, "")

	// Plain text: refused, and the error says why.
	for _, args := range [][]string{
		{"topic", "list"},
		{"send", "--topic", "tls-orders", "plain"},
	} {
		code, out, errb := runCLI(t, "", c.args(args...)...)
		checkOneLineError(t, args, code, out, errb, exitFailed, "the cluster accepts TLS only (--tls-mode enforcing): give --tls")
	}
	// A server certificate from another CA.
	other := tlstest.NewCA(t, t.TempDir(), "other")
	args := c.args("topic", "list", "--tls-ca", other.File, "--timeout", "3s")
	code, out, errb := runCLI(t, "", args...)
	checkOneLineError(t, args, code, out, errb, exitFailed, "failed to verify certificate: x509: certificate signed by unknown authority")
}

// TestTLSClientCertificate: a broker that requires client certificates
// refuses the CLI without one and serves it with --tls-cert and --tls-key
// (or BOLIDE_TLS_CERT and BOLIDE_TLS_KEY) of a certificate its CA signed.
func TestTLSClientCertificate(t *testing.T) {
	c := startSecureCluster(t, secureOptions{tls: tlsconf.Enforcing, brokerClientCert: true})
	client := c.ca.Client(t, t.TempDir(), "cli-client", "operator")
	base := []string{"--tls-ca", c.ca.File}
	// Refused. Under TLS 1.3 the client learns it either from the
	// handshake ("certificate required", which the CLI explains) or as a
	// broken connection on its first write: only the refusal is certain.
	args := c.args(append([]string{"topic", "create", "cert-orders", "--timeout", "3s"}, base...)...)
	if code, out, errb := runCLI(t, "", args...); code == 0 {
		t.Fatalf("no client certificate: served: %s", out)
	} else if strings.Contains(errb, "certificate required") && !strings.Contains(errb, "--tls-cert") {
		t.Fatalf("no client certificate: the error does not say to give --tls-cert: %s", errb)
	}
	withCert := append(base, "--tls-cert", client.CertFile, "--tls-key", client.KeyFile)
	for _, a := range [][]string{
		{"topic", "create", "cert-orders", "--queues", "1"}, // not created by the refused attempt
		{"send", "--topic", "cert-orders", "with a client certificate"},
	} {
		if code, _, errb := runCLI(t, "", c.args(append(a, withCert...)...)...); code != 0 {
			t.Fatalf("%q with a client certificate: exit %d: %s", a, code, errb)
		}
	}
	t.Setenv(envTLSCert, client.CertFile)
	t.Setenv(envTLSKey, client.KeyFile)
	if code, _, errb := runCLI(t, "", c.args(append([]string{"send", "--topic", "cert-orders", "from the environment"}, base...)...)...); code != 0 {
		t.Fatalf("client certificate from the environment: exit %d: %s", code, errb)
	}
	t.Setenv(envTLSKey, "")
	args = c.args(append([]string{"topic", "list"}, base...)...)
	code, out, errb := runCLI(t, "", args...)
	checkOneLineError(t, args, code, out, errb, exitUsage, "--tls-cert and --tls-key")
}

// TestPlainTextToEnforcingBrokers: the NameServer serves plain text, the
// broker TLS only. A plain-text consume fails at once with the TLS
// refusal (it is not an empty consume), as send does; with --tls it
// consumes.
func TestPlainTextToEnforcingBrokers(t *testing.T) {
	c := startSecureCluster(t, secureOptions{tls: tlsconf.Enforcing, nsPermissive: true})
	tlsArgs := []string{"--tls-ca", c.ca.File}
	code, _, errb := runCLI(t, "", c.args(append([]string{"topic", "create", "mixed", "--queues", "2"}, tlsArgs...)...)...)
	if code != 0 {
		t.Fatalf("topic create over TLS: %s", errb)
	}
	code, _, errb = runCLI(t, "", c.args(append([]string{"send", "--topic", "mixed", "over TLS"}, tlsArgs...)...)...)
	if code != 0 {
		t.Fatalf("send over TLS: %s", errb)
	}
	for _, args := range [][]string{
		{"send", "--topic", "mixed", "plain"},
		{"consume", "--topic", "mixed", "--group", "plain-g", "--from", "first", "--timeout", "20s"},
	} {
		start := time.Now()
		code, out, errb := runCLI(t, "", c.args(args...)...)
		checkOneLineError(t, args, code, out, errb, exitFailed, "accepts TLS only")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%q failed after %v, want at once", args, d)
		}
	}
	code, out, errb := runCLI(t, "", c.args(append([]string{"consume", "--topic", "mixed", "--group", "tls-g", "--from", "first", "--count", "1"}, tlsArgs...)...)...)
	if code != 0 || !strings.Contains(out, "over TLS") {
		t.Fatalf("consume over TLS: exit %d, %s %s", code, out, errb)
	}
}

// TestSecurityFlagErrors: bad security flags are usage errors.
func TestSecurityFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"topic", "list", "--access-key", "only-a-key"}, nil, "--access-key and --secret-key"},
		{[]string{"topic", "list"}, map[string]string{envSecretKey: "only-a-secret"}, "give both or neither"},
		{[]string{"topic", "list"}, map[string]string{envTLS: "perhaps"}, `must be true or false, not "perhaps"`},
		{[]string{"topic", "list", "--tls-ca", "/nonexistent/ca.pem"}, nil, "--tls-ca"},
		{[]string{"acl", "init", "--file", filepath.Join(t.TempDir(), "acl.yml"), "--access-key", "short", "--secret-key", "long-enough"}, nil, "shorter than 6"},
		{[]string{"acl", "user", "put", "someone"}, nil, "needs the user's --secret-key"},
		{[]string{"acl", "user", "put", "someone", "--secret-key", "secret-1", "--topic-perm", "orders=WRITE"}, nil, "orders=WRITE"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, out, errb := runCLI(t, "", c.args...)
			checkOneLineError(t, c.args, code, out, errb, exitUsage, c.want)
		})
	}
}

// TestACLInit: acl init writes a file the daemons load, holding one admin
// user, and never overwrites one.
func TestACLInit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	args := []string{"acl", "init", "--file", file, "--access-key", "first-admin", "--secret-key", "first-secret", "-o", "json"}
	code, out, errb := runCLI(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil || j["accessKey"] != "first-admin" || j["admin"] != true {
		t.Fatalf("output %q: %v", out, err)
	}
	g, err := auth.New(auth.Config{Enabled: true, File: file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	authz, date := auth.NewHeader(auth.Credentials{AccessKey: "first-admin", SecretKey: "first-secret"}, time.Now())
	p, err := g.Header("127.0.0.1:1", authz, date)
	if err != nil || !p.Admin {
		t.Fatalf("the written admin: %+v, %v", p, err)
	}
	code, out, errb = runCLI(t, "", "acl", "init", "--file", file, "--access-key", "second-admin", "--secret-key", "second-secret")
	checkOneLineError(t, args, code, out, errb, exitFailed, "already exists")
	f, err := auth.ReadFile(file)
	if err != nil || len(f.Accounts) != 1 || f.Accounts[0].AccessKey != "first-admin" {
		t.Fatalf("after a refused init the file holds %+v, %v", f, err)
	}
}

// TestACLCommands: against daemons with ACL on, commands with the right
// keys work and without them fail with exit 1 and a message naming the
// refusal; acl user put makes a user that can send at once (from flags
// and from the environment), acl user list shows it on every daemon
// without its secret, acl user delete removes it everywhere.
func TestACLCommands(t *testing.T) {
	c := startSecureCluster(t, secureOptions{acl: true, tls: tlsconf.Off})
	admin := []string{"--access-key", adminKey, "--secret-key", adminSecret}
	app := []string{"--access-key", "app-key-1", "--secret-key", "app-secret-1"}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, "", c.args(args...)...)
	}
	ok := func(args ...string) string {
		t.Helper()
		code, out, errb := run(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errb)
		}
		return out
	}
	refused := func(want string, args ...string) {
		t.Helper()
		code, out, errb := run(args...)
		checkOneLineError(t, args, code, out, errb, exitFailed, want)
	}

	// Without keys: refused, and told how to give them.
	refused("UNAUTHENTICATED: no credentials", "topic", "create", "acl-orders")
	refused("give --access-key and --secret-key, or set BOLIDE_ACCESS_KEY and BOLIDE_SECRET_KEY", "topic", "list")
	ok(append([]string{"topic", "create", "acl-orders", "--queues", "2"}, admin...)...)
	ok(append([]string{"topic", "create", "acl-other", "--queues", "1"}, admin...)...)
	refused("UNAUTHENTICATED", "send", "--topic", "acl-orders", "no keys")
	refused("UNAUTHENTICATED: signature check failed for access key admin-key",
		"send", "--topic", "acl-orders", "x", "--access-key", adminKey, "--secret-key", "wrong-secret")

	// An admin in the environment puts a user on every daemon.
	t.Setenv(envAccessKey, adminKey)
	t.Setenv(envSecretKey, adminSecret)
	out := ok("acl", "user", "put", "app-key-1", "--secret-key", "app-secret-1",
		"--topic-perm", "acl-orders=PUB|SUB", "--group-perm", "app-group=SUB", "-o", "json")
	if n := strings.Count(out, `"ok":true`); n != 2 || !strings.Contains(out, `"kind":"nameserver"`) || !strings.Contains(out, `"kind":"broker"`) {
		t.Fatalf("put on %d daemons, want the NameServer and the broker: %s", n, out)
	}
	out = ok("acl", "user", "list", "-o", "json")
	var rows []aclUserJSON
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var j aclUserJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if j.AccessKey == "app-key-1" {
			rows = append(rows, j)
		}
	}
	if len(rows) != 2 || rows[0].Kind != "nameserver" || rows[1].Kind != "broker" || !rows[1].ACL ||
		len(rows[1].TopicPerms) != 1 || rows[1].TopicPerms[0] != "acl-orders=PUB|SUB" {
		t.Fatalf("acl user list: %+v", rows)
	}
	if strings.Contains(out, "app-secret-1") || strings.Contains(out, adminSecret) {
		t.Fatalf("acl user list printed a secret: %s", out)
	}
	table := ok("acl", "user", "list")
	if !strings.Contains(table, "ACCESS KEY") || strings.Count(table, "app-key-1") != 2 {
		t.Fatalf("acl user list table:\n%s", table)
	}
	t.Setenv(envAccessKey, "")
	t.Setenv(envSecretKey, "")

	// The new user sends (frames and gRPC), consumes as its group, and
	// nothing else.
	ok(append([]string{"send", "--topic", "acl-orders", "from app-key-1"}, app...)...)
	ok(append([]string{"bench", "produce", "--topic", "acl-orders", "--count", "10", "--transport", "grpc"}, app...)...)
	out = ok(append([]string{"consume", "--topic", "acl-orders", "--group", "app-group", "--from", "first", "--count", "11", "-o", "json"}, app...)...)
	if !strings.Contains(out, "from app-key-1") {
		t.Fatalf("consumed: %s", out)
	}
	refused("NO_PERMISSION: access key app-key-1 may not", append([]string{"send", "--topic", "acl-other", "x"}, app...)...)
	refused("NO_PERMISSION: access key app-key-1 is not an admin", append([]string{"topic", "create", "acl-mine"}, app...)...)
	// A consume refused fails at once, it is not an empty consume.
	refused("NO_PERMISSION: access key app-key-1 may not", append([]string{"consume", "--topic", "acl-orders", "--group", "not-my-group", "--timeout", "20s"}, app...)...)
	refused("UNAUTHENTICATED", "consume", "--topic", "acl-orders", "--group", "app-group", "--timeout", "20s")
	refused("NO_PERMISSION", append([]string{"acl", "user", "list"}, app...)...)

	// Deleted everywhere: the user is unknown at once.
	out = ok(append([]string{"acl", "user", "delete", "app-key-1"}, admin...)...)
	if strings.Count(out, "deleted") != 2 {
		t.Fatalf("delete:\n%s", out)
	}
	refused("UNAUTHENTICATED: unknown access key app-key-1", append([]string{"send", "--topic", "acl-orders", "x"}, app...)...)
	// Deleting it again fails on every daemon, and says so.
	refused("delete of user app-key-1 failed on every daemon: 127.0.0.1:", append([]string{"acl", "user", "delete", "app-key-1"}, admin...)...)
}
