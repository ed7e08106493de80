// Package portmux serves several protocols on one TCP port. Every protocol
// served this way has its client speak first, so a connection's first
// HeadLen bytes tell them apart:
//
//	"PRI "        HTTP/2 preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"): gRPC
//	"BLD1"        Bolide's frame protocol (internal/frame)
//	0x00 x x x    RocketMQ remoting: a big-endian frame length under 16 MiB
//
// The Mux accepts the port's connections and reads each one's first HeadLen
// bytes (waiting at most SniffTimeout). The connection, those bytes replayed,
// goes to the first Protocol whose Claims accepts them; one that no protocol
// claims is closed. Each Protocol serves the connections it claimed from a
// net.Listener of its own, so a server written for a plain listener (a
// grpc.Server, say) needs no change.
//
// The broker (broker/frontend, broker/server) and the NameServer serve their
// ports through it.
package portmux
