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
		for n < len(b) {
			m, werr := rawWrite(fd, b[n:])
			switch {
			case werr == 0 && m > 0:
				n += m
			case werr == 0:
				err = io.ErrShortWrite // a write of nothing
				return true
			case werr == syscall.EAGAIN:
				return true
			case werr != syscall.EINTR:
				err = werr
				return true
			}
		}
		return true
	})
	if err == nil {
		err = cerr
	}
	return n, err
}
