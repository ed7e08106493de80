package remote

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// maxMessage bounds one gRPC message, as the broker's gRPC server does: a
// 4 MiB body batch plus headroom.
const maxMessage = 64 << 20

// Dial opens a gRPC connection to a broker's client address, secured as
// the first of opts says (none: plain text, no credentials).
func Dial(addr string, opts ...DialOptions) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append(dialOptions(opts).GRPCOptions(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))...)
}

// MasterClient is a slave's replication.MasterClient over bolide.v1's
// BrokerHA.GetMetadata. It keeps one connection, to the last master asked.
// It is also a master's replication.MetadataPusher over
// BrokerHA.PushMetadata, with one connection per slave pushed to.
type MasterClient struct {
	link DialOptions

	mu   sync.Mutex
	conn *grpc.ClientConn
	addr string

	peers conns // pushes, by client address
}

var (
	_ replication.MasterClient   = (*MasterClient)(nil)
	_ replication.MetadataPusher = (*MasterClient)(nil)
)

// PushMetadata gives a master's metadata to the slave at addr.
func (c *MasterClient) PushMetadata(ctx context.Context, addr string, p replication.MetadataPush) error {
	conn, err := c.peers.get(addr)
	if err != nil {
		return err
	}
	resp, err := pb.NewBrokerHAClient(conn).PushMetadata(ctx, v1wire.PushToProto(p))
	if err != nil {
		return err
	}
	return wire.FromStatus(resp.GetStatus())
}

// peerDialer opens push connections to slaves. A slave that was
// unreachable is pushed to again within a second of its return (gRPC's
// default reconnection backoff grows to minutes).
func peerDialer(d DialOptions) func(addr string) (*grpc.ClientConn, error) {
	opts := append(d.GRPCOptions(), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond,
			Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: time.Second}))
	return func(addr string) (*grpc.ClientConn, error) { return grpc.NewClient(addr, opts...) }
}

// NewMasterClient returns a client; it connects on first use, secured as
// the first of opts says (none: plain text, no credentials).
func NewMasterClient(opts ...DialOptions) *MasterClient {
	d := dialOptions(opts)
	return &MasterClient{link: d, peers: newConns("slave", peerDialer(d))}
}

// FetchMetadata asks the master at addr for its metadata.
func (c *MasterClient) FetchMetadata(ctx context.Context, addr string, req replication.MetadataRequest) (replication.Metadata, error) {
	conn, err := c.dial(addr)
	if err != nil {
		return replication.Metadata{}, err
	}
	resp, err := pb.NewBrokerHAClient(conn).GetMetadata(ctx, v1wire.MetadataRequestToProto(req))
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return replication.Metadata{}, err
	}
	return v1wire.MetadataFromProto(resp), nil
}

// dial opens (or reuses) the connection to addr.
func (c *MasterClient) dial(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && c.addr == addr {
		return c.conn, nil
	}
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	conn, err := Dial(addr, c.link)
	if err != nil {
		return nil, err
	}
	c.conn, c.addr = conn, addr
	return conn, nil
}

// Close closes the connection.
func (c *MasterClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	_ = c.peers.close()
	return nil
}
