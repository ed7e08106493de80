package auth

import (
	"testing"
	"time"
)

// The guard's cost per request, for docs/BENCHMARKS.md.

func BenchmarkAuthorize(b *testing.B) {
	g, _ := newGuard(b, true)
	p := &Principal{AccessKey: "RocketMQ"}
	need := TopicNeed("topicB", Pub)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Authorize(p, "127.0.0.1:1", need); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHeader(b *testing.B) {
	g, _ := newGuard(b, true)
	h, d := NewHeader(Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Header("127.0.0.1:1", h, d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRemoting(b *testing.B) {
	g, _ := newGuard(b, true)
	ext := map[string]string{"AccessKey": "RocketMQ", "a": "producer-group", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1733100000000", "h": "0"}
	body := make([]byte, 1024)
	ext["Signature"] = SignRemoting(ext, body, "12345678")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Remoting("127.0.0.1:1", ext, body, "JAVA"); err != nil {
			b.Fatal(err)
		}
	}
}
