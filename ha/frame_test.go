package ha

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func mustHello(t testing.TB, h Hello) []byte {
	b, err := AppendHello(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWelcome(t testing.TB, w Welcome) []byte {
	b, err := AppendWelcome(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAuth(t testing.TB, a Auth) []byte {
	b, err := AppendAuth(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte{0xAB}, 1000)
	cases := []struct {
		name string
		enc  []byte
		want Frame
	}{
		{"hello", mustHello(t, Hello{Version: 1, BrokerName: "broker-a", BrokerID: 2, MaxOffset: 1 << 40, LastStart: 1<<40 - 300, LastSize: 300, LastChecksum: 0x7FFFFFFF}),
			Frame{Kind: KindHello, Hello: Hello{Version: 1, BrokerName: "broker-a", BrokerID: 2, MaxOffset: 1 << 40, LastStart: 1<<40 - 300, LastSize: 300, LastChecksum: 0x7FFFFFFF}}},
		{"hello of an empty slave", mustHello(t, Hello{Version: 1, BrokerName: "b", BrokerID: 1, LastStart: -1}),
			Frame{Kind: KindHello, Hello: Hello{Version: 1, BrokerName: "b", BrokerID: 1, LastStart: -1}}},
		{"welcome", mustWelcome(t, Welcome{Version: 1, Start: 1 << 30, MinOffset: 1 << 30, MaxOffset: 5 << 30, SegmentSize: 1 << 30, Epoch: 7, MasterAddr: "10.0.0.1:10911"}),
			Frame{Kind: KindWelcome, Welcome: Welcome{Version: 1, Start: 1 << 30, MinOffset: 1 << 30, MaxOffset: 5 << 30, SegmentSize: 1 << 30, Epoch: 7, MasterAddr: "10.0.0.1:10911"}}},
		{"hello v2", mustHello(t, Hello{Version: 2, BrokerName: "broker-a", BrokerID: 3, MaxOffset: 5 << 30, LastStart: 5<<30 - 200, LastSize: 200, LastChecksum: 9,
			Epochs: []EpochEntry{{1, 0}, {2, 3 << 30}, {7, 5<<30 - 200}}}),
			Frame{Kind: KindHello, Hello: Hello{Version: 2, BrokerName: "broker-a", BrokerID: 3, MaxOffset: 5 << 30, LastStart: 5<<30 - 200, LastSize: 200, LastChecksum: 9,
				Epochs: []EpochEntry{{1, 0}, {2, 3 << 30}, {7, 5<<30 - 200}}}}},
		{"hello v2 without entries", mustHello(t, Hello{Version: 2, BrokerName: "b", BrokerID: 1, LastStart: -1}),
			Frame{Kind: KindHello, Hello: Hello{Version: 2, BrokerName: "b", BrokerID: 1, LastStart: -1}}},
		{"welcome v2", mustWelcome(t, Welcome{Version: 2, Start: 100, MaxOffset: 300, SegmentSize: 1 << 30, Epoch: 4, MasterAddr: "m:1",
			Epochs: []EpochEntry{{1, 0}, {4, 100}}}),
			Frame{Kind: KindWelcome, Welcome: Welcome{Version: 2, Start: 100, MaxOffset: 300, SegmentSize: 1 << 30, Epoch: 4, MasterAddr: "m:1",
				Epochs: []EpochEntry{{1, 0}, {4, 100}}}}},
		{"auth", mustAuth(t, Auth{Authorization: "MQv2-HMAC-SHA1 Credential=slave-a, SignedHeaders=x-mq-date-time, Signature=0a1b", Date: "20261202T031500Z"}),
			Frame{Kind: KindAuth, Auth: Auth{Authorization: "MQv2-HMAC-SHA1 Credential=slave-a, SignedHeaders=x-mq-date-time, Signature=0a1b", Date: "20261202T031500Z"}}},
		{"empty auth", mustAuth(t, Auth{}), Frame{Kind: KindAuth}},
		{"refuse unauthenticated", AppendRefuse(nil, Refuse{Code: RefuseUnauthenticated, Reason: "wrong signature"}),
			Frame{Kind: KindRefuse, Refuse: Refuse{Code: RefuseUnauthenticated, Reason: "wrong signature"}}},
		{"truncate", AppendTruncate(nil, Truncate{Fork: 7 << 30, Epoch: 12}), Frame{Kind: KindTruncate, Truncate: Truncate{Fork: 7 << 30, Epoch: 12}}},
		{"refuse", AppendRefuse(nil, Refuse{Code: RefuseDiverged, Reason: "logs differ at 42"}),
			Frame{Kind: KindRefuse, Refuse: Refuse{Code: RefuseDiverged, Reason: "logs differ at 42"}}},
		{"data", append(AppendDataHeader(nil, 4096, len(payload)), payload...),
			Frame{Kind: KindData, Offset: 4096, Data: payload}},
		{"beat", AppendBeat(nil, 123456, 1700000000000), Frame{Kind: KindBeat, Offset: 123456, Timestamp: 1700000000000}},
		{"ack", AppendAck(nil, 99, 1700000000001), Frame{Kind: KindAck, Offset: 99, Timestamp: 1700000000001}},
	}
	// All frames back to back on one stream, as on the wire.
	var stream []byte
	for _, c := range cases {
		stream = append(stream, c.enc...)
	}
	r := bytes.NewReader(stream)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadFrame(r, 4096, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("decoded %+v\nwant    %+v", got, c.want)
			}
		})
	}
	if _, err := ReadFrame(r, 4096, nil); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestFrameSizes(t *testing.T) {
	// The sizes doc.go gives.
	if n := len(mustHello(t, Hello{BrokerName: "abc"})); n != 41+3 {
		t.Fatalf("HELLO is %d bytes", n)
	}
	if n := len(mustWelcome(t, Welcome{MasterAddr: "abcd"})); n != 49+4 {
		t.Fatalf("WELCOME is %d bytes", n)
	}
	if n := len(AppendRefuse(nil, Refuse{Reason: "x"})); n != 5+1 {
		t.Fatalf("REFUSE is %d bytes", n)
	}
	if n := len(AppendDataHeader(nil, 0, 1)); n != 13 {
		t.Fatalf("DATA header is %d bytes", n)
	}
	if n := len(AppendBeat(nil, 0, 0)); n != 17 {
		t.Fatalf("BEAT is %d bytes", n)
	}
	if n := len(AppendAck(nil, 0, 0)); n != 17 {
		t.Fatalf("ACK is %d bytes", n)
	}
	two := []EpochEntry{{1, 0}, {2, 10}}
	if n := len(mustHello(t, Hello{Version: 2, BrokerName: "abc", Epochs: two})); n != 41+3+2+2*16 {
		t.Fatalf("HELLO v2 is %d bytes", n)
	}
	if n := len(mustWelcome(t, Welcome{Version: 2, MasterAddr: "abcd", Epochs: two})); n != 49+4+2+2*16 {
		t.Fatalf("WELCOME v2 is %d bytes", n)
	}
	if n := len(AppendTruncate(nil, Truncate{})); n != 17 {
		t.Fatalf("TRUNCATE is %d bytes", n)
	}
	if b := mustAuth(t, Auth{Authorization: "abc", Date: "de"}); len(b) != 7+3+2+2 || be.Uint16(b[5:]) != 3 || be.Uint16(b[10:]) != 2 {
		t.Fatalf("AUTH layout %x", b)
	}
	// The byte offsets doc.go gives for the version 2 fields.
	b := mustHello(t, Hello{Version: 2, BrokerName: "abc", Epochs: two})
	if n, e1 := be.Uint16(b[41+3:]), be.Uint64(b[43+3+16:]); n != 2 || e1 != 2 {
		t.Fatalf("HELLO v2 entries: count %d, second epoch %d", n, e1)
	}
	b = AppendTruncate(nil, Truncate{Fork: 5, Epoch: 6})
	if be.Uint64(b[1:]) != 5 || be.Uint64(b[9:]) != 6 {
		t.Fatalf("TRUNCATE layout %x", b)
	}
}

func TestFrameErrors(t *testing.T) {
	hello := mustHello(t, Hello{Version: 1, BrokerName: "broker-a"})
	badMagic := append([]byte(nil), hello...)
	badMagic[1] ^= 0xFF
	data := append(AppendDataHeader(nil, 0, 100), make([]byte, 100)...)
	negLen := AppendDataHeader(nil, 0, 0)
	negLen[9] = 0xFF
	negOff := append(AppendDataHeader(nil, -5, 1), 0)
	// A version 2 HELLO whose entry count is over the limit (no entries
	// follow: the count alone must be refused), one with entries out of
	// order, and one cut inside its entries.
	tooMany := mustHello(t, Hello{Version: 2, BrokerName: "b"})
	be.PutUint16(tooMany[len(tooMany)-2:], MaxEpochEntries+1)
	unordered := mustHello(t, Hello{Version: 2, BrokerName: "b", Epochs: []EpochEntry{{1, 0}, {2, 10}}})
	be.PutUint64(unordered[len(unordered)-16:], 1) // second epoch = first
	welcome := mustWelcome(t, Welcome{Version: 2, MasterAddr: "m", Epochs: []EpochEntry{{1, 0}, {2, 10}}})
	negStart := bytes.Clone(welcome)
	negStart[len(negStart)-8] = 0x80
	negFork := AppendTruncate(nil, Truncate{Fork: -1, Epoch: 1})
	negEpoch := AppendTruncate(nil, Truncate{Fork: 1, Epoch: -1})
	cases := []struct {
		name    string
		b       []byte
		maxData int
		want    error
	}{
		{"too many epoch entries", tooMany, 0, ErrFrame},
		{"epoch entries out of order", unordered, 0, ErrFrame},
		{"negative epoch start", negStart, 0, ErrFrame},
		{"truncated entries", welcome[:len(welcome)-5], 0, io.ErrUnexpectedEOF},
		{"truncated entry count", welcome[:len(welcome)-33], 0, io.ErrUnexpectedEOF},
		{"truncate at a negative fork", negFork, 0, ErrFrame},
		{"truncate of a negative epoch", negEpoch, 0, ErrFrame},
		{"truncated truncate", negFork[:10], 0, io.ErrUnexpectedEOF},
		{"unknown kind", []byte{'Z', 0, 0}, 0, ErrFrame},
		{"auth with a bad magic", append([]byte{'U', 0, 0, 0, 0}, 0, 0, 0, 0), 0, ErrFrame},
		{"truncated auth", mustAuth(t, Auth{Authorization: "abc", Date: "20261202T031500Z"})[:12], 0, io.ErrUnexpectedEOF},
		{"bad magic", badMagic, 0, ErrFrame},
		{"truncated hello", hello[:20], 0, io.ErrUnexpectedEOF},
		{"truncated name", hello[:len(hello)-2], 0, io.ErrUnexpectedEOF},
		{"data over the limit", data, 99, ErrFrame},
		{"data of zero bytes", AppendDataHeader(nil, 0, 0), 0, ErrFrame},
		{"data of negative length", negLen, 0, ErrFrame},
		{"data at a negative offset", negOff, 0, ErrFrame},
		{"truncated data", data[:50], 0, io.ErrUnexpectedEOF},
		{"truncated ack", AppendAck(nil, 1, 1)[:9], 0, io.ErrUnexpectedEOF},
		{"empty", nil, 0, io.EOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(c.b), c.maxData, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
		})
	}
	if _, err := AppendAuth(nil, Auth{Authorization: strings.Repeat("x", 1<<16)}); !errors.Is(err, ErrFrame) {
		t.Fatalf("over-long authorization: %v", err)
	}
	if _, err := AppendHello(nil, Hello{BrokerName: strings.Repeat("x", 1<<16)}); !errors.Is(err, ErrFrame) {
		t.Fatalf("over-long name: %v", err)
	}
	if _, err := AppendHello(nil, Hello{Version: 1, BrokerName: "b", Epochs: []EpochEntry{{1, 0}}}); !errors.Is(err, ErrFrame) {
		t.Fatalf("entries in a version 1 HELLO: %v", err)
	}
	if _, err := AppendWelcome(nil, Welcome{Version: 2, Epochs: make([]EpochEntry, MaxEpochEntries+1)}); !errors.Is(err, ErrFrame) {
		t.Fatalf("too many entries: %v", err)
	}
	if _, err := AppendWelcome(nil, Welcome{Version: 2, Epochs: []EpochEntry{{2, 0}, {1, 5}}}); !errors.Is(err, ErrFrame) {
		t.Fatalf("unordered entries: %v", err)
	}
	r := AppendRefuse(nil, Refuse{Reason: strings.Repeat("x", 1<<17)})
	f, err := ReadFrame(bytes.NewReader(r), 0, nil)
	if err != nil || len(f.Refuse.Reason) != 1<<16-1 {
		t.Fatalf("over-long reason: %d bytes, %v", len(f.Refuse.Reason), err)
	}
}

// reencode writes a decoded frame back in its wire form.
func reencode(f Frame) ([]byte, error) {
	switch f.Kind {
	case KindHello:
		return AppendHello(nil, f.Hello)
	case KindWelcome:
		return AppendWelcome(nil, f.Welcome)
	case KindRefuse:
		return AppendRefuse(nil, f.Refuse), nil
	case KindData:
		return append(AppendDataHeader(nil, f.Offset, len(f.Data)), f.Data...), nil
	case KindBeat:
		return AppendBeat(nil, f.Offset, f.Timestamp), nil
	case KindAck:
		return AppendAck(nil, f.Offset, f.Timestamp), nil
	case KindTruncate:
		return AppendTruncate(nil, f.Truncate), nil
	case KindAuth:
		return AppendAuth(nil, f.Auth)
	}
	return nil, errors.New("unknown kind")
}

// FuzzReadFrame: any input either fails cleanly or decodes to a frame whose
// encoding is exactly the bytes consumed.
func FuzzReadFrame(f *testing.F) {
	f.Add(mustHello(f, Hello{Version: 1, BrokerName: "broker-a", BrokerID: 1, MaxOffset: 100, LastStart: 10, LastSize: 90, LastChecksum: 5}))
	f.Add(mustWelcome(f, Welcome{Version: 1, Start: 1, MasterAddr: "a:1"}))
	f.Add(AppendRefuse(nil, Refuse{Code: RefuseTooOld, Reason: "old"}))
	f.Add(append(AppendDataHeader(nil, 8, 3), 1, 2, 3))
	f.Add(AppendBeat(nil, 1, 2))
	f.Add(AppendAck(nil, 3, 4))
	f.Add(mustHello(f, Hello{Version: 2, BrokerName: "b", BrokerID: 2, MaxOffset: 500, LastStart: 400, LastSize: 100,
		Epochs: []EpochEntry{{1, 0}, {2, 100}, {3, 100}}}))
	f.Add(mustWelcome(f, Welcome{Version: 2, Start: 100, Epoch: 3, MasterAddr: "m:1", Epochs: []EpochEntry{{1, 0}, {3, 100}}}))
	f.Add(AppendTruncate(nil, Truncate{Fork: 100, Epoch: 3}))
	f.Add(mustAuth(f, Auth{Authorization: "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=00", Date: "20261202T031500Z"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		fr, err := ReadFrame(r, 1<<16, nil)
		if err != nil {
			return
		}
		used := len(b) - r.Len()
		enc, err := reencode(fr)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", fr, err)
		}
		if !bytes.Equal(enc, b[:used]) {
			t.Fatalf("re-encoded %x, consumed %x", enc, b[:used])
		}
	})
}
