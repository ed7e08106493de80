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
	rc syscall.RawConn

	// rmu holds the read state below for one Read at a time; rfn is
	// c.readFD, made once (a method value made per call is an allocation).
	rmu  sync.Mutex
	rp   []byte
	rn   int
	rerr error
	rfn  func(uintptr) bool

	wmu  sync.Mutex
	wp   []byte
	wn   int
	werr error
	wfn  func(uintptr) bool
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
	c.rfn, c.wfn = c.readFD, c.writeFD
	return c
}

// SyscallConn is the socket's descriptor access.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// Read reads what the socket holds, up to len(p), waiting in the network
// poller while it holds nothing.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rp, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.rfn)
	n := c.rn
	if err == nil {
		err = c.rerr
	}
	c.rp, c.rerr = nil, nil
	if err != nil && err != io.EOF {
		err = c.opError("read", err)
	}
	return n, err
}

// readFD reads once; it returns false to wait for the socket when there
// is nothing to read.
func (c *Conn) readFD(fd uintptr) bool {
	for {
		n, e := rawRead(fd, c.rp)
		switch e {
		case 0:
			if n == 0 {
				c.rerr = io.EOF
			}
			c.rn = n
			return true
		case syscall.EAGAIN:
			return false
		case syscall.EINTR:
		default:
			c.rerr = os.NewSyscallError("read", e)
			return true
		}
	}
}

// Write writes all of p, waiting in the network poller while the socket's
// send buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wp, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.wfn)
	n := c.wn
	if err == nil {
		err = c.werr
	}
	c.wp, c.werr = nil, nil
	if err != nil {
		err = c.opError("write", err)
	}
	return n, err
}

// writeFD writes until the buffer is out; it returns false to wait for
// room in the socket.
func (c *Conn) writeFD(fd uintptr) bool {
	for c.wn < len(c.wp) {
		n, e := rawWrite(fd, c.wp[c.wn:])
		switch e {
		case 0:
			if n == 0 {
				c.werr = io.ErrShortWrite
				return true
			}
			c.wn += n
		case syscall.EAGAIN:
			return false
		case syscall.EINTR:
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
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
