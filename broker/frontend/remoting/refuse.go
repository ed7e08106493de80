package remoting

import (
	"net"

	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
)

// RefusePlaintext tells a plain-text client of a port that accepts TLS
// only (--tls-mode enforcing; internal/portmux calls it) that it must
// connect with TLS, in its own protocol — remoting: the first request is answered with SYSTEM_ERROR (1), with the remark
// "this server accepts TLS only (--tls-mode enforcing): connect with TLS".
func (f *Frontend) RefusePlaintext(conn net.Conn, _ []byte) { plaintext.Remoting(conn) }
