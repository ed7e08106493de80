package client

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/nameserver"
)

// TestSendFollowsControllerFailover: a NameServer with a controller and a
// group of three replicas in controller mode (sync replication). The
// master stops; the controller elects another replica. A producer whose
// periodic route refresh is an hour away keeps sending: its send issued at
// the master's stop succeeds on the new master (its retries fetch the
// route afresh), and so do the next ones.
func TestSendFollowsControllerFailover(t *testing.T) {
	co := controller.LoopbackOptions()
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = "off"
	no.Controller = &co
	ns, err := nameserver.New(no, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	brokers := make([]*server.Server, 3)
	t.Cleanup(func() {
		for _, b := range brokers {
			if b != nil {
				_ = b.Close()
			}
		}
		_ = ns.Close()
	})
	for i := range brokers {
		bo := broker.DefaultOptions(filepath.Join(root, fmt.Sprint("r", i+1)))
		bo.BrokerName = "broker-a"
		bo.BrokerID = int64(i + 1)
		bo.ListenAddr = "127.0.0.1:0"
		bo.NameServers = []string{ns.Addr()}
		bo.RegisterInterval = 500 * time.Millisecond
		bo.GossipAddr = "off"
		bo.Store.CommitLog.SegmentSize = 1 << 20
		bo.MaxMessageSize = 256 << 10
		bo.Store.ConsumeQueue.UnitsPerFile = 10_000
		bo.Store.Index.SlotCount = 10_000
		bo.Store.Index.MaxEntries = 40_000
		bo.Replication.Mode = broker.ReplicationSync
		bo.Replication.InSyncReplicas = 1
		bo.Replication.HAListenAddr = "127.0.0.1:0"
		bo.Replication.HeartbeatInterval = 100 * time.Millisecond
		bo.Replication.Timeout = time.Second
		bo.Replication.MetadataSyncInterval = 100 * time.Millisecond
		bo.Replication.ControllerAddrs = []string{ns.Addr()}
		bo.Replication.ControllerHeartbeat = 100 * time.Millisecond
		b, err := server.New(bo, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		brokers[i] = b
	}
	a, err := NewAdmin(WithNameServers(ns.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	var g ControllerGroup
	waitFor := func(what string, cond func() error) {
		t.Helper()
		if err := cluster.Poll(20*time.Second, cond); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitFor("a master with a sync state set of three", func() error {
		cs, err := a.DescribeController(ctx)
		if err != nil {
			return err
		}
		if len(cs.Groups) != 1 || cs.Groups[0].MasterID == 0 || len(cs.Groups[0].SyncStateSet) != 3 {
			return fmt.Errorf("groups %+v", cs.Groups)
		}
		g = cs.Groups[0]
		return nil
	})
	const topic = "controller-failover"
	created := time.Now()
	waitFor("the topic", func() error { return a.CreateTopic(ctx, TopicSpec{Name: topic, Queues: 4}) })
	// The slaves take the topic with their next metadata sync.
	for i, b := range brokers {
		if int64(i+1) == g.MasterID {
			continue
		}
		waitFor("the slave's metadata sync", func() error {
			st, err := a.ReplicationStatus(ctx, b.Addr())
			if err != nil {
				return err
			}
			if !st.LastMetadataSync.After(created) {
				return fmt.Errorf("replica %d last synced %v", i+1, st.LastMetadataSync)
			}
			return nil
		})
	}
	p, err := NewProducer("controller-failover", WithNameServers(ns.Addr()), WithRouteRefreshInterval(noRefresh),
		WithSendRetries(30))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 10 {
		if _, err := p.Send(ctx, &Message{Topic: topic, Body: []byte(fmt.Sprint("before-", i))}); err != nil {
			t.Fatal(err)
		}
	}

	old := g.MasterID
	_ = brokers[old-1].Close()
	brokers[old-1] = nil
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := p.Send(sctx, &Message{Topic: topic, Body: []byte("at the stop")})
	if err != nil {
		t.Fatalf("send across the failover: %v", err)
	}
	t.Logf("send across the failover acknowledged %v after the master stopped", time.Since(start).Round(time.Millisecond))
	cs, err := a.DescribeController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ng := cs.Groups[0]
	if ng.MasterID == old || ng.MasterID == 0 || ng.MasterEpoch <= g.MasterEpoch {
		t.Fatalf("after the failover: %+v (before: %+v)", ng, g)
	}
	if st, err := a.ReplicationStatus(ctx, ng.MasterAddr); err != nil || st.Role != "MASTER" || st.CommitLogMaxOffset <= res.CommitLogOffset {
		t.Fatalf("new master %s: %+v, %v (send result %+v)", ng.MasterAddr, st, err, res)
	}
	for i := range 10 {
		if _, err := p.Send(sctx, &Message{Topic: topic, Body: []byte(fmt.Sprint("after-", i))}); err != nil {
			t.Fatalf("send %d after the failover: %v", i, err)
		}
	}
}
