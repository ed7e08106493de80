package membership

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestBadPacketsRateLimited sends 1000 garbage packets and streams to a
// real gossip port: each is counted, by kind, in the node's counts and in
// bolide_gossip_bad_packets_total, while the log gets at most a line or
// two per kind (one every 10 s), as warnings, never an error.
func TestBadPacketsRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	o := DefaultOptions()
	o.Role = RoleBroker
	o.Profile = ProfileFast
	o.Meta = map[string]string{MetaAddr: "127.0.0.1:10911"}
	n, err := New(o, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	processBefore := gathered(t, "udp_type")

	udp, err := net.Dial("udp", n.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	want := map[string]int64{}
	// UDP in bursts of 100, each read before the next is sent, so that
	// the socket buffer drops none: an unknown message type, a ping that
	// does not decode (0xc1 is never valid msgpack), an empty datagram.
	garbage := []struct {
		kind string
		pkt  []byte
	}{
		{"udp_type", []byte{200, 1, 2, 3}},
		{"udp_decode", []byte{0, 0xc1, 0xc1, 0xc1}},
		{"udp_short", nil},
	}
	for i := 0; i < 9; i++ {
		g := garbage[i%len(garbage)]
		for j := 0; j < 100; j++ {
			if _, err := udp.Write(g.pkt); err != nil {
				t.Fatal(err)
			}
		}
		want[g.kind] += 100
		waitBad(t, n, want)
	}
	// TCP: 100 streams of an unknown type, a ping that does not decode, or
	// an empty label header.
	streams := []struct {
		kind   string
		stream []byte
	}{
		{"tcp_type", []byte{200, 1, 2, 3}},
		{"tcp_decode", []byte{0, 0xc1, 0xc1, 0xc1}},
		{"tcp_label", []byte{244, 0}},
	}
	for i := 0; i < 100; i++ {
		c, err := net.Dial("tcp", n.GossipAddr())
		if err != nil {
			t.Fatal(err)
		}
		g := streams[i%len(streams)]
		if _, err := c.Write(g.stream); err != nil {
			t.Fatal(err)
		}
		want[g.kind]++
		// Wait for this one, so that no stream is cut short by the close.
		waitBad(t, n, want)
		_ = c.Close()
	}
	waitBad(t, n, want)
	var total int64
	for _, v := range want {
		total += v
	}
	if total != 1000 {
		t.Fatalf("sent %d", total)
	}

	perKind := map[string]int{}
	for _, e := range logs.All() {
		if e.Level >= zapcore.ErrorLevel {
			t.Errorf("error logged: %s %v", e.Message, e.ContextMap())
		}
		if k, ok := e.ContextMap()["badPacket"].(string); ok {
			perKind[k]++
		}
	}
	for k := range want {
		// One line per kind every 10 s: two if the test straddled one.
		if perKind[k] < 1 || perKind[k] > 2 {
			t.Errorf("%d lines about %s", perKind[k], k)
		}
	}
	if got := gathered(t, "udp_type") - processBefore; got != float64(want["udp_type"]) {
		t.Errorf("bolide_gossip_bad_packets_total{kind=udp_type} grew by %v, want %d", got, want["udp_type"])
	}
}

// waitBad waits until the node has counted exactly want.
func waitBad(t *testing.T, n *Node, want map[string]int64) {
	t.Helper()
	waitFor(t, 10*time.Second, "bad packets counted", func() error {
		got := n.BadPackets()
		for k, v := range want {
			if got[k] != v {
				return fmt.Errorf("counted %v, want %v", got, want)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("counted %v, want %v", got, want)
		}
		return nil
	})
}

// gathered is bolide_gossip_bad_packets_total{kind} as a registry
// gathers it from BadPacketsCollector.
func gathered(t *testing.T, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(BadPacketsCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "bolide_gossip_bad_packets_total" || mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		if len(mf.Metric) != int(numBadKinds) {
			t.Fatalf("%d kinds reported", len(mf.Metric))
		}
		for _, m := range mf.Metric {
			if m.Label[0].GetName() == "kind" && m.Label[0].GetValue() == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no bolide_gossip_bad_packets_total{kind=%q}", kind)
	return 0
}

// TestBadLineSuppression: the bridge writes the first line of a kind,
// drops the next ones for 10 s while counting them, then writes one that
// says how many it dropped; kinds are limited apart; other lines pass.
func TestBadLineSuppression(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	b := newLogBridge(zap.New(core))
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	std := b.stdLogger()
	for i := 0; i < 50; i++ {
		std.Printf("[ERR] memberlist: msg type (200) not supported from=127.0.0.1:1")
		std.Printf("[ERR] memberlist: Failed to decode ping request: EOF from=127.0.0.1:1")
	}
	std.Printf("[ERR] memberlist: Failed fallback ping")
	now = now.Add(badLogEvery)
	std.Printf("[ERR] memberlist: msg type (201) not supported from=127.0.0.1:2")

	type line struct {
		level      zapcore.Level
		msg, kind  string
		suppressed int64
	}
	var got []line
	for _, e := range logs.All() {
		l := line{level: e.Level, msg: e.Message}
		if k, ok := e.ContextMap()["badPacket"].(string); ok {
			l.kind, l.suppressed = k, e.ContextMap()["suppressed"].(int64)
		}
		got = append(got, l)
	}
	want := []line{
		{zapcore.WarnLevel, "msg type (200) not supported from=127.0.0.1:1", "udp_type", 0},
		{zapcore.WarnLevel, "Failed to decode ping request: EOF from=127.0.0.1:1", "udp_decode", 0},
		{zapcore.ErrorLevel, "Failed fallback ping", "", 0},
		{zapcore.WarnLevel, "msg type (201) not supported from=127.0.0.1:2", "udp_type", 49},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lines\n%v\nwant\n%v", got, want)
	}
	if b.bad[badUDPType].Load() != 51 || b.bad[badUDPDecode].Load() != 50 {
		t.Fatalf("counted %d, %d", b.bad[badUDPType].Load(), b.bad[badUDPDecode].Load())
	}
}

// TestBadKindOf: every kind's lines are recognised, and other lines are
// not.
func TestBadKindOf(t *testing.T) {
	for k := range badKinds {
		for _, p := range badKinds[k].prefixes {
			if got, ok := badKindOf([]byte(p + " x from=1.2.3.4:5")); !ok || got != badKind(k) {
				t.Errorf("%q: %v %v", p, got, ok)
			}
		}
	}
	for _, l := range []string{"Failed fallback ping", "Suspect n1 has failed", "Was able to connect to n2", "Stream connection from=1.2.3.4:5"} {
		if k, ok := badKindOf([]byte(l)); ok {
			t.Errorf("%q taken for %s", l, badKinds[k].name)
		}
	}
}
