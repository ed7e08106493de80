// Package remoting is RocketMQ's remoting protocol: the TCP protocol that
// Apache RocketMQ's clients (Java, Go, C++, Python), its brokers and its
// admin tool speak to NameServers and brokers. It holds the pure codec
// (frames and headers), the request and response codes, and a connection
// type that serves one end of a connection — the server side through
// Server, the client side through Dial. What each request means is the
// business of the front ends that use it (broker/frontend/remoting, the
// NameServer).
//
// # Frames
//
// Both directions use one frame layout, all integers big-endian:
//
//	+--------------+---------------------------------+--------+------+
//	| int32 length | int32 serType<<24 | headerLen    | header | body |
//	+--------------+---------------------------------+--------+------+
//
// length counts everything after itself (4 + headerLen + bodyLen). The
// high byte of the second word is the header's serialisation: 0 is JSON,
// 1 is RocketMQ's binary layout; the low 24 bits are the header's length.
// The body is whatever follows the header: a message body, a JSON document,
// concatenated stored messages, depending on the request.
//
// # JSON header
//
//	{"code":10,"language":"JAVA","version":453,"opaque":7,"flag":0,
//	 "remark":null,"extFields":{"topic":"T","queueId":"1"},
//	 "serializeTypeCurrentRPC":"JSON"}
//
// code is the request code in a request and the response code in a
// response. opaque pairs a response with its request. flag bit 0 marks a
// response, bit 1 a oneway request (no response wanted; the Go client never
// sets it and expects nothing, so a server answers everything that is not
// marked oneway — except what a handler knows the Go client sends oneway:
// the broker leaves its UPDATE_CONSUMER_OFFSET unanswered). extFields are
// the request's or response's header fields, every value a string:
// integers in decimal, booleans "true"/"false". The decoder here accepts
// numbers, booleans and null as values too (turned into their text, null
// into an absent field); the encoder writes strings only, compact, because
// the Go client drops a frame whose extFields hold anything else. Unknown header keys are ignored.
//
// # Binary header (decoded only)
//
//	int16 code | int8 language | int16 version | int32 opaque | int32 flag |
//	int32 remarkLen | remark | int32 extLen | ext
//
// where ext is a run of int16 keyLen | key | int32 valueLen | value.
// Responses are always written with a JSON header, which every client
// reads whatever it sent.
//
// # Limits
//
// A frame longer than the reader's limit (DefaultMaxFrame, 16 MiB) or
// shorter than its 4-byte header word is refused, and the connection is
// closed: its framing can no longer be trusted. The reader's memory grows
// with the bytes that actually arrive, never with the length a frame
// claims. A frame whose header does not decode gets a SystemError
// response when its opaque could be read, and the connection stays.
//
// # Serving requests
//
// A connection's reader reads frames in order. Requests that never wait
// (Options.Inline) are served on the reader and their answers written
// together when it is about to wait; the others run on goroutines of a
// pool. A Handler that is also a Parker holds the requests it picks
// (Parks: a long-polled pull of a queue with nothing new) without a
// goroutine: Park returns at once, and the answer comes later from
// whichever goroutine ends the wait. Such an answer is written straight to
// the socket, as much as it takes without waiting and only when nothing
// is buffered, the rest by a pool goroutine. Answers are matched to
// requests by opaque, never by order.
//
// # Runtime configuration
//
// UPDATE_BROKER_CONFIG (25) and UPDATE_NAMESRV_CONFIG (318) carry Java
// properties text. ConfigAllowList (config.go) is how a daemon accepts
// them: only the keys it lists, each value checked, all or nothing; any
// other key (paths above all: CVE-2023-33246, CVE-2023-37582) refuses the
// whole update with a message naming the allowed keys.
package remoting
