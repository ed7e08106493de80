//go:build e2e

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

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
		// Certificates of its own: this test renews them.
		own := *suite
		own.tlsDir = ""
		sec := own.withTLS(t, filepath.Join(base, "enforcing"), "enforcing", "")
		// A second CA, which signs the certificate renewed below: the
		// daemons trust both (they dial each other), the CLI one at a time.
		renewDir := filepath.Join(base, "enforcing", "tls-renewed")
		if err := os.MkdirAll(renewDir, 0o755); err != nil {
			t.Fatal(err)
		}
		ca2 := tlstest.NewCA(t, renewDir, "renewed")
		sec.daemonCA = filepath.Join(renewDir, "both-ca.pem")
		writeBundle(t, sec.daemonCA, sec.ca(), ca2.File)
		c := startClusterWith(t, base, "cluster-enforcing", 1, sec)
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

		// The certificate renewed on disk (signed by the second CA) is
		// what new connections get, without a restart: a CLI that trusts
		// only the second CA gets in, one that trusts only the first no
		// longer does.
		renewed := ca2.Server(t, renewDir, "server", "bolide e2e renewed")
		tlstest.Replace(t, filepath.Join(sec.tlsDir, "server-key.pem"), readFile(t, renewed.KeyFile))
		tlstest.Replace(t, filepath.Join(sec.tlsDir, "server.pem"), readFile(t, renewed.CertFile))
		trusting2 := *c
		trusting2.cliEnv = append(c.plain().cliEnv, "BOLIDE_TLS=1", "BOLIDE_TLS_CA="+ca2.File)
		testutil.WaitFor(t, 30*time.Second, "the NameServer and brokers to present the renewed certificate", func() error {
			if r := trusting2.run("topic", "status", topicTLS, "-o", "json"); r.code != 0 {
				return errors.New(r.String())
			}
			return nil
		})
		trusting2.ok("send", "--topic", topicTLS, "after the renewal")
		checkFails(t, c.run("topic", "status", topicTLS), 1, "certificate")
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

// writeBundle writes the PEM files from, one after the other, to path.
func writeBundle(t *testing.T, path string, from ...string) {
	t.Helper()
	var all []byte
	for _, f := range from {
		all = append(all, readFile(t, f)...)
	}
	if err := os.WriteFile(path, all, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
