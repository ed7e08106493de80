package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
)

// Slave is a slave broker of one of the cluster's groups, running in the
// test process. It learns its master's HA address from the NameServers
// unless its options set Replication.MasterHAAddr.
type Slave struct {
	c    *Cluster
	mu   sync.Mutex
	opts broker.Options
	b    *server.Server
}

// StartSlave starts a slave with broker id id for group i: the group's
// broker options with its own directory and ports, adjusted by mutate.
// It is stopped at the test's cleanup (before the cluster).
func (c *Cluster) StartSlave(group int, id int64, mutate ...func(*broker.Options)) *Slave {
	c.t.Helper()
	if id <= 0 {
		c.t.Fatalf("cluster: slave id %d must be > 0", id)
	}
	c.mu.Lock()
	bo := c.brokerOpts[group]
	c.mu.Unlock()
	dir := c.t.TempDir()
	bo.StoreDir = dir
	bo.Store = broker.DefaultOptions(dir).Store
	bo.Store.CommitLog.SegmentSize = c.brokerOpts[group].Store.CommitLog.SegmentSize
	bo.Store.CommitLog.FlushMode = c.brokerOpts[group].Store.CommitLog.FlushMode
	bo.Store.ConsumeQueue = c.brokerOpts[group].Store.ConsumeQueue
	bo.Store.Index = c.brokerOpts[group].Store.Index
	bo.ListenAddr = "127.0.0.1:0"
	bo.AdvertiseAddr = ""
	bo.BrokerID = id
	bo.Replication.HAListenAddr = "127.0.0.1:0"
	bo.Replication.MasterHAAddr = ""
	if c.opts.Membership {
		bo.GossipAddr = "127.0.0.1:0"
	}
	for _, f := range mutate {
		f(&bo)
	}
	s := &Slave{c: c, opts: bo}
	s.Start()
	c.t.Cleanup(s.Stop)
	return s
}

// Start starts (or restarts, on the same address and directory) the slave.
func (s *Slave) Start() *server.Server {
	s.c.t.Helper()
	s.mu.Lock()
	bo := s.opts
	s.mu.Unlock()
	var b *server.Server
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		b, err = server.New(bo, s.c.log.Named(fmt.Sprintf("%s-%d", bo.BrokerName, bo.BrokerID)))
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		s.c.t.Fatalf("cluster: slave %s/%d: %v", bo.BrokerName, bo.BrokerID, err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		s.c.t.Fatalf("cluster: slave %s/%d: %v", bo.BrokerName, bo.BrokerID, err)
	}
	s.mu.Lock()
	s.b = b
	s.opts.ListenAddr = b.Addr()
	s.mu.Unlock()
	return b
}

// Broker returns the running slave (nil while stopped).
func (s *Slave) Broker() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

// Options returns the slave's options.
func (s *Slave) Options() broker.Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts
}

// Stop stops the slave cleanly.
func (s *Slave) Stop() {
	s.mu.Lock()
	b := s.b
	s.b = nil
	s.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil {
			s.c.t.Errorf("cluster: stop slave %s/%d: %v", s.opts.BrokerName, s.opts.BrokerID, err)
		}
	}
}

// Options returns broker group i's options (as last started).
func (c *Cluster) Options(i int) broker.Options {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokerOpts[i]
}
