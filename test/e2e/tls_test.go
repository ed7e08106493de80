//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
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
