package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
)

// RocketMQ's signature vectors (reference: AK RocketMQ, SK 12345678).
func TestRemotingVectors(t *testing.T) {
	cases := []struct {
		ext  map[string]string
		body string
		want string
	}{
		{map[string]string{"AccessKey": "RocketMQ", "topic": "TopicTest"}, "", "0jiwhsaYp5ObE5GObbZH1I8/FT4="},
		{map[string]string{"AccessKey": "RocketMQ", "a": "PG", "b": "TopicTest", "c": "TBW102"}, "hello", "sfW1k0fY0HYPOizXVKtDofOhDQ4="},
		{map[string]string{"AccessKey": "RocketMQ", "SecurityToken": "tok", "topic": "TopicTest"}, "", "03bqovdVZTUgndKShXbb0I+ihgE="},
	}
	for _, c := range cases {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		if got := SignRemoting(c.ext, body, "12345678"); got != c.want {
			t.Errorf("SignRemoting(%v, %q) = %s, want %s", c.ext, c.body, got, c.want)
		}
	}
}

func TestHeaderVector(t *testing.T) {
	const want = "2c8b69b1c423d42b583ac151d148f6729237f251"
	if got := SignDate("20260101T120000Z", "12345678"); got != want {
		t.Fatalf("SignDate = %s, want %s", got, want)
	}
	for _, v := range []string{
		"MQv2-HMAC-SHA1 Credential=RocketMQ//Rocketmq, SignedHeaders=x-mq-date-time, Signature=" + want,
		"MQv2-HMAC-SHA1 Credential=RocketMQ, SignedHeaders=x-mq-date-time, Signature=" + strings.ToUpper(want),
	} {
		a, err := ParseAuthorization(v)
		if err != nil || a.AccessKey != "RocketMQ" {
			t.Fatalf("ParseAuthorization(%q) = %+v, %v", v, a, err)
		}
	}
	for _, bad := range []string{"", "Basic abc", "MQv2-HMAC-SHA1 Credential=, Signature=" + want, "MQv2-HMAC-SHA1 Credential=ak, Signature=zz", "MQv2-HMAC-SHA1 Credential=ak"} {
		if _, err := ParseAuthorization(bad); err == nil {
			t.Errorf("ParseAuthorization(%q) accepted", bad)
		}
	}
}

const testFile = `
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB, orders-*=PUB, orders-secret=DENY]
    groupPerms: [groupA=DENY, "%RETRY%groupB=PUB|SUB", groupC=SUB]
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.{1,2},127.0.0.1
    admin: true
`

func newGuard(t testing.TB, enabled bool) (*Guard, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte(testFile), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Enabled: enabled, File: path, MaxSkew: DefaultMaxSkew}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, path
}

func TestPermissionMatrix(t *testing.T) {
	g, _ := newGuard(t, true)
	p := &Principal{AccessKey: "RocketMQ"}
	cases := []struct {
		need Need
		ok   bool
	}{
		{TopicNeed("topicA", Pub), false},
		{TopicNeed("topicA", Sub), false},
		{TopicNeed("topicB", Pub), true},
		{TopicNeed("topicB", Sub), true},
		{TopicNeed("topicC", Pub), false},
		{TopicNeed("topicC", Sub), true},
		{TopicNeed("topicC", Any), true},
		{TopicNeed("orders-1", Pub), true},
		{TopicNeed("orders-secret", Pub), false},
		{TopicNeed("unlisted", Pub), false}, // defaultTopicPerm DENY
		{GroupNeed("groupA", Sub), false},
		{GroupNeed("groupB", Sub), true},
		{GroupNeed("%RETRY%groupC", Sub), true},
		{GroupNeed("unlisted", Sub), true}, // defaultGroupPerm SUB
		{TopicNeed("%RETRY%groupA", Pub), false},
		{TopicNeed("%RETRY%groupB", Pub), true},
	}
	for _, c := range cases {
		err := g.Authorize(p, "127.0.0.1:1", c.need)
		if (err == nil) != c.ok {
			t.Errorf("%v: err %v, want ok=%v", c.need, err, c.ok)
		}
		if err != nil && errcode.Of(err) != errcode.NoPermission {
			t.Errorf("%v: code %v", c.need, errcode.Of(err))
		}
	}
	if err := g.Authorize(&Principal{AccessKey: "rocketmq2", Admin: true}, "", TopicNeed("topicA", Pub)); err != nil {
		t.Errorf("admin refused: %v", err)
	}
	if err := g.Authorize(nil, "", TopicNeed("topicB", Pub)); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("nil principal: %v", err)
	}
	if err := g.Admin(p, "127.0.0.1:1", "create topic"); errcode.Of(err) != errcode.NoPermission {
		t.Errorf("non-admin admin call: %v", err)
	}
}

func TestDenyWinsTie(t *testing.T) {
	f := &File{Accounts: []Account{{AccessKey: "abcdef", SecretKey: "123456", DefaultTopicPerm: "PUB",
		TopicPerms: []string{"t=PUB", "t=DENY", "p*=SUB", "p*=DENY"}}}}
	tb, err := f.Compile()
	if err != nil {
		t.Fatal(err)
	}
	u, _ := tb.Lookup("abcdef")
	if p := u.Perm(Topic, "t"); p != Deny {
		t.Errorf("t: %v", p)
	}
	if p := u.Perm(Topic, "px"); p != Deny {
		t.Errorf("px: %v", p)
	}
}

func TestRemotingAuthentication(t *testing.T) {
	g, _ := newGuard(t, true)
	ext := map[string]string{"AccessKey": "RocketMQ", "topic": "TopicTest"}
	ext["Signature"] = SignRemoting(ext, nil, "12345678")
	if p, err := g.Remoting("127.0.0.1:5", ext, nil, "JAVA"); err != nil || p.AccessKey != "RocketMQ" {
		t.Fatalf("good signature: %v", err)
	}
	// A signature over other fields: the body changed.
	if _, err := g.Remoting("127.0.0.1:5", ext, []byte("x"), "JAVA"); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("other content: %v", err)
	}
	bad := map[string]string{"AccessKey": "RocketMQ", "topic": "TopicTest"}
	bad["Signature"] = SignRemoting(bad, nil, "wrong-secret")
	if _, err := g.Remoting("127.0.0.1:5", bad, nil, "JAVA"); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("wrong secret: %v", err)
	}
	if _, err := g.Remoting("127.0.0.1:5", map[string]string{"topic": "x"}, nil, "JAVA"); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("no credentials: %v", err)
	}
	// client-go signs without its token.
	tok := map[string]string{"AccessKey": "RocketMQ", "topic": "TopicTest"}
	sig := SignRemoting(tok, nil, "12345678")
	tok["SecurityToken"], tok["Signature"] = "tok", sig
	if _, err := g.Remoting("127.0.0.1:5", tok, nil, "GO"); err != nil {
		t.Errorf("go token quirk: %v", err)
	}
	if _, err := g.Remoting("127.0.0.1:5", tok, nil, "JAVA"); err == nil {
		t.Errorf("token left out of a Java signature accepted")
	}
	// Whitelist narrows.
	adm := map[string]string{"AccessKey": "rocketmq2"}
	adm["Signature"] = SignRemoting(adm, nil, "12345678")
	if _, err := g.Remoting("192.168.1.2:9", adm, nil, "JAVA"); err != nil {
		t.Errorf("whitelisted address: %v", err)
	}
	if _, err := g.Remoting("192.168.1.3:9", adm, nil, "JAVA"); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("address outside the whitelist: %v", err)
	}
}

func TestHeaderAuthentication(t *testing.T) {
	g, _ := newGuard(t, true)
	c := Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}
	now := time.Now()
	h, d := NewHeader(c, now)
	if _, err := g.Header("127.0.0.1:1", h, d); err != nil {
		t.Fatalf("good header: %v", err)
	}
	if _, err := g.Header("127.0.0.1:1", h, d); err != nil {
		t.Fatalf("same connection again: %v", err)
	}
	if _, err := g.Header("", "", ""); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("no credentials: %v", err)
	}
	wh, wd := NewHeader(Credentials{AccessKey: "RocketMQ", SecretKey: "nope-nope"}, now)
	if _, err := g.Header("127.0.0.1:1", wh, wd); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("wrong secret: %v", err)
	}
	// Signed over another date than the one sent.
	if _, err := g.Header("127.0.0.1:1", h, now.Add(time.Second).UTC().Format(DateLayout)); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("other date: %v", err)
	}
	oh, od := NewHeader(c, now.Add(-time.Hour))
	if _, err := g.Header("127.0.0.1:1", oh, od); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	// Replayed on another connection after the grace.
	rh, rd := NewHeader(c, now.Add(-time.Minute))
	if _, err := g.Header("127.0.0.1:1", rh, rd); err != nil {
		t.Fatal(err)
	}
	g.replay.mu.Lock()
	for k, e := range g.replay.entries {
		e.first = e.first.Add(-time.Minute)
		g.replay.entries[k] = e
	}
	g.replay.mu.Unlock()
	if _, err := g.Header("127.0.0.1:2", rh, rd); err == nil || !strings.Contains(err.Error(), "replayed") {
		t.Errorf("replay: %v", err)
	}
}

func TestAdminWhenOff(t *testing.T) {
	g, _ := newGuard(t, false)
	if err := g.Admin(nil, "127.0.0.1:9", "create topic"); err != nil {
		t.Errorf("loopback: %v", err)
	}
	if err := g.Admin(nil, "10.1.2.3:9", "create topic"); errcode.Of(err) != errcode.NoPermission {
		t.Errorf("remote: %v", err)
	}
	var nilGuard *Guard
	if err := nilGuard.Admin(nil, "10.1.2.3:9", "x"); err != nil {
		t.Errorf("nil guard: %v", err)
	}
	if p, err := g.Header("", "", ""); p != nil || err != nil {
		t.Errorf("off: %v %v", p, err)
	}
}

func TestReloadAndManage(t *testing.T) {
	g, path := newGuard(t, true)
	if err := g.PutUser(Account{AccessKey: "newuser", SecretKey: "secret-1", DefaultTopicPerm: "PUB"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Authorize(&Principal{AccessKey: "newuser"}, "", TopicNeed("x", Pub)); err != nil {
		t.Errorf("new user: %v", err)
	}
	if err := g.DeleteUser("rocketmq2"); err == nil {
		t.Errorf("deleting the last admin accepted")
	}
	// An edit on disk is picked up.
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Delete("newuser")
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	g.lastCheck.Store(0)
	if err := g.Authorize(&Principal{AccessKey: "newuser"}, "", TopicNeed("x", Pub)); errcode.Of(err) != errcode.Unauthenticated {
		t.Errorf("after reload: %v", err)
	}
	// A broken file keeps the users.
	if err := os.WriteFile(path, []byte("accounts: [{accessKey: a}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.lastCheck.Store(0)
	if err := g.Authorize(&Principal{AccessKey: "RocketMQ"}, "", TopicNeed("topicB", Pub)); err != nil {
		t.Errorf("after a broken file: %v", err)
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, doc := range []string{
		"accounts: [{accessKey: short, secretKey: 12345678}]",
		"accounts: [{accessKey: abcdefg, secretKey: 123}]",
		"accounts: [{accessKey: abcdefg, secretKey: 1234567, topicPerms: [a=ALL]}]",
		"accounts: [{accessKey: abcdefg, secretKey: 1234567, whiteRemoteAddress: '*'}]",
		"accounts: [{accessKey: abcdefg, secretKey: 1234567}, {accessKey: abcdefg, secretKey: 1234567}]",
	} {
		f, err := ParseFile([]byte(doc))
		if err == nil {
			_, err = f.Compile()
		}
		if err == nil {
			t.Errorf("accepted: %s", doc)
		}
	}
	if _, err := New(Config{Enabled: true}, nil); err == nil {
		t.Error("ACL on without a file accepted")
	}
	if _, err := New(Config{Enabled: true, File: "/nonexistent/acl.yml"}, nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
