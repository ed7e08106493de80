package nameserver

import (
	"net"

	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
)

// With --tls-mode enforcing a plain-text client of the NameServer's port
// is told, in its own protocol, to connect with TLS (internal/portmux
// calls RefusePlaintext, then closes the connection): a gRPC client's
// calls fail with FailedPrecondition, a remoting client's first request
// gets SYSTEM_ERROR (1), both with the remark "this server accepts TLS
// only (--tls-mode enforcing): connect with TLS".

// RefusePlaintext answers a plain-text gRPC client.
func (grpcProtocol) RefusePlaintext(conn net.Conn, _ []byte) { plaintext.GRPC(conn) }

// RefusePlaintext answers a plain-text remoting client.
func (remotingProtocol) RefusePlaintext(conn net.Conn, _ []byte) { plaintext.Remoting(conn) }
