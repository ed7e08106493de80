package remote

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
)

// conns is one gRPC connection per address, opened on first use and kept
// until close.
type conns struct {
	what   string // what the addresses are, for errors ("name server")
	dial   func(addr string) (*grpc.ClientConn, error)
	mu     sync.Mutex
	byAddr map[string]*grpc.ClientConn
	closed bool
}

func newConns(what string, dial func(addr string) (*grpc.ClientConn, error)) conns {
	return conns{what: what, dial: dial, byAddr: make(map[string]*grpc.ClientConn)}
}

// get returns the connection to addr, opening it on first use.
func (c *conns) get(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%s client closed", c.what)
	}
	conn := c.byAddr[addr]
	if conn == nil {
		var err error
		if conn, err = c.dial(addr); err != nil {
			return nil, fmt.Errorf("%s %s: %w", c.what, addr, err)
		}
		c.byAddr[addr] = conn
	}
	return conn, nil
}

// isClosed reports whether close was called.
func (c *conns) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// close closes every connection; get fails from then on.
func (c *conns) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for addr, conn := range c.byAddr {
		errs = append(errs, conn.Close())
		delete(c.byAddr, addr)
	}
	return errors.Join(errs...)
}

// dialer returns how to open a gRPC connection to an address, secured as
// d says.
func dialer(d DialOptions) func(addr string) (*grpc.ClientConn, error) {
	opts := d.GRPCOptions()
	return func(addr string) (*grpc.ClientConn, error) { return grpc.NewClient(addr, opts...) }
}
