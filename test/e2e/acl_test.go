//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// withACL is s with ACL on (the suite's admin user), its file under dir.
func (s *security) withACL(t *testing.T, dir string) *security {
	t.Helper()
	c := *s
	if c.aclFile == "" {
		c.aclFile = writeACL(t, filepath.Join(dir, "plain_acl.yml"))
	}
	return &c
}

// as is c's CLI signing with ak and sk ("" for no credentials); TLS stays.
func (c *cluster) as(ak, sk string) *cluster {
	u := *c
	u.cliEnv = nil
	for _, kv := range c.cliEnv {
		if !strings.HasPrefix(kv, "BOLIDE_ACCESS_KEY=") && !strings.HasPrefix(kv, "BOLIDE_SECRET_KEY=") {
			u.cliEnv = append(u.cliEnv, kv)
		}
	}
	if ak != "" {
		u.cliEnv = append(u.cliEnv, "BOLIDE_ACCESS_KEY="+ak, "BOLIDE_SECRET_KEY="+sk)
	}
	return &u
}

// TestACL: a cluster of real processes with ACL on (TLS as the suite has
// it), driven through the CLI: without keys or with a wrong secret every
// command is refused as UNAUTHENTICATED; the admin adds a user allowed to
// publish to one topic, who can send to it and nothing else (NO_PERMISSION);
// once deleted the user is refused; refused sends store nothing; user
// listings never show a secret.
func TestACL(t *testing.T) {
	base := e2eDir(t)
	c := startClusterWith(t, base, "cluster-acl", 1, suiteSecurity(t, base).withACL(t, base))
	const (
		orders    = "e2e-acl-orders"
		other     = "e2e-acl-other"
		appKey    = "e2e-orders-app"
		appSecret = "orders-app-secret-0123456789"
	)
	c.ok("topic", "create", orders, "--queues", "2")
	c.ok("topic", "create", other, "--queues", "2")

	// No keys, an unknown key, a wrong secret.
	for _, u := range []*cluster{c.as("", ""), c.as("e2e-nobody", "whatever-secret"), c.as(e2eAccessKey, "not-the-secret")} {
		checkFails(t, u.run("topic", "list"), 1, "UNAUTHENTICATED")
		checkFails(t, u.run("send", "--topic", orders, "forged"), 1, "UNAUTHENTICATED")
		checkFails(t, u.run("topic", "create", "e2e-acl-forged"), 1, "UNAUTHENTICATED")
	}

	// The admin adds a user who may publish to orders only.
	put := c.okJSON("acl", "user", "put", appKey, "--secret-key", appSecret, "--topic-perm", orders+"=PUB")
	if len(put) != 3 { // the NameServer and two brokers
		t.Fatalf("acl user put answered %d daemons, want 3: %v", len(put), put)
	}
	for _, l := range put {
		if l["ok"] != true {
			t.Fatalf("acl user put: %v", l)
		}
	}
	app := c.as(appKey, appSecret)
	app.ok("send", "--topic", orders, "by the app")
	checkFails(t, app.run("send", "--topic", other, "not allowed"), 1, "NO_PERMISSION")
	checkFails(t, app.run("topic", "create", "e2e-acl-by-app"), 1, "NO_PERMISSION")
	checkFails(t, app.run("topic", "delete", orders), 1, "NO_PERMISSION")
	checkFails(t, app.run("acl", "user", "put", "e2e-escalate", "--secret-key", "escalate-secret", "--admin"), 1, "NO_PERMISSION")

	// Listings name the user and its rule, never a secret.
	r := c.ok("acl", "user", "list", "-o", "json")
	if !strings.Contains(r.stdout, appKey) || !strings.Contains(r.stdout, orders+"=PUB") {
		t.Errorf("acl user list lacks %s: %v", appKey, r)
	}
	for _, secret := range []string{appSecret, e2eSecretKey} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("acl user list shows a secret: %v", r)
		}
	}
	if r := c.run("acl", "user", "list"); r.code != 0 || strings.Contains(r.stdout+r.stderr, appSecret) {
		t.Errorf("acl user list (table): %v", r)
	}

	// Deleted, the user is refused.
	c.ok("acl", "user", "delete", appKey)
	checkFails(t, app.run("send", "--topic", orders, "after delete"), 1, "UNAUTHENTICATED")

	// What was stored: the app's one send to orders, nothing else.
	if n := sumMessages(t, c.okJSON("topic", "status", orders)); n != 1 {
		t.Errorf("%s holds %d messages, want 1 (the refused sends stored something)", orders, n)
	}
	if n := sumMessages(t, c.okJSON("topic", "status", other)); n != 0 {
		t.Errorf("%s holds %d messages, want 0", other, n)
	}
	for _, l := range c.okJSON("topic", "list") {
		if name := str(l, "topic"); strings.HasPrefix(name, "e2e-acl-forged") || name == "e2e-acl-by-app" {
			t.Errorf("a refused topic create made %s", name)
		}
	}
}
