package hotwire

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestAppendPackedSendRequest packs batches of several sizes (so that the
// packed field's length takes one to four bytes) and reads them back with
// proto.Unmarshal and message.NextPacked: every message comes back as it
// was sent; also when the properties take the packed field's length to
// more bytes than the bodies alone would (extra: one more property of that
// many bytes).
func TestAppendPackedSendRequest(t *testing.T) {
	for _, tc := range []struct{ msgs, body, extra int }{{1, 10, 0}, {1, 100, 0}, {3, 50, 0}, {64, 1024, 0}, {20, 200_000, 0},
		{1, 10, 300}, {2, 8000, 9000}, {1, 1, 30_000}} {
		req := &pb.SendRequest{RequestId: 77, ProducerGroup: "pg"}
		for i := range tc.msgs {
			m := &pb.Message{Topic: "orders", QueueId: 5, Flag: int32(i), Body: bytes.Repeat([]byte{byte(i)}, tc.body),
				BornTimestamp: 1_700_000_000_000 + int64(i), SysFlag: message.SysFlagCompressed * int32(i%2), ReconsumeTimes: int32(i % 3),
				Properties: map[string]string{"UNIQ_KEY": fmt.Sprintf("ID-%d", i), "TAGS": "a", "KEYS": "k1 k2", "custom": ""}}
			if tc.extra > 0 {
				m.Properties["extra"] = string(bytes.Repeat([]byte{'e'}, tc.extra))
			}
			if i%2 == 0 {
				m.BornHost = "10.0.0.1:4242"
			} else {
				m.BornHost = "[2001:db8::1]:7"
			}
			req.Messages = append(req.Messages, m)
		}
		b, ok := AppendPackedSendRequest([]byte("prefix"), req)
		if !ok || string(b[:6]) != "prefix" {
			t.Fatalf("%+v: packed %v, prefix %q", tc, ok, b[:6])
		}
		got := new(pb.SendRequest)
		if err := proto.Unmarshal(b[6:], got); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if got.RequestId != 77 || got.ProducerGroup != "pg" || got.PackedTopic != "orders" || got.PackedQueueId != 5 || len(got.Messages) != 0 {
			t.Fatalf("%+v: request %v", tc, got)
		}
		rest := got.Packed
		for i, m := range req.Messages {
			p, next, err := message.NextPacked(rest)
			if err != nil {
				t.Fatalf("%+v: entry %d: %v", tc, i, err)
			}
			rest = next
			e, err := p.Ext("orders", 5)
			if err != nil {
				t.Fatal(err)
			}
			if e.Flag != m.Flag || e.SysFlag != m.SysFlag || e.BornTimestamp != m.BornTimestamp || e.ReconsumeTimes != m.ReconsumeTimes ||
				!bytes.Equal(e.Body, m.Body) || e.BornHost != netip.MustParseAddrPort(m.BornHost) || len(e.Properties) != len(m.Properties) {
				t.Fatalf("%+v: entry %d is %+v, sent %v", tc, i, e, m)
			}
			for k, v := range m.Properties {
				if e.Properties[k] != v {
					t.Fatalf("%+v: entry %d: %s = %q, sent %q", tc, i, k, e.Properties[k], v)
				}
			}
		}
		if len(rest) != 0 {
			t.Fatalf("%+v: %d bytes after the last entry", tc, len(rest))
		}
	}
}

// TestAppendPackedSendRequestDeclines: what cannot be packed is left to
// the plain encoding, with dst untouched.
func TestAppendPackedSendRequestDeclines(t *testing.T) {
	ok1 := &pb.Message{Topic: "t", Body: []byte("x")}
	for name, req := range map[string]*pb.SendRequest{
		"no message":          {},
		"nil message":         {Messages: []*pb.Message{nil}},
		"two topics":          {Messages: []*pb.Message{ok1, {Topic: "u", Body: []byte("x")}}},
		"two queues":          {Messages: []*pb.Message{ok1, {Topic: "t", QueueId: 1, Body: []byte("x")}}},
		"empty property name": {Messages: []*pb.Message{ok1, {Topic: "t", Body: []byte("x"), Properties: map[string]string{"": "v"}}}},
		"separator in value":  {Messages: []*pb.Message{ok1, {Topic: "t", Body: []byte("x"), Properties: map[string]string{"k": "a\x01b"}}}},
	} {
		b, ok := AppendPackedSendRequest([]byte("keep"), req)
		if ok || string(b) != "keep" {
			t.Errorf("%s: packed %v, wrote %q", name, ok, b)
		}
	}
}
