package v1wire

import (
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// sameAsProto decodes b with DecodeSendRequest and with proto.Unmarshal and
// fails unless both refuse it or both give equal requests; and the same
// with DecodeSendRequestInPlace, whose bodies must be slices of b where
// DecodeSendRequest's are copies.
func sameAsProto(t *testing.T, b []byte) {
	t.Helper()
	want := new(pb.SendRequest)
	werr := proto.Unmarshal(b, want)
	got, err := DecodeSendRequest(b)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("input %x: DecodeSendRequest error %v, proto.Unmarshal error %v", b, err, werr)
	case err != nil:
		return
	}
	// Unknown fields are skipped, not kept: compare without them.
	proto.Reset(want)
	if werr := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, want); werr != nil {
		t.Fatalf("input %x: proto.Unmarshal without unknown fields: %v", b, werr)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("input %x:\n got %v\nwant %v", b, got, want)
	}
	for i, m := range got.Messages {
		if len(m.Body) == 0 && m.Body != nil {
			t.Fatalf("input %x: message %d has an empty non-nil body", b, i)
		}
		if len(m.Body) > 0 && within(m.Body, b) {
			t.Fatalf("input %x: message %d's body is not a copy", b, i)
		}
	}
	in, err := DecodeSendRequestInPlace(b)
	if err != nil {
		t.Fatalf("input %x: DecodeSendRequestInPlace: %v (DecodeSendRequest took it)", b, err)
	}
	if !proto.Equal(in, want) {
		t.Fatalf("input %x: in place:\n got %v\nwant %v", b, in, want)
	}
	if len(in.Packed) > 0 && (!within(in.Packed, b) || len(in.Packed) != cap(in.Packed)) {
		t.Fatalf("input %x: in place, packed is not a capped slice of the input", b)
	}
	if len(got.Packed) > 0 && within(got.Packed, b) {
		t.Fatalf("input %x: packed is not a copy", b)
	}
	for i, m := range in.Messages {
		switch {
		case len(m.Body) == 0 && m.Body != nil:
			t.Fatalf("input %x: in place, message %d has an empty non-nil body", b, i)
		case len(m.Body) > 0 && !within(m.Body, b):
			t.Fatalf("input %x: in place, message %d's body is not a slice of the input", b, i)
		case len(m.Body) != cap(m.Body):
			t.Fatalf("input %x: in place, message %d's body is not capped (an append would write into the input)", b, i)
		}
	}
}

// within reports whether s lies inside b's memory.
func within(s, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return at >= start && at+uintptr(len(s)) <= start+uintptr(len(b))
}

func sampleRequests() []*pb.SendRequest {
	return []*pb.SendRequest{
		{},
		{RequestId: 7, ProducerGroup: "pg"},
		{RequestId: 1<<64 - 1, Messages: []*pb.Message{{}}},
		{ProducerGroup: "g", Messages: []*pb.Message{
			{Topic: "orders", QueueId: 3, Flag: -1, Body: []byte("hello"), BornTimestamp: 1_700_000_000_000,
				BornHost: "10.0.0.1:4242", SysFlag: 4, ReconsumeTimes: 2,
				Properties: map[string]string{"UNIQ_KEY": "ID-1", "KEYS": "k1 k2", "TAGS": "a", "custom": "", "": "empty name"}},
			{Topic: "orders", QueueId: -5, Body: []byte{0, 1, 2}},
			{Topic: "audit", Properties: map[string]string{"WAIT": "true"}},
		}},
		{RequestId: 9, ProducerGroup: "g", Packed: []byte("\x00\x00\x00\x2eentries"), PackedTopic: "orders", PackedQueueId: 3},
		{PackedQueueId: -1, PackedTopic: "t"},
	}
}

// TestDecodeSendRequestMatchesProto decodes encoded requests and hand-made
// inputs that proto.Unmarshal treats in its particular ways.
func TestDecodeSendRequestMatchesProto(t *testing.T) {
	for _, r := range sampleRequests() {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sameAsProto(t, b)
		for i := range b { // every truncation
			sameAsProto(t, b[:i])
		}
	}
	msg := func(fields ...[]byte) []byte {
		var m []byte
		for _, f := range fields {
			m = append(m, f...)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), m)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	entry := func(fields ...[]byte) []byte {
		var e []byte
		for _, f := range fields {
			e = append(e, f...)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), e)
	}
	cases := map[string][]byte{
		"repeated scalar: last wins":         msg(varint(2, 1), varint(2, 9), str(1, "a"), str(1, "b")),
		"int32 from a 64-bit varint":         msg(varint(2, 1<<40|5), varint(3, 1<<63)),
		"known field, wrong wire type":       msg(varint(1, 3), str(2, "x"), str(4, "body")),
		"unknown fields and a group":         append(msg(varint(99, 1), str(100, "u")), protowire.AppendTag(nil, 50, protowire.StartGroupType)[0], protowire.AppendTag(nil, 50, protowire.EndGroupType)[0]),
		"map entry without key or value":     msg(entry(), entry(str(2, "v")), entry(str(1, "k"))),
		"map entry repeating its key":        msg(entry(str(1, "a"), str(1, "b"), str(2, "v"))),
		"map key repeated across entries":    msg(entry(str(1, "k"), str(2, "1")), entry(str(1, "k"), str(2, "2"))),
		"invalid UTF-8 topic":                msg(str(1, "\xff")),
		"invalid UTF-8 overwritten key":      msg(entry(str(1, "\xff"), str(1, "ok"))),
		"invalid UTF-8 value":                msg(entry(str(1, "k"), str(2, "\xc3"))),
		"invalid UTF-8 value of a known key": msg(entry(str(1, "UNIQ_KEY"), str(2, "\xff"))),
		"known keys, one repeated":           msg(entry(str(1, "KEYS"), str(2, "a b")), entry(str(1, "\xff"), str(1, "TAGS"), str(2, "t"))),
		"a topic repeated, then another":     append(append(msg(str(1, "t")), msg(str(1, "t"))...), msg(str(1, "\xff"))...),
		"the empty topic, then an invalid":   append(msg(str(1, "")), msg(str(1, "\xfe"))...),
		"invalid UTF-8 producer group":       str(2, "\xff"),
		"invalid UTF-8 in an unknown field":  msg(str(77, "\xff")),
		"empty body":                         msg(str(4, "")),
		"field number 0":                     {0x02, 0x00},
		"end group at top level":             protowire.AppendTag(nil, 9, protowire.EndGroupType),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) { sameAsProto(t, b) })
	}
}

// FuzzDecodeSendRequest holds DecodeSendRequest to proto.Unmarshal on any
// input.
func FuzzDecodeSendRequest(f *testing.F) {
	for _, r := range sampleRequests() {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsProto(t, b) })
}
