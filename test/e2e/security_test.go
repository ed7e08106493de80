//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	daemonCA  string // the daemons' --tls-ca when not ca() (a bundle)
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
		ca := s.ca()
		if s.daemonCA != "" {
			ca = s.daemonCA
		}
		env = append(env, "TLS_CERT="+filepath.Join(s.tlsDir, "server.pem"),
			"TLS_KEY="+filepath.Join(s.tlsDir, "server-key.pem"), "TLS_CA="+ca)
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
