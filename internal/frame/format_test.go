package frame

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The layout of doc.go, byte for byte.
func TestLayout(t *testing.T) {
	got := AppendFrame(nil, Header{Kind: KindRequest, Method: MethodSend, ID: 0x01020304}, []byte("hi"))
	want := []byte{
		0x00, 0x00, 0x00, 0x09, // length: 7 + 2
		0x01,       // kind: request
		0x00, 0x01, // method: Send
		0x01, 0x02, 0x03, 0x04, // request id
		'h', 'i',
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame % x, want % x", got, want)
	}
	if Magic != "\x42\x4c\x44\x31" {
		t.Fatalf("magic %q", Magic)
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, tt := range []struct {
		name    string
		h       Header
		payload []byte
	}{
		{"request", Header{Kind: KindRequest, Method: MethodSend, ID: 1}, []byte("send")},
		{"response", Header{Kind: KindResponse, Method: MethodPull, ID: 1<<32 - 1}, bytes.Repeat([]byte{0xab}, 1000)},
		{"oneway", Header{Kind: KindOneway, Method: MethodSend}, []byte{0}},
		{"error", Header{Kind: KindError, Method: 999, ID: 7}, []byte("unknown method 999")},
		{"cancel", Header{Kind: KindCancel, Method: MethodPull, ID: 42}, nil},
		{"empty response", Header{Kind: KindResponse, Method: MethodSend, ID: 3}, []byte{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendFrame([]byte("prefix"), tt.h, tt.payload)[len("prefix"):]
			b = append(b, "next frame"...)
			h, payload, n, err := Decode(b, DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.h
			want.Size = len(tt.payload)
			if h != want || !bytes.Equal(payload, tt.payload) || n != HeaderSize+len(tt.payload) {
				t.Fatalf("decoded %+v %q (%d bytes), want %+v %q", h, payload, n, want, tt.payload)
			}
			if cap(payload) != len(payload) {
				t.Fatalf("payload capacity %d reaches past the frame", cap(payload))
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := AppendFrame(nil, Header{Kind: KindRequest, Method: MethodSend, ID: 1}, []byte("abcd"))
	withLength := func(l byte) []byte { return []byte{0, 0, 0, l, 1, 0, 1, 0, 0, 0, 1} }
	withKind := func(k byte) []byte { return []byte{0, 0, 0, 7, k, 0, 1, 0, 0, 0, 1} }
	for _, tt := range []struct {
		name string
		b    []byte
		max  int
		want error
	}{
		{"empty", nil, DefaultMaxFrame, ErrShort},
		{"part of a header", valid[:HeaderSize-1], DefaultMaxFrame, ErrShort},
		{"part of a payload", valid[:len(valid)-1], DefaultMaxFrame, ErrShort},
		{"length below the header", withLength(6), DefaultMaxFrame, ErrMalformed},
		{"zero length", withLength(0), DefaultMaxFrame, ErrMalformed},
		{"kind 0", withKind(0), DefaultMaxFrame, ErrMalformed},
		{"kind 6", withKind(6), DefaultMaxFrame, ErrMalformed},
		{"over the limit", valid, 10, ErrTooLarge},
		{"length 4 GiB", []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0, 0, 0, 1}, DefaultMaxFrame, ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := Decode(tt.b, tt.max)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
	// The limit counts the bytes after the length field.
	if _, _, _, err := Decode(valid, len(valid)-lengthSize); err != nil {
		t.Fatalf("a frame of exactly the limit: %v", err)
	}
}

func TestAppendMessage(t *testing.T) {
	m := wrapperspb.String("hello")
	b, err := AppendMessage([]byte("x"), Header{Kind: KindRequest, Method: MethodPull, ID: 9, Size: 12345}, m, DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	h, payload, n, err := Decode(b[1:], DefaultMaxFrame)
	if err != nil || n != len(b)-1 || h.Kind != KindRequest || h.Method != MethodPull || h.ID != 9 {
		t.Fatalf("decoded %+v (%d of %d bytes): %v", h, n, len(b)-1, err)
	}
	var got wrapperspb.StringValue
	if err := proto.Unmarshal(payload, &got); err != nil || got.Value != "hello" {
		t.Fatalf("payload %q: %v", got.Value, err)
	}
	SetID(b[1:], 77)
	if h, _ := ParseHeader(b[1:], DefaultMaxFrame); h.ID != 77 {
		t.Fatalf("id %d after SetID(77)", h.ID)
	}

	big := wrapperspb.Bytes(make([]byte, 100))
	dst := []byte("keep")
	out, err := AppendMessage(dst, Header{Kind: KindRequest, Method: MethodSend}, big, 50)
	if !errors.Is(err, ErrTooLarge) || string(out) != "keep" {
		t.Fatalf("oversize: %q, %v; want dst unchanged and ErrTooLarge", out, err)
	}
}
