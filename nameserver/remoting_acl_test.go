package nameserver

import (
	"maps"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/remoting"
)

var (
	nsAdmin = auth.Credentials{AccessKey: "adminKey", SecretKey: "adminSecret"}
	nsUser  = auth.Credentials{AccessKey: "userKey1", SecretKey: "userSecret"}
)

// aclNameServer starts a NameServer with ACL on (an admin and a user with
// every topic permission but no admin right) and a route for topic
// "orders".
func aclNameServer(t *testing.T) *Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(path, &auth.File{Accounts: []auth.Account{
		{AccessKey: nsAdmin.AccessKey, SecretKey: nsAdmin.SecretKey, Admin: true},
		{AccessKey: nsUser.AccessKey, SecretKey: nsUser.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(o *Options) {
		o.GossipAddr = GossipOff
		o.Auth = auth.Config{Enabled: true, File: path}
	})
	registerDirect(t, s)
	return s
}

// registerDirect puts a broker with topic "orders" into the route table
// (the registration path is bolide.v1's, tested elsewhere).
func registerDirect(t *testing.T, s *Server) {
	t.Helper()
	_, err := s.routes.Register(Registration{Cluster: "DefaultCluster", BrokerName: "broker-a", Addr: "127.0.0.1:10911",
		Topics: []TopicConfig{{Name: "orders", ReadQueues: 4, WriteQueues: 4, Perm: 6}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
}

// rmqSigned sends a request signed by c as RocketMQ's clients sign it.
func rmqSigned(t *testing.T, conn *remoting.Conn, c auth.Credentials, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ext = maps.Clone(ext)
	if ext == nil {
		ext = map[string]string{}
	}
	ext[auth.FieldAccessKey] = c.AccessKey
	ext[auth.FieldSignature] = auth.SignRemoting(ext, body, c.SecretKey)
	resp, err := conn.Invoke(ctx(t), remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatalf("request %d: %v", code, err)
	}
	return resp
}

func wantNoPermission(t *testing.T, what string, resp *remoting.Command, want string) {
	t.Helper()
	if resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, want) {
		t.Fatalf("%s: %d %q, want %d with %q", what, resp.Code, resp.Remark, remoting.NoPermission, want)
	}
}

func wantSuccess(t *testing.T, what string, resp *remoting.Command) *remoting.Command {
	t.Helper()
	if resp.Code != remoting.Success {
		t.Fatalf("%s: %d %q, want success", what, resp.Code, resp.Remark)
	}
	return resp
}

// TestRemotingACL: with ACL on every remoting request of the NameServer is
// authenticated; changes need an admin user and are not applied when
// refused; codes it does not serve are refused.
func TestRemotingACL(t *testing.T) {
	s := aclNameServer(t)
	c := rmqDial(t, s.Addr())
	route := map[string]string{"topic": "orders"}

	wantNoPermission(t, "route without credentials", rmqCall(t, c, remoting.GetRouteInfoByTopic, route), "no credentials")
	wantNoPermission(t, "route with a wrong secret", rmqSigned(t, c, auth.Credentials{AccessKey: nsUser.AccessKey, SecretKey: "wrongSecret"},
		remoting.GetRouteInfoByTopic, route, nil), "signature check failed")
	wantSuccess(t, "user's route", rmqSigned(t, c, nsUser, remoting.GetRouteInfoByTopic, route, nil))
	wantSuccess(t, "user's cluster info", rmqSigned(t, c, nsUser, remoting.GetBrokerClusterInfo, nil, nil))

	// Deleting a topic: the user is refused and the route stays.
	wantNoPermission(t, "user deletes", rmqSigned(t, c, nsUser, remoting.DeleteTopicInNameServer, route, nil), "is not an admin")
	wantSuccess(t, "route after the refused delete", rmqSigned(t, c, nsUser, remoting.GetRouteInfoByTopic, route, nil))
	wantSuccess(t, "admin deletes", rmqSigned(t, c, nsAdmin, remoting.DeleteTopicInNameServer, route, nil))
	if resp := rmqSigned(t, c, nsUser, remoting.GetRouteInfoByTopic, route, nil); resp.Code != remoting.TopicNotExist {
		t.Fatalf("route after the admin's delete: %d %q", resp.Code, resp.Remark)
	}

	// KV configuration: written by admins only.
	kv := map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "orders", "value": "broker-a:4"}
	wantNoPermission(t, "user puts kv", rmqSigned(t, c, nsUser, remoting.PutKVConfig, kv, nil), "is not an admin")
	if resp := rmqSigned(t, c, nsUser, remoting.GetKVConfig, kv, nil); resp.Code != remoting.QueryNotFound {
		t.Fatalf("a refused PUT_KV_CONFIG was applied: %d %q", resp.Code, resp.Remark)
	}
	wantSuccess(t, "admin puts kv", rmqSigned(t, c, nsAdmin, remoting.PutKVConfig, kv, nil))
	wantNoPermission(t, "user deletes kv", rmqSigned(t, c, nsUser, remoting.DeleteKVConfig, kv, nil), "is not an admin")
	if resp := wantSuccess(t, "kv read", rmqSigned(t, c, nsUser, remoting.GetKVConfig, kv, nil)); resp.String("value") != "broker-a:4" {
		t.Fatalf("value %q", resp.String("value"))
	}

	// Registration is for other daemons (admin credentials); Bolide's
	// brokers use bolide.v1, so an admin gets "not supported".
	wantNoPermission(t, "user registers", rmqSigned(t, c, nsUser, remoting.RegisterBroker, nil, nil), "REGISTER_BROKER needs one")
	if resp := rmqSigned(t, c, nsAdmin, remoting.UnregisterBroker, nil, nil); resp.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("admin's UNREGISTER_BROKER: %d %q", resp.Code, resp.Remark)
	}

	// Unknown codes: refused while ACL is on, whoever asks.
	wantNoPermission(t, "unknown code", rmqSigned(t, c, nsAdmin, 9999, nil, nil), "request code 9999")
	if n := s.guard.Failures(); n != 2 {
		t.Fatalf("%d authentication failures counted, want 2", n)
	}
}

// TestRemotingConfigAllowList: UPDATE_NAMESRV_CONFIG changes no key that
// is not allowed (none is today): the CVE-2023-37582 keys are refused
// even for an admin, with a remark naming what is allowed; the
// configuration read names no path or secret.
func TestRemotingConfigAllowList(t *testing.T) {
	s := aclNameServer(t)
	c := rmqDial(t, s.Addr())
	for _, body := range []string{
		"kvConfigPath=/etc/cron.d/evil",
		"configStorePath=/tmp/evil.properties",
		"configBlackList=",
		"rocketmqHome=/tmp\nlistenPort=1",
	} {
		wantNoPermission(t, "user "+body, rmqSigned(t, c, nsUser, remoting.UpdateNamesrvConfig, nil, []byte(body)), "is not an admin")
		resp := rmqSigned(t, c, nsAdmin, remoting.UpdateNamesrvConfig, nil, []byte(body))
		key, _, _ := strings.Cut(body, "=")
		wantNoPermission(t, "admin "+body, resp, key)
		if !strings.Contains(resp.Remark, "no key of the NameServer's configuration may be changed at runtime") {
			t.Fatalf("remark %q does not say what is allowed", resp.Remark)
		}
	}
	resp := wantSuccess(t, "config read", rmqSigned(t, c, nsUser, remoting.GetNamesrvConfig, nil, nil))
	props, err := remoting.ParseProperties(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if props["aclEnable"] != "true" || props["listenAddr"] != s.Addr() {
		t.Fatalf("config %v", props)
	}
	for k, v := range props {
		if strings.Contains(strings.ToLower(k), "secret") || strings.Contains(strings.ToLower(k), "path") || strings.Contains(v, "plain_acl") {
			t.Fatalf("config read exposes %s=%s", k, v)
		}
	}
	wantNoPermission(t, "config read without credentials", rmqCall(t, c, remoting.GetNamesrvConfig, nil), "no credentials")
}

// TestRemotingACLOffAdminFromLoopbackOnly: with ACL off, the NameServer's
// administrative remoting requests are served to loopback callers only
// (unless AllowRemoteAdmin); reads to anyone.
func TestRemotingACLOffAdminFromLoopbackOnly(t *testing.T) {
	ip := nonLoopback(t)
	start := func(remoteAdmin bool) (*Server, *remoting.Conn) {
		s := startServer(t, func(o *Options) {
			o.ListenAddr = net.JoinHostPort(ip, "0")
			o.GossipAddr = GossipOff
			o.Auth.AllowRemoteAdmin = remoteAdmin
		})
		registerDirect(t, s)
		return s, rmqDial(t, s.Addr())
	}
	_, c := start(false)
	route := map[string]string{"topic": "orders"}
	wantSuccess(t, "remote route", rmqCall(t, c, remoting.GetRouteInfoByTopic, route))
	wantNoPermission(t, "remote delete", rmqCall(t, c, remoting.DeleteTopicInNameServer, route), "accepted only from loopback")
	wantSuccess(t, "route after the refused delete", rmqCall(t, c, remoting.GetRouteInfoByTopic, route))
	wantNoPermission(t, "remote kv", rmqCall(t, c, remoting.PutKVConfig, map[string]string{"namespace": "n", "key": "k", "value": "v"}), "accepted only from loopback")
	wantNoPermission(t, "remote config", rmqCall(t, c, remoting.UpdateNamesrvConfig, nil), "accepted only from loopback")
	if resp := rmqCall(t, c, 9999, nil); resp.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("unknown code with ACL off: %d %q", resp.Code, resp.Remark)
	}

	_, open := start(true)
	wantSuccess(t, "remote delete allowed", rmqCall(t, open, remoting.DeleteTopicInNameServer, route))
}

// nonLoopback is an IPv4 address of this machine that is not loopback; the
// test is skipped without one.
func nonLoopback(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address")
	return ""
}

// TestRemotingAccessTableCoversEveryHandler: every code the NameServer
// serves over remoting is classified, and nothing else.
func TestRemotingAccessTableCoversEveryHandler(t *testing.T) {
	handlers := (&Server{}).remotingHandlers()
	for code := range handlers {
		if _, ok := rmqAccessTable[code]; !ok {
			t.Errorf("request code %d is served but not classified", code)
		}
	}
	for code, a := range rmqAccessTable {
		if handlers[code] == nil {
			t.Errorf("request code %d (%s) is classified but not served", code, a.what)
		}
	}
	for _, code := range []int32{remoting.DeleteTopicInNameServer, remoting.PutKVConfig, remoting.DeleteKVConfig, remoting.UpdateNamesrvConfig} {
		if rmqAccessTable[code].class != rmqAdmin {
			t.Errorf("request code %d is not administrative", code)
		}
	}
	for _, code := range []int32{remoting.RegisterBroker, remoting.UnregisterBroker} {
		if rmqAccessTable[code].class != rmqInternal {
			t.Errorf("request code %d is not a call between daemons", code)
		}
	}
}
