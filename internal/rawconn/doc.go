// Package rawconn writes to a TCP connection's socket without waiting.
//
// A server that answers a held request from a goroutine that is not the
// connection's (a message's arrival reported by another client's reader,
// a timer) must not wait there for this client to read: that goroutine
// serves others. WriteNow writes only what the socket's send buffer takes
// at once; the caller leaves the rest to a goroutine of its own. Of finds
// the socket of a connection; connections without one (TLS, pipes) are
// written through their net.Conn as before.
package rawconn
