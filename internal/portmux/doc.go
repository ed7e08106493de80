// Package portmux serves several protocols on one TCP port. Every protocol
// served this way has its client speak first, so a connection's first
// HeadLen bytes tell them apart:
//
//	"PRI "        HTTP/2 preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"): gRPC
//	"BLD1"        Bolide's frame protocol (internal/frame)
//	0x00 x x x    RocketMQ remoting: a big-endian frame length under 16 MiB
//	0x16 0x03 x x TLS (with SetTLS): any of the above inside
//
// The Mux accepts the port's connections and reads each one's first HeadLen
// bytes (waiting at most SniffTimeout). The connection, those bytes replayed,
// goes to the first Protocol whose Claims accepts them; one that no protocol
// claims is closed.
//
// With SetTLS the port takes TLS too, for every protocol: a connection
// whose first byte is 0x16 (a TLS record holding a handshake message: the
// ClientHello) is served TLS. The handshake, then the first HeadLen bytes
// of the decrypted stream, must arrive within the same SniffTimeout; the
// decrypted connection is then sorted by those bytes as above, so gRPC
// (with ALPN "h2"), frames and remoting all run inside TLS. None of them
// opens with 0x16 in the clear (remoting's first byte is 0x00), and the
// bytes inside TLS are never taken for TLS again. Without SetTLS a
// connection opening with 0x16 is unclaimed and closed.
//
// SetTLS sets the port's mode:
//
//   - Permissive: TLS and plain text, as above.
//   - Off: plain text only; a connection opening with 0x16 is closed.
//   - Enforcing: TLS only. A plain-text connection is still sorted by its
//     head; when the protocol claiming it implements Refuser, its
//     RefusePlaintext gets the connection (head replayed, RefuseTimeout
//     deadline) to tell the client, in that protocol, to connect with TLS;
//     then the connection is closed. At most MaxRefusing answers run at
//     once; beyond, a refused connection is closed without one.
//
// Every refused connection is reported to TLS.Refused (a metric) and
// logged as a WARN at most once per RefuseLogInterval.
//
// Each Protocol serves the connections it claimed from a
// net.Listener of its own, so a server written for a plain listener (a
// grpc.Server, say) needs no change.
//
// The broker (broker/frontend, broker/server) and the NameServer serve their
// ports through it, in the mode of --tls-mode (Permissive by default;
// certificates from internal/tlsconf: Source.PortTLS; tlsconf.Mode is Mode).
package portmux
