package hotwire

import (
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func samplePullResponses() []*pb.PullResponse {
	return []*pb.PullResponse{
		{},
		{Status: &pb.Status{}, PullStatus: pb.PullStatus_NO_NEW_MESSAGE, NextOffset: 5, MinOffset: 0, MaxOffset: 5},
		{Status: &pb.Status{Code: pb.Code_TOPIC_NOT_EXIST, Message: "no topic ünïcode"}},
		{PullStatus: pb.PullStatus(-2), NextOffset: -1, MinOffset: 1 << 40, MaxOffset: -1 << 62},
		{PullStatus: pb.PullStatus_FOUND, NextOffset: 12, MaxOffset: 12, Records: [][]byte{
			[]byte("first record"), {}, {0, 0xff, 1}, make([]byte, 70000),
		}},
	}
}

// samePullAsProto decodes b with DecodePullResponse and with
// proto.Unmarshal and fails unless both refuse it or both give equal
// responses.
func samePullAsProto(t *testing.T, b []byte) {
	t.Helper()
	agreesWithProto(t, b, DecodePullResponse)
}

// TestDecodePullResponseMatchesProto decodes encoded responses, each of
// their truncations, and hand-made inputs that proto.Unmarshal treats in
// its particular ways.
func TestDecodePullResponseMatchesProto(t *testing.T) {
	for _, b := range encoded(t, samplePullResponses()) {
		for i := 0; i <= len(b); i++ {
			samePullAsProto(t, b[:i])
		}
	}
	sub, str, varint := fieldSub, fieldStr, fieldVarint
	cases := map[string][]byte{
		"repeated scalar: last wins":        cat(varint(4, 1), varint(4, 2), varint(2, 1), varint(2, 3)),
		"status twice: merged":              cat(sub(1, varint(1, 3)), sub(1, str(2, "why"))),
		"known field, wrong wire type":      cat(varint(3, 7), str(4, "x"), sub(1, str(1, "q"))),
		"unknown fields":                    cat(varint(99, 1), str(100, "u"), sub(1, varint(77, 1)), str(3, "r")),
		"invalid UTF-8 status message":      sub(1, str(2, "\xff")),
		"invalid UTF-8 in a record":         str(3, "\xff\xfe"),
		"field number 0":                    {0x02, 0x00},
		"field number 0 in the status":      sub(1, []byte{0x02, 0x00}),
		"end group at top level":            protowire.AppendTag(nil, 9, protowire.EndGroupType),
		"negative pull status":              varint(2, 1<<64-1),
		"records around the offsets":        cat(str(3, "a"), varint(4, 9), str(3, ""), varint(6, 9), str(3, "c")),
		"offset in a 10-byte varint":        varint(5, 1<<63|1),
		"empty status":                      sub(1),
		"truncated record length":           {0x1a, 0x80},
		"record longer than what is left":   {0x1a, 0x05, 'a'},
		"pull status as a length-delimited": str(2, "FOUND"),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) { samePullAsProto(t, b) })
	}
}

// TestDecodePullResponseSharesRecords: the records are slices of the
// input, capped, so that an append to one cannot overwrite the next.
func TestDecodePullResponseSharesRecords(t *testing.T) {
	b, err := proto.Marshal(&pb.PullResponse{Records: [][]byte{[]byte("one"), []byte("two")}})
	if err != nil {
		t.Fatal(err)
	}
	resp := new(pb.PullResponse)
	if err := DecodePullResponse(b, resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Records) != 2 {
		t.Fatalf("%d records, want 2", len(resp.Records))
	}
	lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(len(b))
	for i, r := range resp.Records {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(r)))
		if p < lo || p >= hi {
			t.Errorf("record %d is a copy, not a slice of the input", i)
		}
		if cap(r) != len(r) {
			t.Errorf("record %d: capacity %d beyond its length %d", i, cap(r), len(r))
		}
	}
	_ = append(resp.Records[0], 'X')
	if string(resp.Records[1]) != "two" {
		t.Errorf("an append to record 0 changed record 1 to %q", resp.Records[1])
	}
}

// FuzzDecodePullResponse holds DecodePullResponse to proto.Unmarshal on
// any input.
func FuzzDecodePullResponse(f *testing.F) {
	for _, b := range encoded(f, samplePullResponses()) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { samePullAsProto(t, b) })
}
