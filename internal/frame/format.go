package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
)

const (
	// Magic opens a connection (client → server) and accepts it (server →
	// client).
	Magic = "BLD1"
	// HeaderSize is the size of a frame header: length, kind, method and
	// request id.
	HeaderSize = 11
	// DefaultMaxFrame bounds a frame's length field (the bytes after it):
	// the broker's gRPC message limit, a 4 MiB body batch plus headroom.
	DefaultMaxFrame = 64 << 20

	lengthSize = 4
	minLength  = HeaderSize - lengthSize // a frame without payload
)

// OpensWithMagic reports whether a connection's first bytes are the magic:
// how a port shared with other protocols tells a frame connection.
func OpensWithMagic(head []byte) bool {
	return len(head) >= len(Magic) && string(head[:len(Magic)]) == Magic
}

// Kind says what a frame is.
type Kind uint8

// The frame kinds (doc.go).
const (
	KindRequest  Kind = 1
	KindResponse Kind = 2
	KindOneway   Kind = 3
	KindError    Kind = 4
	KindCancel   Kind = 5
)

func (k Kind) valid() bool { return k >= KindRequest && k <= KindCancel }

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindResponse:
		return "response"
	case KindOneway:
		return "oneway"
	case KindError:
		return "error"
	case KindCancel:
		return "cancel"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Method names the call a request makes.
type Method uint16

// The methods (doc.go). A number is never reused for another call.
const (
	MethodSend Method = 1
	MethodPull Method = 2
	// MethodAuth is served by the Server itself (Options.Authenticate),
	// not by a Handler.
	MethodAuth Method = 3
	// MethodGetRoute is served by NameServers, not by brokers.
	MethodGetRoute Method = 4
)

// String names the method.
func (m Method) String() string {
	switch m {
	case MethodSend:
		return "Send"
	case MethodPull:
		return "Pull"
	case MethodAuth:
		return "Auth"
	case MethodGetRoute:
		return "GetRoute"
	}
	return "method(" + strconv.Itoa(int(m)) + ")"
}

// Header is a decoded frame header.
type Header struct {
	Kind   Kind
	Method Method
	ID     uint32
	// Size is the payload size: the length field minus 7.
	Size int
}

var (
	// ErrTooLarge: a frame longer than the maximum frame size. A sender
	// gets it before writing anything; a receiver closes the connection.
	ErrTooLarge = errors.New("frame: frame too large")
	// ErrMalformed: bytes that are not a frame (a length below 7, an
	// unknown kind, a kind the receiver never gets).
	ErrMalformed = errors.New("frame: malformed frame")
	// ErrShort: the bytes end before the frame does.
	ErrShort = errors.New("frame: incomplete frame")
)

// AppendHeader appends the header of a frame with h.Size payload bytes.
func AppendHeader(dst []byte, h Header) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(minLength+h.Size))
	dst = append(dst, byte(h.Kind))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Method))
	return binary.BigEndian.AppendUint32(dst, h.ID)
}

// AppendFrame appends a whole frame: h's header (h.Size is taken from
// payload) and the payload.
func AppendFrame(dst []byte, h Header, payload []byte) []byte {
	h.Size = len(payload)
	return append(AppendHeader(dst, h), payload...)
}

// Appender is a message that writes its own protobuf encoding: a
// hand-written encoder of a hot message (internal/hotwire), used in place
// of protobuf's reflection. AppendProto appends the encoding to dst.
type Appender interface {
	proto.Message
	AppendProto(dst []byte) []byte
}

// Unmarshaler is a message that decodes its own protobuf encoding, as
// proto.Unmarshal would; Client.Call uses it for a response.
type Unmarshaler interface {
	proto.Message
	UnmarshalProto(b []byte) error
}

// AppendMessage appends a frame whose payload is m marshalled with
// protobuf, or by m itself if it is an Appender (h.Size is ignored). When
// the frame would be longer than max it returns dst unchanged and an error
// matching ErrTooLarge.
func AppendMessage(dst []byte, h Header, m proto.Message, max int) ([]byte, error) {
	start := len(dst)
	h.Size = 0
	var out []byte
	if a, ok := m.(Appender); ok {
		out = a.AppendProto(AppendHeader(dst, h))
	} else {
		var err error
		if out, err = (proto.MarshalOptions{}).MarshalAppend(AppendHeader(dst, h), m); err != nil {
			return dst[:start], fmt.Errorf("frame: marshal %s: %w", h.Method, err)
		}
	}
	length := len(out) - start - lengthSize
	if length > max {
		return dst[:start], sizeError(int64(length), max)
	}
	binary.BigEndian.PutUint32(out[start:], uint32(length))
	return out, nil
}

// SetID rewrites the request id of the frame that starts frame.
func SetID(frame []byte, id uint32) {
	binary.BigEndian.PutUint32(frame[7:HeaderSize], id)
}

// ParseHeader decodes the header at the start of b and checks its length
// against max. It needs HeaderSize bytes (ErrShort otherwise).
func ParseHeader(b []byte, max int) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d of %d header bytes", ErrShort, len(b), HeaderSize)
	}
	length := binary.BigEndian.Uint32(b)
	h := Header{
		Kind:   Kind(b[4]),
		Method: Method(binary.BigEndian.Uint16(b[5:7])),
		ID:     binary.BigEndian.Uint32(b[7:HeaderSize]),
	}
	switch {
	case length < minLength:
		return Header{}, fmt.Errorf("%w: length %d is below the header's %d bytes", ErrMalformed, length, minLength)
	case uint64(length) > uint64(max):
		return Header{}, sizeError(int64(length), max)
	case !h.Kind.valid():
		return Header{}, fmt.Errorf("%w: unknown %s", ErrMalformed, h.Kind)
	}
	h.Size = int(length) - minLength
	return h, nil
}

// Decode decodes the frame at the start of b: its header, its payload
// (aliasing b) and the number of bytes it takes. It fails with ErrShort
// when b ends before the frame, and with ErrMalformed or ErrTooLarge when
// b does not start with a frame within max.
func Decode(b []byte, max int) (Header, []byte, int, error) {
	h, err := ParseHeader(b, max)
	if err != nil {
		return Header{}, nil, 0, err
	}
	n := HeaderSize + h.Size
	if len(b) < n {
		return Header{}, nil, 0, fmt.Errorf("%w: %d of %d bytes", ErrShort, len(b), n)
	}
	return h, b[HeaderSize:n:n], n, nil
}

func sizeError(length int64, max int) error {
	return fmt.Errorf("%w: %d bytes exceed the limit of %d", ErrTooLarge, length, max)
}
