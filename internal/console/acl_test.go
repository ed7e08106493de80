package console

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// With ACL on, the console needs the HTTP Basic credentials of a user of
// the ACL file and calls the cluster with them: a user reads what the CLI
// lets them read and is refused what it refuses them.
func TestConsoleACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "admin-key", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "app-key", SecretKey: "app-secret", TopicPerms: []string{"acl-orders=PUB|SUB"}, GroupPerms: []string{"app-group=SUB"}},
	}}); err != nil {
		t.Fatal(err)
	}
	cfg := auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
	c := cluster.Start(t, cluster.Options{Broker: func(o *broker.Options) {
		o.Auth = cfg
		o.Credentials = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	}})
	g, err := auth.New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	e := startConsole(t, c, Options{Daemon: Broker, Name: "broker-a", Addr: c.Broker(0).Addr(), NameServers: c.NameServerAddrs(), Guard: g})

	// No credentials, or wrong ones: 401, pages and API.
	code, hdr, _ := e.do("GET", "/console/", nil, nil)
	if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" {
		t.Fatalf("page without credentials: %d %v", code, hdr)
	}
	e.apiError("GET", "/whoami", nil, nil, 401, "UNAUTHENTICATED")
	e.user = [2]string{"app-key", "wrong"}
	e.apiError("GET", "/topics", nil, nil, 401, "UNAUTHENTICATED")

	admin := e.with(t)
	admin.user = [2]string{"admin-key", "admin-secret"}
	admin.api("POST", "/topics", map[string]any{"topic": "acl-orders", "queues": 2}, 201, nil)
	admin.api("POST", "/topics", map[string]any{"topic": "acl-other", "queues": 2}, 201, nil)

	app := e.with(t)
	app.user = [2]string{"app-key", "app-secret"}
	var who whoamiJSON
	app.api("GET", "/whoami", nil, 200, &who)
	if !who.ACL || who.User != "app-key" || who.Daemon != Broker || who.Name != "broker-a" {
		t.Fatalf("whoami %+v", who)
	}
	if code, _, _ := app.do("GET", "/console/", nil, nil); code != 200 {
		t.Fatalf("page as app-key: %d", code)
	}
	// Reads the CLI lets any user make.
	var topics struct{ Topics []topicJSON }
	c.WaitFor(10*time.Second, func() error {
		app.api("GET", "/topics", nil, 200, &topics)
		if len(topics.Topics) < 2 {
			return fmt.Errorf("topics %+v", topics)
		}
		return nil
	})
	app.api("GET", "/cluster", nil, 200, nil)
	app.api("GET", "/messages?topic=acl-orders&key=none", nil, 200, nil)
	// Changes it refuses them.
	app.apiError("POST", "/topics", map[string]any{"topic": "acl-new"}, nil, 403, "NO_PERMISSION")
	app.apiError("POST", "/brokers/broker-a/write-perm", map[string]any{"writable": false}, nil, 403, "NO_PERMISSION")
	app.apiError("POST", "/groups/app-group/reset", map[string]any{"topic": "acl-orders", "to": "earliest", "force": true}, nil, 403, "NO_PERMISSION")
	// The CSRF guard comes first, whoever asks.
	admin.apiError("POST", "/topics", map[string]any{"topic": "acl-csrf"}, map[string]string{"X-Bolide-Console": ""}, 403, "NO_PERMISSION")

	if n := e.con.clients.len(); n != 2 {
		t.Fatalf("%d SDK clients kept for two users, want 2", n)
	}
}
