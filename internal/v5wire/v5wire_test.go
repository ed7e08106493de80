package v5wire

import (
	"slices"
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		ok     bool
		scheme v2.AddressScheme
		host   string
		port   int32
	}{
		{"127.0.0.1:10911", true, v2.AddressScheme_IPv4, "127.0.0.1", 10911},
		{"[::1]:8081", true, v2.AddressScheme_IPv6, "::1", 8081},
		{"broker-a.example:8081", true, v2.AddressScheme_DOMAIN_NAME, "broker-a.example", 8081},
		{"127.0.0.1", false, 0, "", 0},
		{":8081", false, 0, "", 0},
		{"host:0", false, 0, "", 0},
		{"host:70000", false, 0, "", 0},
	} {
		ep, ok := Endpoints(tc.addr)
		if ok != tc.ok {
			t.Errorf("%s: ok %v", tc.addr, ok)
			continue
		}
		if !ok {
			continue
		}
		if ep.GetScheme() != tc.scheme || len(ep.GetAddresses()) != 1 || ep.GetAddresses()[0].GetHost() != tc.host || ep.GetAddresses()[0].GetPort() != tc.port {
			t.Errorf("%s: %v", tc.addr, ep)
		}
	}
}

func TestQueuePermissions(t *testing.T) {
	got := QueuePermissions(true, true, 2, 3)
	want := []v2.Permission{v2.Permission_READ_WRITE, v2.Permission_READ_WRITE, v2.Permission_WRITE}
	if !slices.Equal(got, want) {
		t.Errorf("rw 2/3: %v", got)
	}
	if got := QueuePermissions(false, false, 0, 0); !slices.Equal(got, []v2.Permission{v2.Permission_NONE}) {
		t.Errorf("no permission: %v", got)
	}
	if got := QueuePermissions(true, false, 2, 2); !slices.Equal(got, []v2.Permission{v2.Permission_READ, v2.Permission_READ}) {
		t.Errorf("read only: %v", got)
	}
}

func TestAcceptTypes(t *testing.T) {
	all := []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}
	for attr, want := range map[string][]v2.MessageType{
		"": all, "MIXED": all, "bogus": all, "fifo": {v2.MessageType_FIFO}, " DELAY ": {v2.MessageType_DELAY},
		"NORMAL": {v2.MessageType_NORMAL}, "Transaction": {v2.MessageType_TRANSACTION},
	} {
		if got := AcceptTypes(attr); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", attr, got, want)
		}
	}
}

func TestFoldAndNames(t *testing.T) {
	for _, tc := range []struct{ ns, name, folded string }{
		{"", "orders", "orders"},
		{"prod", "orders", "prod%orders"},
		{"prod", "prod%orders", "prod%orders"},
		{"prod", "%RETRY%billing", "%RETRY%prod%billing"},
		{"prod", "%DLQ%billing", "%DLQ%prod%billing"},
	} {
		if got := Fold(tc.ns, tc.name); got != tc.folded {
			t.Errorf("Fold(%q, %q) = %q, want %q", tc.ns, tc.name, got, tc.folded)
		}
		if got := Unfold(tc.ns, tc.folded); got != tc.name && tc.name != tc.folded {
			t.Errorf("Unfold(%q, %q) = %q, want %q", tc.ns, tc.folded, got, tc.name)
		}
	}
	if _, code, _ := TopicName("bad ns", "orders"); code != v2.Code_ILLEGAL_TOPIC {
		t.Errorf("bad namespace: %v", code)
	}
	if _, code, _ := TopicName("", "RMQ_SYS_TRANS_HALF_TOPIC"); code != v2.Code_ILLEGAL_TOPIC {
		t.Errorf("system topic: %v", code)
	}
	if name, code, _ := GroupName("prod", "billing"); code != v2.Code_OK || name != "prod%billing" {
		t.Errorf("group: %q %v", name, code)
	}
	if _, code, _ := GroupName("", "bad group!"); code != v2.Code_ILLEGAL_CONSUMER_GROUP {
		t.Errorf("bad group: %v", code)
	}
}
