//go:build linux

package rawconn

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn is a TCP connection whose reads and writes are raw system calls on
// its non-blocking socket. See the package comment for why.
type Conn struct {
	net.Conn
	rc   syscall.RawConn
	r, w side
}

// side is the state of one direction's call: the buffer, how much of it
// is done, the error, and the function given to the RawConn (made once: a
// method value made per call is an allocation). mu holds it for one call
// at a time.
type side struct {
	mu  sync.Mutex
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

// Wrap returns a TCP connection as a Conn, and any other nc as it is.
func Wrap(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &Conn{Conn: nc, rc: rc}
	c.r.fn, c.w.fn = c.readFD, c.writeFD
	return c
}

// SyscallConn is the socket's descriptor access.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// Read reads what the socket holds, up to len(p), waiting in the network
// poller while it holds nothing.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.call(&c.r, p, c.rc.Read)
	if err != nil && err != io.EOF {
		err = c.opError("read", err)
	}
	return n, err
}

// Write writes all of p, waiting in the network poller while the socket's
// send buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.call(&c.w, p, c.rc.Write)
	if err != nil {
		err = c.opError("write", err)
	}
	return n, err
}

// call runs s.fn on the socket through the RawConn's Read or Write (run)
// over p.
func (c *Conn) call(s *side, p []byte, run func(func(uintptr) bool) error) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p, s.n, s.err = p, 0, nil
	err := run(s.fn)
	if err == nil {
		err = s.err
	}
	n := s.n
	s.p, s.err = nil, nil
	return n, err
}

// readFD reads once; it returns false to wait for the socket when there
// is nothing to read.
func (c *Conn) readFD(fd uintptr) bool {
	r := &c.r
	for {
		n, e := rawRead(fd, r.p)
		switch e {
		case 0:
			if n == 0 {
				r.err = io.EOF
			}
			r.n = n
			return true
		case syscall.EAGAIN:
			return false
		case syscall.EINTR:
		default:
			r.err = os.NewSyscallError("read", e)
			return true
		}
	}
}

// writeFD writes until the buffer is out; it returns false to wait for
// room in the socket.
func (c *Conn) writeFD(fd uintptr) bool {
	w := &c.w
	n, full, err := writeSome(fd, w.p[w.n:])
	w.n += n
	if full {
		return false
	}
	if e, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError("write", e)
	}
	w.err = err
	return true
}

// opError wraps err as net.Conn's methods do, naming op and both ends (the
// poller's own errors come as "raw-read" or "raw-write", without them).
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
