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
}

func TestFrameErrors(t *testing.T) {
	hello := mustHello(t, Hello{Version: 1, BrokerName: "broker-a"})
	badMagic := append([]byte(nil), hello...)
	badMagic[1] ^= 0xFF
	data := append(AppendDataHeader(nil, 0, 100), make([]byte, 100)...)
	negLen := AppendDataHeader(nil, 0, 0)
	negLen[9] = 0xFF
	negOff := append(AppendDataHeader(nil, -5, 1), 0)
	cases := []struct {
		name    string
		b       []byte
		maxData int
		want    error
	}{
		{"unknown kind", []byte{'Z', 0, 0}, 0, ErrFrame},
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
	if _, err := AppendHello(nil, Hello{BrokerName: strings.Repeat("x", 1<<16)}); !errors.Is(err, ErrFrame) {
		t.Fatalf("over-long name: %v", err)
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
