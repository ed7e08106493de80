// Package rawconn reads and writes a TCP connection's socket directly.
//
// Conn (Wrap) is a TCP connection whose reads and writes are raw read(2)
// and write(2) calls on its non-blocking socket, waiting in Go's network
// poller (deadlines included) only when the socket has nothing to read or
// no room to write. A net.TCPConn makes the same calls through the
// syscall package, which tells the scheduler that the call may block:
// when the process was idle, that wakes the runtime's monitor thread
// (sysmon), which then polls every 20 µs for a while, and a call that
// lasts long has its processor handed to another thread. On a socket that
// never blocks, neither is needed: synchronous sends cost the broker and
// the client 12–28 % less CPU a message this way (docs/BENCHMARKS.md,
// "2026-12-07, night"). Under the race detector, and on systems other
// than Linux, the calls go through the syscall package as before: the
// race detector learns from it that a write happened before the read that
// took its bytes.
//
// A server that answers a held request from a goroutine that is not the
// connection's (a message's arrival reported by another client's reader,
// a timer) must not wait there for this client to read: that goroutine
// serves others. WriteNow writes only what the socket's send buffer takes
// at once; the caller leaves the rest to a goroutine of its own. Of finds
// the socket of a connection; connections without one (TLS, pipes) are
// written through their net.Conn as before.
package rawconn
