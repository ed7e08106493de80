//go:build unix

package frame

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// peerClosed reports whether the server has closed or reset the TCP
// connection nc, without blocking and without taking any byte: a peek of
// one byte that finds the end of the stream or an error. Bytes waiting, or
// none yet, mean it is open.
func peerClosed(nc net.Conn) bool {
	rc := descriptorOf(nc)
	if rc == nil {
		return false
	}
	var b [1]byte
	closed := false
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		default:
			closed = true
		}
		return true
	})
	return closed || err != nil
}

// descriptorOf is nc's file descriptor access, nil when nc has none (TLS, a
// pipe).
func descriptorOf(nc net.Conn) syscall.RawConn {
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

// writeNow writes to rc what the socket takes without waiting: n bytes of
// b, all of them unless its send buffer filled. err is a failure of the
// connection, not a full buffer.
func writeNow(rc syscall.RawConn, b []byte) (n int, err error) {
	cerr := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, werr := syscall.Write(int(fd), b[n:])
			switch {
			case werr == nil && m > 0:
				n += m
			case werr == nil:
				err = io.ErrShortWrite // a write of nothing
				return true
			case errors.Is(werr, syscall.EAGAIN):
				return true
			case !errors.Is(werr, syscall.EINTR):
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
