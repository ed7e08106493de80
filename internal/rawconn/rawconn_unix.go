//go:build unix

package rawconn

import (
	"io"
	"net"
	"syscall"
)

// Of is nc's file descriptor access, nil when nc has none (TLS, a pipe).
func Of(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// WriteNow writes to rc what the socket takes without waiting: n bytes of
// b, all of them unless its send buffer filled. err is a failure of the
// connection, not a full buffer.
func WriteNow(rc syscall.RawConn, b []byte) (n int, err error) {
	cerr := rc.Write(func(fd uintptr) bool {
		n, _, err = writeSome(fd, b)
		return true
	})
	if err == nil {
		err = cerr
	}
	return n, err
}

// writeSome writes b to the non-blocking descriptor fd until all of it is
// out, the socket's send buffer is full (full), or the write fails: err
// is then a syscall.Errno, or io.ErrShortWrite for a write of nothing.
func writeSome(fd uintptr, b []byte) (n int, full bool, err error) {
	for n < len(b) {
		m, e := rawWrite(fd, b[n:])
		switch {
		case e == 0 && m > 0:
			n += m
		case e == 0:
			return n, false, io.ErrShortWrite
		case e == syscall.EAGAIN:
			return n, true, nil
		case e != syscall.EINTR:
			return n, false, e
		}
	}
	return n, false, nil
}
