package frame

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Options tune both ends of a connection. Zero fields take the defaults.
type Options struct {
	// MaxFrame bounds the length of a frame sent or received
	// (DefaultMaxFrame).
	MaxFrame int
	// MaxInflight bounds, per connection on a server, the requests running
	// on their own goroutine; the connection is not read while it is
	// reached (1024, as the gRPC send stream).
	MaxInflight int
	// BufferSize is the size of a connection's read and write buffers
	// (64 KiB).
	BufferSize int
	// DialTimeout bounds a client's connect and handshake (5 s), the TLS
	// handshake and the Auth request included.
	DialTimeout time.Duration

	// Authenticate (server) verifies a connection's Auth request
	// (MethodAuth). It returns the context the connection's later requests
	// are served with — ctx, which carries the connection's lifetime and
	// Peer, with the caller's identity added — or an error, sent back in
	// the response's Status (a coded error keeps its code, any other is
	// UNAUTHENTICATED). Each Auth
	// request replaces the connection's identity: after a failed one the
	// connection is served as if it had sent none. Nil: Auth requests are
	// answered OK and change nothing. It runs on the connection's reader,
	// before the requests behind it are read.
	Authenticate func(ctx context.Context, nc net.Conn, req *pb.FrameAuthRequest) (context.Context, error)

	// TLS (client): dial with TLS under this configuration (a copy; an
	// empty ServerName is set to the address's host). Nil: plain TCP.
	TLS *tls.Config
	// Auth (client): when set, every connection sends the Auth request it
	// returns (signed afresh) right after the magic, and is used only once
	// the server accepted it. Nil: no Auth request.
	Auth func() *pb.FrameAuthRequest
}

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = 1024
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 64 << 10
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	return o
}

// bufferedReader is what reading frames takes of a buffered reader: a
// client's bufio.Reader or a server connection's readahead.Reader.
type bufferedReader interface {
	io.Reader
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	Buffered() int
}

// readFrame reads one frame. The payload is read into buf when it fits
// (aliasing it), else into a new slice.
func readFrame(r bufferedReader, buf []byte, max int) (Header, []byte, error) {
	hb, err := r.Peek(HeaderSize)
	if err != nil {
		if len(hb) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, nil, err
	}
	h, err := ParseHeader(hb, max)
	if err != nil {
		return Header{}, nil, err
	}
	_, _ = r.Discard(HeaderSize) // peeked: cannot fail
	payload := buf[:0]
	if cap(buf) < h.Size {
		payload = make([]byte, h.Size)
	}
	payload = payload[:h.Size]
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, nil, fmt.Errorf("read %s payload: %w", h.Kind, err)
	}
	return h, payload, nil
}

// frameBuffered reports whether r holds a whole frame, so that reading it
// will not block.
func frameBuffered(r bufferedReader) bool {
	n := r.Buffered()
	if n < lengthSize {
		return false
	}
	b, _ := r.Peek(lengthSize)
	return uint64(n) >= lengthSize+uint64(binary.BigEndian.Uint32(b))
}

// pooledBufMax bounds the encode buffers kept for reuse: a batch of 64
// messages of 1 KiB (some 70 KB) and a pull's answer of 500 of them (some
// 550 KB, which would otherwise be allocated and zeroed for every pull)
// are reused; a rare larger frame does not pin its memory.
const pooledBufMax = 2 << 20

// keptReadBufMax bounds the request buffer a server connection keeps
// between frames: one per connection, so a thousand connections that each
// sent one large batch keep at most 256 MiB.
const keptReadBufMax = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

// putBuf returns the buffer, grown to b, to the pool.
func putBuf(p *[]byte, b []byte) {
	if cap(b) <= pooledBufMax {
		*p = b[:0]
		bufPool.Put(p)
	}
}
