// Package frame is Bolide's lean data-path protocol: request/response
// frames carrying protobuf messages over one plain TCP connection, served on
// the broker's and the NameServer's gRPC port. It exists because a gRPC call costs far more CPU
// than a send itself (HTTP/2 framing, flow control, several goroutine
// hand-offs per call on each side); a frame costs one write and one read.
// Only the calls made per message or per topic use it: a broker's Send
// and Pull, a NameServer's GetRoute (a client asks it once for each topic
// it uses, and again for each one every 30 s), and Auth to identify the
// caller; everything else stays on gRPC.
//
// The package has three parts: pure encoding and decoding over []byte
// (format.go, no I/O), the server side of a connection (server.go) and the
// client side (client.go).
//
// # Opening a connection
//
// The client speaks first, with 4 bytes of magic; the server answers with
// the same 4 bytes:
//
//	client → server   'B' 'L' 'D' '1'    (0x42 0x4C 0x44 0x31; '1' is the protocol version)
//	server → client   'B' 'L' 'D' '1'
//
// A server that answers anything else does not speak the protocol (an older
// broker's gRPC server answers with an HTTP/2 SETTINGS frame): the client
// reports ErrNotSupported and its caller uses gRPC instead. A broker or
// NameServer tells the two protocols apart by these first bytes: gRPC clients open with the
// HTTP/2 preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".
//
// # Frames
//
// Then both sides exchange frames. Every integer is big-endian:
//
//	 0                   4         5                   7                       11
//	+-------------------+---------+-------------------+-----------------------+- - - - - - - -+
//	| length     (u32)  | kind u8 | method     (u16)  | request id     (u32)  | payload       |
//	+-------------------+---------+-------------------+-----------------------+- - - - - - - -+
//	                    <------------------------- length bytes ---------------------------->
//
// length counts the bytes after the length field: 7 + the payload size. It
// is at least 7 and at most the maximum frame size (DefaultMaxFrame, 64 MiB,
// the broker's gRPC message limit). A receiver closes the connection on a
// frame outside these bounds or of an unknown kind; a sender refuses to
// write one (ErrTooLarge) and the connection stays usable.
//
// Kinds:
//
//	1 request   client → server: answered by one response or error frame with the same request id
//	2 response  server → client: the payload is the method's response message
//	3 oneway    client → server: a request that is never answered (request id 0)
//	4 error     server → client: the request could not be served (unknown method,
//	            undecodable payload, response over the limit); the payload is a UTF-8
//	            message and the connection stays usable
//	5 cancel    client → server: the caller gave up on request id; empty payload. A
//	            request still running on its own goroutine has its context cancelled,
//	            a parked one is ended, and its answer is dropped by the client.
//
// Methods and their payloads (protobuf, proto/bolidev1, marshalled with
// google.golang.org/protobuf):
//
//	1 Send  pb.SendRequest → pb.SendResponse           (as gRPC Broker.Send)
//	2 Pull  pb.PullRequest → pb.PullResponse           (as gRPC Broker.Pull)
//	3 Auth  pb.FrameAuthRequest → pb.FrameAuthResponse (identifies the caller)
//	4 GetRoute  pb.GetRouteRequest → pb.GetRouteResponse  (as gRPC NameServer.GetRoute; NameServers only)
//
// A failure of the request itself (an unknown topic, a full disk) travels in
// the response's Status, exactly as over gRPC. Responses may come back in
// any order: a request that may wait (a send under sync flush or sync
// replication, a long-polling pull) runs on its own goroutine, or waits
// parked without one (a pull at the end of its queue, answered by the
// arrival of a message), while the connection goes on serving the
// requests behind it.
//
// A broker answers GetRoute, and a NameServer Send and Pull, with an error
// frame (unknown method).
//
// Request ids are chosen by the client, unique among its requests in
// flight on one connection.
//
// # Authentication and TLS
//
// A client with credentials sends an Auth request right after the magic,
// before any other, and waits for its answer:
//
//	authorization  MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>
//	date_time      the signed x-mq-date-time value, UTC, 20060102T150405Z
//
// the same two values bolide.v1's gRPC calls carry as metadata (package
// auth), signed once per connection. The response's Status is OK, or
// UNAUTHENTICATED (1500) for credentials the server refuses; the client
// then closes the connection and reports the refusal to every caller
// (AuthError), and nothing else was sent on it. The server serves Auth
// itself (Options.Authenticate); the identity it establishes is the one
// every later request of the connection is served with, until another
// Auth request replaces it (a failed one leaves the connection
// anonymous). A request on a connection without a successful Auth is
// served anonymously: with ACL on, the broker answers Send and Pull with
// UNAUTHENTICATED in their Status. A server older than the method answers
// it with an error frame (unknown method); the client then goes on
// without authentication, as that server checks none.
//
// With TLS the client runs the TLS handshake first and the whole exchange
// above inside it; the port tells TLS (first byte 0x16) from the
// magic before anything else (internal/portmux).
package frame
