//go:build !linux

package rawconn_test

// wrappedType is what Wrap makes of a TCP connection off Linux: the
// connection as it was.
const wrappedType = "*net.TCPConn"
