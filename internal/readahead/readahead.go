// Package readahead is the buffered reader of a server connection whose
// requests are served on the goroutine that reads them.
//
// Such a reader does not read while it serves, so what the client sends
// meanwhile waits in the kernel's receive buffer. With large requests in
// flight (batches of 64 KiB and more, a dozen of them pipelined) that
// buffer fills: the client's sends stall on the receive window, and the
// client spends its CPU on blocked writes, write-readiness waits and
// wake-ups instead of on messages (a quarter more CPU per message for
// RocketMQ's Java client, measured). A Reader therefore reads ahead in
// large gulps when the peer keeps it busy: it starts every connection on a
// small buffer of its own, moves to a large one, taken from a pool shared
// by all connections, as soon as a read fills the small one (the socket
// had more), and gives the large one back when it has served all it read
// and its last read emptied the socket, before reading again. So a
// connection waiting for its client holds only its small buffer, and a
// busy one at most Large bytes of requests it has read and not yet served.
//
// It has the subset of bufio.Reader that frame readers use: Read, Peek,
// Discard and Buffered, with the same meaning.
package readahead

import (
	"bufio"
	"errors"
	"io"
	"sync"
)

// Large is the size of the buffer a busy connection reads into.
const Large = 1 << 20

var largePool = sync.Pool{New: func() any { b := make([]byte, Large); return &b }}

// Reader buffers reads from rd. It is not safe for concurrent use.
type Reader struct {
	rd    io.Reader
	small []byte  // the connection's own buffer
	large *[]byte // from largePool while the connection is busy, else nil
	buf   []byte  // small or *large
	r, w  int     // buf[r:w] is buffered
	err   error   // the read error not yet returned
	// lastFull: the latest read of rd filled all the space it was given
	// (the socket may hold more).
	lastFull bool
}

// New returns a Reader of rd whose own buffer holds size bytes (at least
// 16, at most Large).
func New(rd io.Reader, size int) *Reader {
	size = min(max(size, 16), Large)
	small := make([]byte, size)
	return &Reader{rd: rd, small: small, buf: small}
}

// Buffered returns how many bytes can be read without reading rd.
func (b *Reader) Buffered() int { return b.w - b.r }

// Release gives the large buffer back to the pool, dropping what it still
// holds: for a connection that is done.
func (b *Reader) Release() {
	if b.large != nil {
		b.toSmall()
	}
}

func (b *Reader) toSmall() {
	largePool.Put(b.large)
	b.large = nil
	b.buf = b.small
	b.r, b.w = 0, 0
}

// fill reads once into the free space, after choosing the buffer: the
// large one when the previous read filled the small one, back to the small
// one when everything in the large one has been served and the previous
// read emptied the socket (so this read may be the one that waits for an
// idle client).
func (b *Reader) fill() {
	switch {
	case b.large == nil && b.lastFull:
		lb := largePool.Get().(*[]byte)
		b.w = copy(*lb, b.buf[b.r:b.w])
		b.r = 0
		b.large, b.buf = lb, *lb
	case b.large != nil && b.r == b.w && !b.lastFull:
		b.toSmall()
	}
	if b.r > 0 {
		b.w = copy(b.buf, b.buf[b.r:b.w])
		b.r = 0
	}
	const maxEmptyReads = 100
	for i := 0; i < maxEmptyReads; i++ {
		n, err := b.read(b.buf[b.w:])
		b.w += n
		if err != nil {
			b.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	b.err = io.ErrNoProgress
}

// read reads rd once into p and notes how full the read was.
func (b *Reader) read(p []byte) (int, error) {
	n, err := b.rd.Read(p)
	if n < 0 || n > len(p) {
		panic("readahead: invalid count from Read")
	}
	b.lastFull = n == len(p)
	return n, err
}

func (b *Reader) readErr() error {
	err := b.err
	b.err = nil
	return err
}

// Read reads into p as bufio.Reader.Read does: from the buffer when it
// holds something, else with at most one read of rd: straight into p when
// p is at least as large as the small buffer and the previous read did not
// fill its space, else into the buffer (the large one when it did).
func (b *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if b.Buffered() > 0 {
			return 0, nil
		}
		return 0, b.readErr()
	}
	if b.r == b.w {
		if b.err != nil {
			return 0, b.readErr()
		}
		if len(p) >= len(b.buf) && b.large == nil && !b.lastFull {
			return b.read(p)
		}
		b.fill()
		if b.r == b.w {
			return 0, b.readErr()
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// Peek returns the next n bytes without advancing the reader, reading rd
// as needed; they stay valid until the next call. An error says why fewer
// than n bytes are returned (bufio.ErrBufferFull when n exceeds the small
// buffer).
func (b *Reader) Peek(n int) ([]byte, error) {
	if n < 0 {
		return nil, errors.New("readahead: negative peek")
	}
	if n > len(b.small) {
		return b.buf[b.r:b.w], bufio.ErrBufferFull
	}
	for b.w-b.r < n && b.err == nil {
		b.fill()
	}
	if b.w-b.r < n {
		return b.buf[b.r:b.w], b.readErr()
	}
	return b.buf[b.r : b.r+n], nil
}

// Discard skips the next n bytes, reading rd as needed, and returns how
// many it skipped.
func (b *Reader) Discard(n int) (int, error) {
	if n < 0 {
		return 0, errors.New("readahead: negative discard")
	}
	done := 0
	for {
		skip := min(b.w-b.r, n-done)
		b.r += skip
		done += skip
		if done == n {
			return done, nil
		}
		if b.err != nil {
			return done, b.readErr()
		}
		b.fill()
	}
}
