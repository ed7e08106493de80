package rawconn_test

// wrappedType is what Wrap makes of a TCP connection on Linux.
const wrappedType = "*rawconn.Conn"
