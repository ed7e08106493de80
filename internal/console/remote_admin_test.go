package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/message"
)

// from serves one API request to con as if it came from remote (the
// console's headers on a mutation, HTTP Basic user if given).
func from(t *testing.T, con *Console, remote, method, path string, body any, user ...string) (int, errorBody) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(method, "/console/api"+path, bytes.NewReader(b))
	req.RemoteAddr = remote
	if method != http.MethodGet {
		req.Header.Set("X-Bolide-Console", "1")
		req.Header.Set("Content-Type", "application/json")
	}
	if len(user) == 2 {
		req.SetBasicAuth(user[0], user[1])
	}
	rec := httptest.NewRecorder()
	con.ServeHTTP(rec, req)
	var eb errorBody
	if rec.Code >= 400 {
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
			t.Fatalf("%s %s from %s: %d %q", method, path, remote, rec.Code, rec.Body.String())
		}
	}
	return rec.Code, eb
}

// TestConsoleRemoteAdminRule: with ACL off, changes are accepted only from
// loopback (IPv4 or IPv6) unless AllowRemoteAdmin; from elsewhere they
// answer 403 NO_PERMISSION naming --allow-remote-admin and change nothing,
// while reads stay open.
func TestConsoleRemoteAdminRule(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	e := startConsole(t, c, Options{})
	adm := e.admin()
	ctx := context.Background()

	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/topics", map[string]any{"topic": "remote-orders", "queues": 2}},
		{"PUT", "/groups/remote-billing", map[string]any{"consumeEnable": false}},
	} {
		code, eb := from(t, e.con, "10.1.2.3:51000", req.method, req.path, req.body)
		if code != http.StatusForbidden || eb.Error.Code != "NO_PERMISSION" ||
			!strings.Contains(eb.Error.Message, "not from 10.1.2.3") || !strings.Contains(eb.Error.Message, "--allow-remote-admin") {
			t.Fatalf("%s %s from a remote address with ACL off: %d %+v", req.method, req.path, code, eb)
		}
	}
	if _, err := adm.TopicConfig(ctx, "remote-orders"); !errors.Is(err, client.ErrTopicNotExist) {
		t.Fatalf("the refused topic: %v", err)
	}
	if _, err := adm.SubscriptionGroup(ctx, "remote-billing"); !errors.Is(err, client.ErrGroupNotExist) {
		t.Fatalf("the refused group: %v", err)
	}
	if code, eb := from(t, e.con, "10.1.2.3:51000", "GET", "/topics", nil); code != http.StatusOK {
		t.Fatalf("a read from a remote address: %d %+v", code, eb)
	}

	for _, remote := range []string{"127.0.0.1:51000", "[::1]:51000"} {
		if code, eb := from(t, e.con, remote, "PUT", "/groups/local-billing", map[string]any{"maxDeliveryAttempts": 5}); code != http.StatusOK {
			t.Fatalf("a change from %s: %d %+v", remote, code, eb)
		}
	}

	open := startConsole(t, c, Options{AllowRemoteAdmin: true})
	if code, eb := from(t, open.con, "10.1.2.3:51000", "POST", "/topics", map[string]any{"topic": "remote-orders", "queues": 2}); code != http.StatusCreated {
		t.Fatalf("a change from a remote address with AllowRemoteAdmin: %d %+v", code, eb)
	}
}

// TestConsoleRemoteAdminWithACL: with ACL on the loopback rule does not
// apply: the cluster checks the user, wherever the browser is.
func TestConsoleRemoteAdminWithACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "admin-key", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "app-key", SecretKey: "app-secret", TopicPerms: []string{"acl-orders=PUB|SUB"}},
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
	if code, eb := from(t, e.con, "10.1.2.3:51000", "POST", "/topics", map[string]any{"topic": "acl-orders", "queues": 2}, "admin-key", "admin-secret"); code != http.StatusCreated {
		t.Fatalf("an admin's change from a remote address with ACL on: %d %+v", code, eb)
	}
	if code, eb := from(t, e.con, "10.1.2.3:51000", "POST", "/topics", map[string]any{"topic": "acl-other", "queues": 2}, "app-key", "app-secret"); code != http.StatusForbidden ||
		strings.Contains(eb.Error.Message, "loopback") {
		t.Fatalf("a non-admin's change with ACL on: %d %+v (refused by the cluster, not by the loopback rule)", code, eb)
	}
}

// TestConsoleGroupConsumeEnable: PUT /groups/{group} with consumeEnable
// false stops a group (the broker refuses its receives), other changes
// keep it stopped, true starts it again; /topics?all=1 lists the delay
// levels' topic after a delayed send.
func TestConsoleGroupConsumeEnable(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	e := startConsole(t, c, Options{})
	adm := e.admin()
	ctx := context.Background()
	c.CreateTopic("orders", 2)

	type putAnswer struct {
		Created  bool `json:"created"`
		Declared []struct {
			MaxDeliveryAttempts int  `json:"maxDeliveryAttempts"`
			ConsumeEnable       bool `json:"consumeEnable"`
		} `json:"declared"`
	}
	put := func(body map[string]any, wantEnabled bool, wantAttempts int) {
		t.Helper()
		var out putAnswer
		e.api("PUT", "/groups/billing", body, 200, &out)
		if len(out.Declared) != 1 || out.Declared[0].ConsumeEnable != wantEnabled || out.Declared[0].MaxDeliveryAttempts != wantAttempts {
			t.Fatalf("PUT %v: %+v", body, out)
		}
	}
	put(map[string]any{"consumeEnable": false}, false, client.DefaultMaxDeliveryAttempts)
	put(map[string]any{"maxDeliveryAttempts": 5}, false, 5)

	sc, err := client.NewSimpleConsumer("billing", map[string]string{"orders": "*"}, time.Second,
		client.WithNameServers(c.NameServerAddrs()...), client.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if _, err := sc.Receive(ctx, 8, time.Minute); !errors.Is(err, client.ErrNoPermission) {
		t.Fatalf("receive of the group stopped from the console: %v", err)
	}
	put(map[string]any{"consumeEnable": true}, true, 5)
	if _, err := sc.Receive(ctx, 8, time.Minute); err != nil {
		t.Fatalf("receive after starting the group from the console: %v", err)
	}
	gs, err := adm.SubscriptionGroup(ctx, "billing")
	if err != nil || !gs[0].ConsumeEnable || gs[0].MaxDeliveryAttempts != 5 {
		t.Fatalf("declaration: %+v %v", gs, err)
	}

	// System topics the brokers' stores hold show with all=1.
	if _, err := e.producer().Send(ctx, &client.Message{Topic: "orders", Body: []byte("later")}, client.WithDelayLevel(3)); err != nil {
		t.Fatal(err)
	}
	type topicsAnswer struct {
		Topics []topicJSON `json:"topics"`
	}
	c.WaitFor(10*time.Second, func() error {
		var all topicsAnswer
		e.api("GET", "/topics?all=1", nil, 200, &all)
		for _, tp := range all.Topics {
			if tp.Topic == message.ScheduleTopic {
				if tp.Kind != "system" || tp.Perm != 0 || tp.MessageType != "" {
					t.Fatalf("%s: %+v", message.ScheduleTopic, tp)
				}
				if tp.Messages != 1 { // the queue is made just before its first entry
					return fmt.Errorf("%s: %+v", message.ScheduleTopic, tp)
				}
				return nil
			}
		}
		return errors.New(message.ScheduleTopic + " not listed yet")
	})
	var normal topicsAnswer
	e.api("GET", "/topics", nil, 200, &normal)
	for _, tp := range normal.Topics {
		if tp.Topic == message.ScheduleTopic {
			t.Fatalf("%s listed without all=1", message.ScheduleTopic)
		}
	}
}
