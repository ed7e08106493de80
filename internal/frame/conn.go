package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
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
	// DialTimeout bounds a client's connect and handshake (5 s).
	DialTimeout time.Duration
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

// readFrame reads one frame. The payload is read into buf when it fits
// (aliasing it), else into a new slice.
func readFrame(r *bufio.Reader, buf []byte, max int) (Header, []byte, error) {
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
func frameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < lengthSize {
		return false
	}
	b, _ := r.Peek(lengthSize)
	return uint64(n) >= lengthSize+uint64(binary.BigEndian.Uint32(b))
}

// pooledBufMax bounds the encode buffers kept for reuse: a rare large
// frame does not pin its memory.
const pooledBufMax = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

// putBuf returns the buffer, grown to b, to the pool.
func putBuf(p *[]byte, b []byte) {
	if cap(b) <= pooledBufMax {
		*p = b[:0]
		bufPool.Put(p)
	}
}
