// Package cluster starts real NameServers and brokers in one process, on
// 127.0.0.1 with free ports and temporary directories, for integration
// tests. Everything it starts is stopped by the test's cleanup.
package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/nameserver"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Options shape a test cluster.
type Options struct {
	NameServers  int // 1 by default
	BrokerGroups int // 1 by default; named broker-a, broker-b, ...
	FlushMode    commitlog.FlushMode
	// Membership turns on memberlist gossip (fast profile).
	Membership bool
	// RegisterInterval for brokers (500 ms by default).
	RegisterInterval time.Duration
	// Broker, if set, adjusts each broker's options.
	Broker func(*broker.Options)
	// NameServer, if set, adjusts each NameServer's options.
	NameServer func(*nameserver.Options)
	// Logs routes daemon logs to the test log (off: too chatty for most).
	Logs bool
}

// Cluster is a running test cluster.
type Cluster struct {
	t    testing.TB
	opts Options
	log  *zap.Logger

	NameServers []*nameserver.Server
	mu          sync.Mutex
	brokers     []*server.Server
	brokerOpts  []broker.Options
}

// Start starts the cluster and registers its cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.NameServers <= 0 {
		opts.NameServers = 1
	}
	if opts.BrokerGroups <= 0 {
		opts.BrokerGroups = 1
	}
	if opts.RegisterInterval <= 0 {
		opts.RegisterInterval = 500 * time.Millisecond
	}
	c := &Cluster{t: t, opts: opts, log: zap.NewNop()}
	if opts.Logs {
		c.log = zaptest.NewLogger(t)
	}
	// The data root is made before Stop is registered, so cleanups (run
	// last-registered first) stop the daemons before their files go.
	root := t.TempDir()
	t.Cleanup(c.Stop)
	for i := 0; i < opts.NameServers; i++ {
		o := nameserver.DefaultOptions()
		o.ListenAddr = "127.0.0.1:0"
		o.ScanInterval = 500 * time.Millisecond
		if opts.Membership {
			o.GossipAddr = "127.0.0.1:0"
			o.GossipProfile = "fast"
			if i > 0 {
				o.GossipSeeds = []string{c.NameServers[0].GossipAddr()}
			}
		} else {
			o.GossipAddr = "off"
		}
		if opts.NameServer != nil {
			opts.NameServer(&o)
		}
		ns, err := nameserver.New(o, c.log.Named(fmt.Sprintf("ns%d", i)))
		if err != nil {
			t.Fatalf("cluster: name server: %v", err)
		}
		if err := ns.Start(); err != nil {
			t.Fatalf("cluster: name server: %v", err)
		}
		c.NameServers = append(c.NameServers, ns)
	}
	for i := 0; i < opts.BrokerGroups; i++ {
		name := fmt.Sprintf("broker-%c", 'a'+i)
		bo := broker.DefaultOptions(filepath.Join(root, name))
		bo.BrokerName = name
		bo.ListenAddr = "127.0.0.1:0"
		bo.NameServers = c.NameServerAddrs()
		bo.RegisterInterval = opts.RegisterInterval
		bo.Store.CommitLog.SegmentSize = 64 << 20
		bo.Store.CommitLog.FlushMode = opts.FlushMode
		bo.Store.ConsumeQueue.UnitsPerFile = 100_000
		bo.Store.Index.SlotCount = 100_000
		bo.Store.Index.MaxEntries = 400_000
		bo.OffsetPersistInterval = 200 * time.Millisecond
		// A restart pins the listen port; the HA port must not be derived
		// from it (port + 1 may be taken), so it is picked afresh.
		bo.Replication.HAListenAddr = "127.0.0.1:0"
		if opts.Membership {
			bo.GossipAddr = "127.0.0.1:0"
			bo.GossipProfile = "fast"
		} else {
			bo.GossipAddr = "off"
		}
		if opts.Broker != nil {
			opts.Broker(&bo)
		}
		c.brokerOpts = append(c.brokerOpts, bo)
		c.brokers = append(c.brokers, nil)
		c.StartBroker(i)
	}
	return c
}

// NameServerAddrs lists the NameServers' gRPC addresses.
func (c *Cluster) NameServerAddrs() []string {
	out := make([]string, len(c.NameServers))
	for i, ns := range c.NameServers {
		out[i] = ns.Addr()
	}
	return out
}

// Broker returns broker group i's master (nil while stopped).
func (c *Cluster) Broker(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[i]
}

// Brokers returns the running brokers.
func (c *Cluster) Brokers() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*server.Server
	for _, b := range c.brokers {
		if b != nil {
			out = append(out, b)
		}
	}
	return out
}

// StartBroker starts (or restarts, on the same address and directory)
// broker group i.
func (c *Cluster) StartBroker(i int) *server.Server {
	c.t.Helper()
	c.mu.Lock()
	bo := c.brokerOpts[i]
	c.mu.Unlock()
	var b *server.Server
	var err error
	// A restarted broker reuses its port; the old socket may linger briefly.
	for attempt := 0; attempt < 50; attempt++ {
		b, err = server.New(bo, c.log.Named(bo.BrokerName))
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("cluster: broker %s: %v", bo.BrokerName, err)
	}
	if err := b.Start(); err != nil {
		c.t.Fatalf("cluster: broker %s: %v", bo.BrokerName, err)
	}
	c.mu.Lock()
	c.brokers[i] = b
	// Pin the port so a restart comes back on the same address.
	c.brokerOpts[i].ListenAddr = b.Addr()
	c.mu.Unlock()
	return b
}

// StopBroker stops broker group i cleanly.
func (c *Cluster) StopBroker(i int) {
	c.mu.Lock()
	b := c.brokers[i]
	c.brokers[i] = nil
	c.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil {
			c.t.Errorf("cluster: stop %s: %v", b.Options().BrokerName, err)
		}
	}
}

// Stop stops every broker, then the NameServers.
func (c *Cluster) Stop() {
	for i := range c.brokerOpts {
		c.StopBroker(i)
	}
	for _, ns := range c.NameServers {
		if err := ns.Close(); err != nil {
			c.t.Errorf("cluster: stop name server: %v", err)
		}
	}
	c.NameServers = nil
}

// dial opens a client connection; the caller closes it.
func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// CreateTopic creates a topic with queues read/write queues on every running
// master and waits until every NameServer routes it to all of them.
func (c *Cluster) CreateTopic(topic string, queues int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	brokers := c.Brokers()
	for _, b := range brokers {
		conn, err := dial(b.Addr())
		if err != nil {
			c.t.Fatal(err)
		}
		resp, err := pb.NewBrokerClient(conn).CreateTopic(ctx, &pb.CreateTopicRequest{
			Topic: &pb.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: broker.PermReadWrite}, Update: true})
		conn.Close()
		if err == nil {
			err = wire.FromStatus(resp.Status)
		}
		if err != nil {
			c.t.Fatalf("cluster: create topic %s on %s: %v", topic, b.Options().BrokerName, err)
		}
	}
	c.WaitFor(10*time.Second, func() error {
		for _, addr := range c.NameServerAddrs() {
			n, err := c.routedBrokers(ctx, addr, topic)
			if err != nil {
				return err
			}
			if n < len(brokers) {
				return fmt.Errorf("%s routes %s to %d of %d brokers", addr, topic, n, len(brokers))
			}
		}
		return nil
	})
}

func (c *Cluster) routedBrokers(ctx context.Context, nsAddr, topic string) (int, error) {
	conn, err := dial(nsAddr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	resp, err := pb.NewNameServerClient(conn).GetRoute(ctx, &pb.GetRouteRequest{Topic: topic})
	if err != nil {
		return 0, err
	}
	if err := wire.FromStatus(resp.Status); err != nil {
		return 0, err
	}
	return len(resp.Route.QueueDatas), nil
}

// WaitFor polls cond every 10 ms until it returns nil or d passes.
func (c *Cluster) WaitFor(d time.Duration, cond func() error) {
	c.t.Helper()
	if err := Poll(d, cond); err != nil {
		c.t.Fatalf("cluster: condition not met within %v: %v", d, err)
	}
}

// Poll calls cond every 10 ms until it returns nil or d passes, and returns
// its last error.
func Poll(d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StoreDir returns broker group i's data directory.
func (c *Cluster) StoreDir(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return filepath.Clean(c.brokerOpts[i].StoreDir)
}
