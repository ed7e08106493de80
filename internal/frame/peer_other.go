//go:build !unix

package frame

import (
	"net"
	"syscall"
)

// peerClosed cannot look at the socket here: a connection the server
// closed is found out by the read of the next answer.
func peerClosed(net.Conn) bool { return false }

// descriptorOf offers no file descriptor here: answers written from other
// goroutines all go through workers, and writeNow is never called.
func descriptorOf(net.Conn) syscall.RawConn { return nil }

func writeNow(syscall.RawConn, []byte) (int, error) { return 0, nil }
