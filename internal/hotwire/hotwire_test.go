package hotwire

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func sampleRequests() []*pb.SendRequest {
	return []*pb.SendRequest{
		{},
		{RequestId: 7, ProducerGroup: "pg"},
		{RequestId: 1<<64 - 1, Messages: []*pb.Message{{}}},
		{ProducerGroup: "g", Messages: []*pb.Message{
			{Topic: "orders", QueueId: 3, Flag: -1, Body: []byte("hello"), BornTimestamp: 1_700_000_000_000,
				BornHost: "10.0.0.1:4242", SysFlag: 4, ReconsumeTimes: 2,
				Properties: map[string]string{"UNIQ_KEY": "ID-1", "KEYS": "k1 k2", "TAGS": "a", "custom": "", "": "empty name"}},
			{Topic: "orders", QueueId: -5, Body: []byte{0, 1, 2}, BornTimestamp: -1, ReconsumeTimes: -1 << 31},
			{Topic: "audit", Properties: map[string]string{"WAIT": "true", "long": string(make([]byte, 300))}},
			{Body: make([]byte, 70000)},
		}},
	}
}

func sampleResponses() []*pb.SendResponse {
	return []*pb.SendResponse{
		{},
		{RequestId: 9, Status: &pb.Status{}},
		{Status: &pb.Status{Code: pb.Code_TOPIC_NOT_EXIST, Message: "no topic ünïcode"}, BrokerName: "broker-a"},
		{Status: &pb.Status{Code: pb.Code(-3)}},
		{RequestId: 1<<64 - 1, BrokerName: "b", Results: []*pb.SendResult{
			{},
			{MsgId: "0A00000100002A9F0000000000001000", UniqueId: "7F000001...", QueueId: 7, QueueOffset: 1 << 40, CommitLogOffset: 123456789},
			{QueueId: -1, QueueOffset: -2, CommitLogOffset: -3},
		}},
	}
}

// TestAppendSendRequestMatchesProto: what AppendSendRequest writes is as
// long as proto.Marshal's encoding and reads back equal with proto.Unmarshal.
func TestAppendSendRequestMatchesProto(t *testing.T) {
	for i, r := range sampleRequests() {
		b := AppendSendRequest([]byte("prefix"), r)
		if string(b[:6]) != "prefix" {
			t.Fatalf("request %d: the prefix was overwritten", i)
		}
		b = b[6:]
		if n := proto.Size(r); len(b) != n {
			t.Errorf("request %d: %d bytes, proto.Size says %d", i, len(b), n)
		}
		got := new(pb.SendRequest)
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("request %d: proto.Unmarshal: %v", i, err)
		}
		if !proto.Equal(got, r) {
			t.Errorf("request %d:\n got %v\nwant %v", i, got, r)
		}
	}
}

// TestAppendSendRequestGrowsOnce: a batch's encoding is sized before it is
// written, so appending to an empty buffer allocates once.
func TestAppendSendRequestGrowsOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates on its own")
	}
	req := &pb.SendRequest{ProducerGroup: "g"}
	for i := 0; i < 64; i++ {
		req.Messages = append(req.Messages, &pb.Message{Topic: "t", Body: make([]byte, 1024),
			Properties: map[string]string{"UNIQ_KEY": "0A0000010000000000000000000000" + string(rune('A'+i%26))}})
	}
	if n := testing.AllocsPerRun(20, func() { AppendSendRequest(nil, req) }); n != 1 {
		t.Errorf("%v allocations per request, want 1", n)
	}
}

// TestAppendSendResponseMatchesProto: the same for AppendSendResponse, and
// DecodeSendResponse reads back what either encoder wrote.
func TestAppendSendResponseMatchesProto(t *testing.T) {
	for i, r := range sampleResponses() {
		b := AppendSendResponse(nil, r)
		if n := proto.Size(r); len(b) != n {
			t.Errorf("response %d: %d bytes, proto.Size says %d", i, len(b), n)
		}
		got := new(pb.SendResponse)
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("response %d: proto.Unmarshal: %v", i, err)
		}
		if !proto.Equal(got, r) {
			t.Errorf("response %d:\n got %v\nwant %v", i, got, r)
		}
		mine := &pb.SendResponse{RequestId: 5, Results: []*pb.SendResult{{MsgId: "stale"}}}
		if err := DecodeSendResponse(b, mine); err != nil {
			t.Fatalf("response %d: DecodeSendResponse: %v", i, err)
		}
		if !proto.Equal(mine, r) {
			t.Errorf("response %d decoded:\n got %v\nwant %v", i, mine, r)
		}
	}
	// A nil result is written as an empty one, as protobuf's encoder does.
	b := AppendSendResponse(nil, &pb.SendResponse{Results: []*pb.SendResult{nil}})
	if want, _ := proto.Marshal(&pb.SendResponse{Results: []*pb.SendResult{{}}}); string(b) != string(want) {
		t.Errorf("nil result: %x, want %x", b, want)
	}
}

// TestDecodeSendResponseReuses: one response decoded into again and again,
// as the SDK recycles them, holds each answer alone (nothing of the one
// before: no status, result or field left over), and decoding an answer
// into a response that held one as large allocates only the strings' copy.
func TestDecodeSendResponseReuses(t *testing.T) {
	samples := sampleResponses()
	resp := new(pb.SendResponse)
	for round := range 2 {
		for i := range samples {
			r := samples[(i*3+round)%len(samples)] // another order each round
			if err := DecodeSendResponse(AppendSendResponse(nil, r), resp); err != nil {
				t.Fatalf("round %d, response %v: %v", round, r, err)
			}
			if !proto.Equal(resp, r) {
				t.Fatalf("round %d:\n got %v\nwant %v", round, resp, r)
			}
		}
	}
	// A decode refused at its second result leaves fewer results than
	// room for them; the next decode fills the rest anew.
	bad := cat(fieldSub(3, fieldStr(1, "a")), fieldSub(3, fieldStr(1, "\xff")))
	good := cat(fieldSub(3, fieldStr(1, "b")), fieldSub(3, fieldStr(1, "c")))
	for _, into := range []*pb.SendResponse{new(pb.SendResponse), resp} {
		if err := DecodeSendResponse(bad, into); err == nil {
			t.Fatal("invalid UTF-8 in the second result was accepted")
		}
		if err := DecodeSendResponse(good, into); err != nil {
			t.Fatalf("after a refused decode: %v", err)
		}
		if want := (&pb.SendResponse{Results: []*pb.SendResult{{MsgId: "b"}, {MsgId: "c"}}}); !proto.Equal(into, want) {
			t.Fatalf("after a refused decode:\n got %v\nwant %v", into, want)
		}
	}
	b := AppendSendResponse(nil, &pb.SendResponse{Status: &pb.Status{Code: pb.Code_FLUSH_DISK_TIMEOUT},
		Results: []*pb.SendResult{{MsgId: "m", QueueId: 1}}})
	if err := DecodeSendResponse(b, resp); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = DecodeSendResponse(b, resp) }); n != 1 {
		t.Errorf("%v allocations decoding into a recycled response, want 1", n)
	}
}

// sameAsProto decodes b with DecodeSendResponse and with proto.Unmarshal
// and fails unless both refuse it or both give equal responses.
func sameAsProto(t *testing.T, b []byte) {
	t.Helper()
	agreesWithProto(t, b, DecodeSendResponse)
}

// agreesWithProto decodes b with decode and with proto.Unmarshal and fails
// unless both refuse it or both give equal messages.
func agreesWithProto[M proto.Message](t *testing.T, b []byte, decode func([]byte, M) error) {
	t.Helper()
	var zero M
	want := zero.ProtoReflect().New().Interface()
	werr := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, want)
	got := zero.ProtoReflect().New().Interface().(M)
	err := decode(b, got)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("input %x: hand-written decoder error %v, proto.Unmarshal error %v", b, err, werr)
	case err != nil:
		return
	}
	if !proto.Equal(got, want) {
		t.Fatalf("input %x:\n got %v\nwant %v", b, got, want)
	}
}

// TestDecodeSendResponseMatchesProto decodes encoded responses, each of
// their truncations, and hand-made inputs that proto.Unmarshal treats in
// its particular ways.
func TestDecodeSendResponseMatchesProto(t *testing.T) {
	for _, b := range encoded(t, sampleResponses()) {
		for i := 0; i <= len(b); i++ {
			sameAsProto(t, b[:i])
		}
	}
	sub, str, varint := fieldSub, fieldStr, fieldVarint
	cases := map[string][]byte{
		"repeated scalar: last wins":     cat(varint(1, 1), varint(1, 2), str(4, "a"), str(4, "b")),
		"status twice: merged":           cat(sub(2, varint(1, 3)), sub(2, str(2, "why"))),
		"int32 from a 64-bit varint":     sub(3, varint(3, 1<<40|5), varint(4, 1<<63)),
		"known field, wrong wire type":   cat(str(1, "x"), varint(4, 3), sub(3, varint(1, 1), str(3, "q"))),
		"unknown fields":                 cat(varint(99, 1), str(100, "u"), sub(3, varint(77, 1)), sub(2, str(9, "x"))),
		"invalid UTF-8 msg id":           sub(3, str(1, "\xff")),
		"invalid UTF-8 unique id":        sub(3, str(2, "\xc3")),
		"invalid UTF-8 overwritten":      sub(3, str(1, "\xff"), str(1, "ok")),
		"invalid UTF-8 broker name":      str(4, "\xff"),
		"invalid UTF-8 status message":   sub(2, str(2, "\xff")),
		"invalid UTF-8 in unknown field": str(50, "\xff"),
		"field number 0":                 {0x02, 0x00},
		"field number 0 in a result":     sub(3, []byte{0x02, 0x00}),
		"end group at top level":         protowire.AppendTag(nil, 9, protowire.EndGroupType),
		"group in a result":              sub(3, protowire.AppendTag(nil, 8, protowire.StartGroupType), protowire.AppendTag(nil, 8, protowire.EndGroupType)),
		"negative code":                  sub(2, varint(1, 1<<64-1)),
		"results around the broker name": cat(sub(3, str(1, "a")), str(4, "b"), sub(3, str(1, "c"))),
		"empty status":                   sub(2),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) { sameAsProto(t, b) })
	}
}

// FuzzDecodeSendResponse holds DecodeSendResponse to proto.Unmarshal on
// any input.
func FuzzDecodeSendResponse(f *testing.F) {
	for _, b := range encoded(f, sampleResponses()) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsProto(t, b) })
}

// fieldSub encodes a length-delimited field num holding fields, one after
// the other.
func fieldSub(num protowire.Number, fields ...[]byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), cat(fields...))
}

// fieldStr encodes string field num.
func fieldStr(num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
}

// fieldVarint encodes varint field num.
func fieldVarint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// cat joins encoded fields.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// encoded marshals each of msgs with protobuf.
func encoded[M proto.Message](tb testing.TB, msgs []M) [][]byte {
	tb.Helper()
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}
