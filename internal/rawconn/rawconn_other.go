//go:build !unix

package rawconn

import (
	"net"
	"syscall"
)

// Of offers no file descriptor here: callers write through the net.Conn,
// and WriteNow is never called.
func Of(net.Conn) syscall.RawConn { return nil }

// WriteNow writes nothing here.
func WriteNow(syscall.RawConn, []byte) (int, error) { return 0, nil }
