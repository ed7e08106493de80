//go:build unix

package frame

import (
	"errors"
	"net"
	"syscall"

	"github.com/bolide-mq/bolide/internal/rawconn"
)

// peerClosed reports whether the server has closed or reset the TCP
// connection nc, without blocking and without taking any byte: a peek of
// one byte that finds the end of the stream or an error. Bytes waiting, or
// none yet, mean it is open.
func peerClosed(nc net.Conn) bool {
	rc := rawconn.Of(nc)
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
