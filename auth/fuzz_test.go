package auth

import (
	"testing"
	"time"
)

func FuzzParseAuthorization(f *testing.F) {
	f.Add("MQv2-HMAC-SHA1 Credential=RocketMQ//Rocketmq, SignedHeaders=x-mq-date-time, Signature=2c8b69b1c423d42b583ac151d148f6729237f251")
	f.Add("MQv2-HMAC-SHA1 Credential=ak, Signature=ZZ")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		a, err := ParseAuthorization(v)
		if err == nil && (a.AccessKey == "" || len(a.Signature) != 20) {
			t.Fatalf("accepted %q as %+v", v, a)
		}
		g := &Guard{cfg: Config{Enabled: true, MaxSkew: time.Minute}}
		g.replay.init()
		g.table.Store(&Table{users: map[string]*User{"RocketMQ": {AccessKey: "RocketMQ", secret: []byte("12345678")}}})
		if p, err := g.Header("127.0.0.1:1", v, "20260101T120000Z"); err == nil {
			t.Fatalf("a fuzzed header authenticated: %q → %+v", v, p)
		}
	})
}

func FuzzRemotingSignature(f *testing.F) {
	f.Add("RocketMQ", "TopicTest", "0jiwhsaYp5ObE5GObbZH1I8/FT4=", []byte(nil))
	f.Add("RocketMQ", "x", "", []byte("body"))
	f.Fuzz(func(t *testing.T, ak, topic, sig string, body []byte) {
		g := &Guard{cfg: Config{Enabled: true}}
		g.replay.init()
		g.table.Store(&Table{users: map[string]*User{"RocketMQ": {AccessKey: "RocketMQ", secret: []byte("12345678")}}})
		ext := map[string]string{"AccessKey": ak, "topic": topic, "Signature": sig}
		p, err := g.Remoting("127.0.0.1:1", ext, body, "JAVA")
		want := SignRemoting(ext, body, "12345678")
		if err == nil && (ak != "RocketMQ" || sig != want) {
			t.Fatalf("accepted a wrong signature: %+v", p)
		}
	})
}

func FuzzACLFile(f *testing.F) {
	f.Add([]byte(testFile))
	f.Add([]byte("accounts: [{accessKey: abcdefg, secretKey: 1234567, whiteRemoteAddress: '1.2.3.{1,2}', topicPerms: [a*=PUB]}]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile(data)
		if err != nil {
			return
		}
		tb, err := file.Compile()
		if err != nil {
			return
		}
		// A compiled file survives a round trip unchanged in meaning.
		out, err := file.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseFile(out)
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, out)
		}
		tb2, err := again.Compile()
		if err != nil {
			t.Fatalf("re-compile: %v\n%s", err, out)
		}
		if tb.Len() != tb2.Len() {
			t.Fatalf("users %d → %d", tb.Len(), tb2.Len())
		}
		for _, u := range tb.users {
			u2, ok := tb2.Lookup(u.AccessKey)
			if !ok || u2.Admin != u.Admin || u2.Perm(Topic, "x") != u.Perm(Topic, "x") || u2.Perm(Group, "g") != u.Perm(Group, "g") {
				t.Fatalf("user %q changed in a round trip", u.AccessKey)
			}
			if u.white != nil {
				u.white.match("1.2.3.4:5")
			}
		}
	})
}
