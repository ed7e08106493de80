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
//
// # Access control
//
// Before a handler runs, access.go checks the request against the
// broker's guard (package auth). With ACL on (--acl) every request must
// carry an ACL 1.0 signature (extFields AccessKey and Signature, as the
// Java and Go clients and mqadmin send them with credentials), and its
// code's class in accessTable decides the rest: data requests need topic
// and group permissions (a send PUB on its topic, a pull or an offset
// commit SUB on the topic and the group, a heartbeat SUB on each group and
// topic it subscribes to), reads of the broker's state any authenticated
// user, administrative requests (topics, groups, offset resets,
// configuration) an admin user. A code the table does not name is refused.
// With ACL off nothing is checked but the administrative requests, which
// are served to loopback callers only unless --allow-remote-admin. Every
// refusal is NO_PERMISSION (16) with the reason as remark, and nothing is
// done. UPDATE_BROKER_CONFIG changes only the keys of an allow-list
// (internal/remoting's ConfigAllowList), fed from the core's runtime keys.
package remoting
