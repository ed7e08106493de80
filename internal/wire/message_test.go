package wire

import (
	"net/netip"
	"testing"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestMessagesFromProto: every field is carried over, and each message
// has its own born host — parsed once while it repeats, left unset when
// it does not parse.
func TestMessagesFromProto(t *testing.T) {
	pms := []*pb.Message{
		{Topic: "a", QueueId: 1, Flag: 2, Body: []byte("x"), Properties: map[string]string{"K": "v"},
			BornTimestamp: 3, BornHost: "10.0.0.1:4000", SysFlag: 4, ReconsumeTimes: 5},
		{Topic: "a", BornHost: "10.0.0.1:4000"},
		{Topic: "a", BornHost: "[::1]:7"},
		{Topic: "a", BornHost: "not a host"},
		{Topic: "a", BornHost: "not a host"},
		{Topic: "a", BornHost: "10.0.0.1:4000"},
	}
	got := MessagesFromProto(pms)
	if len(got) != len(pms) {
		t.Fatalf("%d messages for %d", len(got), len(pms))
	}
	m := got[0]
	if m.Topic != "a" || m.QueueID != 1 || m.Flag != 2 || string(m.Body) != "x" || m.Properties["K"] != "v" ||
		m.BornTimestamp != 3 || m.SysFlag != 4 || m.ReconsumeTimes != 5 {
		t.Errorf("message 0: %+v", m)
	}
	want := []netip.AddrPort{
		netip.MustParseAddrPort("10.0.0.1:4000"), netip.MustParseAddrPort("10.0.0.1:4000"),
		netip.MustParseAddrPort("[::1]:7"), {}, {}, netip.MustParseAddrPort("10.0.0.1:4000"),
	}
	for i, w := range want {
		if got[i].BornHost != w {
			t.Errorf("message %d: born host %v, want %v", i, got[i].BornHost, w)
		}
	}
	got[1].Topic = "changed"
	if got[0].Topic != "a" {
		t.Error("messages share their storage")
	}
}
