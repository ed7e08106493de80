package remoting

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"testing"
)

// FuzzDecodeFrame checks that any bytes either decode to a command that
// encodes and decodes back to the same command, or fail with the package's
// errors — never a panic — and that the stream reader agrees on framing.
// Seeds: testdata/fuzz/FuzzDecodeFrame and the frames below.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, NewRequest(SendMessage, map[string]string{"topic": "T", "queueId": "1"}, []byte("body")))[4:])
	f.Add(jsonFrame(`{"code":310,"extFields":{"a":"PG","n":5,"t":true,"z":null},"flag":0,"language":"JAVA","opaque":1,"remark":null,"x":[{}]}`, "b"))
	f.Add([]byte{1, 0, 0, 13, 0, 105, 9, 1, 61, 0, 0, 0, 3, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := DecodeFrame(frame)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		again := AppendFrame(nil, c)
		d, err := DecodeFrame(again[4:])
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v\n%q", err, again)
		}
		if c.Code != d.Code || c.Opaque != d.Opaque || c.Flag != d.Flag || c.Version != d.Version ||
			!bytes.Equal(c.Body, d.Body) || !maps.Equal(repairedUTF8(c.Ext), d.Ext) || !validUTF8Equal(c.Remark, d.Remark) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, d)
		}
	})
}

// validUTF8Equal compares strings the encoder may have repaired.
func validUTF8Equal(a, b string) bool {
	return a == b || string([]rune(a)) == b
}

// repairedUTF8 is ext as the encoder writes it: JSON text is UTF-8, so an
// invalid byte in a name or a value becomes U+FFFD, as in the remark.
func repairedUTF8(ext map[string]string) map[string]string {
	out := make(map[string]string, len(ext))
	for k, v := range ext {
		out[string([]rune(k))] = string([]rune(v))
	}
	return out
}

// FuzzReadFrame checks the stream reader against any bytes: a frame or an
// error, bounded by the limit, never more memory than the input.
func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, NewRequest(HeartBeat, nil, []byte(`{"clientID":"a"}`))))
	f.Add([]byte{0, 0, 0, 1, 0})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0})
	const max = 1 << 12
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			frame, err := ReadFrame(r, max, nil)
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(frame) < 4 || len(frame) > max {
				t.Fatalf("frame of %d bytes", len(frame))
			}
			_, _ = DecodeFrame(frame)
		}
	})
}
