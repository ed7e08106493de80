//go:build !linux

package rawconn

import "net"

// Wrap returns nc as it is: reads and writes are raw on Linux only.
func Wrap(nc net.Conn) net.Conn { return nc }
