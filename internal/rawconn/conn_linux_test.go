package rawconn_test

import (
	"net"
	"testing"

	"github.com/bolide-mq/bolide/internal/rawconn"
)

// checkWrapped: on Linux, Wrap makes a TCP connection a Conn.
func checkWrapped(t *testing.T, c net.Conn) {
	t.Helper()
	if _, ok := c.(*rawconn.Conn); !ok {
		t.Fatalf("Wrap gave %T, want *rawconn.Conn", c)
	}
}
