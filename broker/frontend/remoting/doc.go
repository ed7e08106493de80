// Package remoting is the broker's front end for RocketMQ's remoting
// protocol (internal/remoting): what Apache RocketMQ's clients — Java, Go,
// C++, Python — and its admin tool send to a broker, served by the broker
// core (package broker). A RocketMQ connection opens with a frame length
// whose first byte is 0 (frames are under 16 MiB), which is how the port's
// Mux tells it from gRPC ("PRI ") and Bolide's frames ("BLD1").
//
// Each request code has a handler, registered in the file of its area:
// session.go (heartbeats, the client registry, the broker's calls to the
// client), send.go, txn.go and sendback.go (the producer side), pull.go and
// offsets.go (the consumer side), admin*.go (what mqadmin sends). A code
// without a handler is answered REQUEST_CODE_NOT_SUPPORTED, never by
// closing the connection. Errors of the core (internal/errcode) become
// RocketMQ's response codes in codes.go.
package remoting
