//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

// The suite's security settings come from the test's environment (the
// clusters' own environment never sees them: cleanEnv):
//
//	BOLIDE_E2E_TLS=enforcing   every daemon --tls-mode enforcing with a
//	                           certificate this test makes (a CA and a server
//	                           certificate for 127.0.0.1 and localhost),
//	                           verified with --tls-ca; the CLI with
//	                           BOLIDE_TLS=1 BOLIDE_TLS_CA (make e2e-tls);
//	                           "permissive" and "off" work too
//	BOLIDE_E2E_ACL=1           ACL on in every daemon with one admin user;
//	                           the CLI with its keys in BOLIDE_ACCESS_KEY and
//	                           BOLIDE_SECRET_KEY (make e2e-acl)
//
// Gossip is encrypted (--gossip-key) whenever either is set.
const (
	envTLS = "BOLIDE_E2E_TLS"
	envACL = "BOLIDE_E2E_ACL"

	e2eAccessKey = "e2e-admin"
	e2eSecretKey = "e2e-admin-secret-0123456789"
)

// security is how one cluster is secured.
type security struct {
	tlsMode   string // "" for the daemons' default (permissive, self-signed)
	brokerTLS string // the brokers' mode when not tlsMode
	tlsDir    string // ca.pem, server.pem, server-key.pem
	aclFile   string // "" for ACL off
	gossipKey string
}

// suiteSecurity is the security the environment asks of the suite's
// clusters, with its files under dir.
func suiteSecurity(t *testing.T, dir string) *security {
	t.Helper()
	s := &security{tlsMode: os.Getenv(envTLS)}
	switch s.tlsMode {
	case "", "off", "permissive", "enforcing":
	default:
		t.Fatalf("%s=%q: want enforcing, permissive or off", envTLS, s.tlsMode)
	}
	if s.tlsMode != "" && s.tlsMode != "off" {
		s.tlsDir = writeCerts(t, filepath.Join(dir, "tls"))
	}
	if acl := os.Getenv(envACL); acl != "" && acl != "0" {
		s.aclFile = writeACL(t, filepath.Join(dir, "plain_acl.yml"))
	}
	if s.tlsMode != "" || s.aclFile != "" {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			t.Fatal(err)
		}
		s.gossipKey = base64.StdEncoding.EncodeToString(key)
	}
	return s
}

func (s *security) ca() string { return filepath.Join(s.tlsDir, "ca.pem") }

// scriptEnv is the environment of scripts/cluster-up.sh for s.
func (s *security) scriptEnv() []string {
	var env []string
	if s.tlsMode != "" {
		env = append(env, "TLS_MODE="+s.tlsMode)
	}
	if s.brokerTLS != "" {
		env = append(env, "BROKER_TLS_MODE="+s.brokerTLS)
	}
	if s.tlsDir != "" {
		env = append(env, "TLS_CERT="+filepath.Join(s.tlsDir, "server.pem"),
			"TLS_KEY="+filepath.Join(s.tlsDir, "server-key.pem"), "TLS_CA="+s.ca())
	}
	if s.aclFile != "" {
		env = append(env, "ACL_FILE="+s.aclFile, "ACCESS_KEY="+e2eAccessKey, "SECRET_KEY="+e2eSecretKey)
	}
	if s.gossipKey != "" {
		env = append(env, "GOSSIP_KEY="+s.gossipKey)
	}
	return env
}

// cliEnv is the environment bin/bolide needs to reach a cluster secured by
// s: TLS when it is enforced (verified with the test's CA), the admin
// user's keys when ACL is on.
func (s *security) cliEnv() []string {
	var env []string
	if s.tlsMode == "enforcing" || s.brokerTLS == "enforcing" {
		env = append(env, "BOLIDE_TLS=1", "BOLIDE_TLS_CA="+s.ca())
	}
	if s.aclFile != "" {
		env = append(env, "BOLIDE_ACCESS_KEY="+e2eAccessKey, "BOLIDE_SECRET_KEY="+e2eSecretKey)
	}
	return env
}

func (s *security) String() string {
	var parts []string
	if s.tlsMode != "" {
		parts = append(parts, "TLS "+s.tlsMode)
	}
	if s.brokerTLS != "" {
		parts = append(parts, "brokers' TLS "+s.brokerTLS)
	}
	if s.aclFile != "" {
		parts = append(parts, "ACL on")
	}
	if len(parts) == 0 {
		return "daemons' defaults"
	}
	return strings.Join(parts, ", ")
}

// writeACL writes an ACL file with one admin user, the suite's.
func writeACL(t *testing.T, path string) string {
	t.Helper()
	f := &auth.File{Accounts: []auth.Account{{AccessKey: e2eAccessKey, SecretKey: e2eSecretKey, Admin: true}}}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeCerts makes a CA and a server certificate it signs (valid for
// localhost, 127.0.0.1 and ::1) as ca.pem, server.pem and server-key.pem in
// dir, and returns dir.
func writeCerts(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, dir, "e2e")
	if err := os.Rename(ca.File, filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	pair := ca.Server(t, dir, "server", "bolide e2e")
	for from, to := range map[string]string{pair.CertFile: "server.pem", pair.KeyFile: "server-key.pem"} {
		if err := os.Rename(from, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// withTLS is s with the NameServers' TLS mode nameServers, the brokers'
// brokers, and the test's certificates.
func (s *security) withTLS(t *testing.T, dir, nameServers, brokers string) *security {
	t.Helper()
	c := *s
	c.tlsMode, c.brokerTLS = nameServers, brokers
	if c.tlsDir == "" {
		c.tlsDir = filepath.Join(dir, "tls")
		if _, err := os.Stat(c.ca()); err != nil {
			writeCerts(t, c.tlsDir)
		}
	}
	return &c
}

// plain is c's CLI without TLS: the credentials stay.
func (c *cluster) plain() *cluster {
	p := *c
	p.cliEnv = nil
	for _, kv := range c.cliEnv {
		if !strings.HasPrefix(kv, "BOLIDE_TLS") {
			p.cliEnv = append(p.cliEnv, kv)
		}
	}
	return &p
}

// plaintextRefused is what a client that speaks plain text to a port in
// enforcing mode is told (in its own protocol).
const plaintextRefused = "TLS only"

// TestTLSModes: with --tls-mode enforcing a plaintext CLI is refused with
// a clear error, by the NameServer and by a broker, at once; with TLS
// (BOLIDE_TLS=1, the server verified with BOLIDE_TLS_CA) the same commands
// work; in permissive mode both are served. ACL as the suite has it.
func TestTLSModes(t *testing.T) {
	base := e2eDir(t)
	suite := suiteSecurity(t, base)
	const topicTLS = "e2e-tls"

	// sendConsume creates topic, sends one message to it through c and
	// consumes it back.
	sendConsume := func(t *testing.T, c *cluster, topic, body string) {
		t.Helper()
		c.ok("topic", "create", topic, "--queues", "2")
		c.ok("send", "--topic", topic, body)
		got := decodeLines(t, c.ok("consume", "--topic", topic, "--group", topic+"-g", "--count", "1", "--timeout", "30s", "-o", "json").stdout)
		if len(got) != 1 || str(got[0], "body") != body {
			t.Fatalf("consumed %v, want one message %q", got, body)
		}
	}
	refused := func(t *testing.T, c *cluster, args ...string) {
		t.Helper()
		r := c.run(append(args, "--timeout", "10s")...)
		checkFails(t, r, 1, plaintextRefused)
		if r.took > 8*time.Second {
			t.Errorf("a plaintext %v took %v to be refused", args, r.took)
		}
	}

	t.Run("enforcing", func(t *testing.T) {
		c := startClusterWith(t, base, "cluster-enforcing", 1, suite.withTLS(t, base, "enforcing", ""))
		sendConsume(t, c, topicTLS, "over TLS")
		p := c.plain()
		// The NameServer refuses, whatever the command.
		refused(t, p, "cluster", "list")
		refused(t, p, "topic", "list")
		refused(t, p, "send", "--topic", topicTLS, "in clear")
		refused(t, p, "consume", "--topic", topicTLS, "--group", "g-plain")
		// Nothing the refused send carried was stored: the TLS consumer
		// of a new group gets one message, the first.
		got := decodeLines(t, c.ok("consume", "--topic", topicTLS, "--group", "g-after", "--timeout", "3s", "-o", "json").stdout)
		if len(got) != 1 || str(got[0], "body") != "over TLS" {
			t.Errorf("after the refused send the topic holds %v", got)
		}
	})

	t.Run("brokers-enforcing", func(t *testing.T) {
		// A NameServer in permissive mode gives the plaintext CLI its
		// routes; the brokers, enforcing, refuse it.
		c := startClusterWith(t, base, "cluster-brokers-enforcing", 1, suite.withTLS(t, base, "permissive", "enforcing"))
		c.ok("topic", "create", topicTLS, "--queues", "2")
		p := c.plain()
		if r := p.ok("topic", "route", topicTLS); !strings.Contains(r.stdout, "broker-a") {
			t.Fatalf("a plaintext topic route from a permissive NameServer: %v", r)
		}
		refused(t, p, "send", "--topic", topicTLS, "in clear")
		refused(t, p, "consume", "--topic", topicTLS, "--group", "g-plain")
		c.ok("send", "--topic", topicTLS, "over TLS")
		if st := c.okJSON("topic", "status", topicTLS); sumMessages(t, st) != 1 {
			t.Errorf("topic status after one send over TLS and a refused plaintext one: %v", st)
		}
	})

	t.Run("permissive", func(t *testing.T) {
		sec := suite.withTLS(t, base, "permissive", "")
		c := startClusterWith(t, base, "cluster-permissive", 1, sec)
		// The TLS CLI (BOLIDE_TLS=1) against permissive daemons, and the
		// plaintext one.
		tlsCLI := *c
		tlsCLI.cliEnv = append(c.plain().cliEnv, "BOLIDE_TLS=1", "BOLIDE_TLS_CA="+sec.ca())
		sendConsume(t, &tlsCLI, topicTLS, "over TLS")
		sendConsume(t, c.plain(), topicTLS+"-plain", "in clear")
	})
}

// sumMessages adds up the messages of topic status's lines.
func sumMessages(t *testing.T, lines []map[string]any) int64 {
	t.Helper()
	var n int64
	for _, l := range lines {
		n += num(t, l, "messages")
	}
	return n
}
