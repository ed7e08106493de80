//go:build !linux

package rawconn_test

import (
	"net"
	"testing"
)

// checkWrapped: off Linux, Wrap leaves a TCP connection as it is.
func checkWrapped(t *testing.T, c net.Conn) {
	t.Helper()
	if _, ok := c.(*net.TCPConn); !ok {
		t.Fatalf("Wrap gave %T, want the *net.TCPConn", c)
	}
}
