package frame

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// FuzzDecode checks that any bytes decode to a frame that encodes back to
// the same bytes, or to one of the package's errors, and that the
// connection reader agrees with the pure decoder. Seeds: testdata/fuzz.
func FuzzDecode(f *testing.F) {
	f.Add(AppendFrame(nil, Header{Kind: KindRequest, Method: MethodSend, ID: 1}, []byte("payload")))
	f.Add(AppendFrame(nil, Header{Kind: KindCancel, Method: MethodPull, ID: 2}, nil))
	auth, err := AppendMessage(nil, Header{Kind: KindRequest, Method: MethodAuth, ID: 1}, &pb.FrameAuthRequest{
		Authorization: "MQv2-HMAC-SHA1 Credential=RocketMQ, SignedHeaders=x-mq-date-time, Signature=2c8b69b1c423d42b583ac151d148f6729237f251",
		DateTime:      "20260101T120000Z"}, 1<<16)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(auth)
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		h, payload, n, err := Decode(data, max)
		if err != nil {
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
		} else {
			if !h.Kind.valid() || n != HeaderSize+len(payload) || n > len(data) || h.Size != len(payload) {
				t.Fatalf("decoded %+v, %d payload bytes, %d of %d bytes", h, len(payload), n, len(data))
			}
			if again := AppendFrame(nil, h, payload); !bytes.Equal(again, data[:n]) {
				t.Fatalf("re-encoded % x, want % x", again, data[:n])
			}
		}

		rh, rpayload, rerr := readFrame(bufio.NewReaderSize(bytes.NewReader(data), 16), nil, max)
		switch {
		case err == nil && (rerr != nil || rh != h || !bytes.Equal(rpayload, payload)):
			t.Fatalf("reader: %+v %q %v; decoder: %+v %q", rh, rpayload, rerr, h, payload)
		case err != nil && rerr == nil:
			t.Fatalf("reader read %+v where the decoder failed: %v", rh, err)
		}
	})
}
