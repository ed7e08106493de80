package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/faultproxy"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// A topic and a subscription group created on the master, which is killed
// right after the calls return (long before a periodic metadata sync):
// the new master serves the topic (send, then consume) and knows the
// group, because the master pushed them to the sync state set before
// answering. A push from the old master's epoch is then refused by the
// slave that follows the new master.
func TestControllerTopicCreatedJustBeforeFailover(t *testing.T) {
	r := startCtlRig(t, 3, broker.ReplicationSync, func(o *broker.Options) {
		// Only the pulls at each handshake: a periodic one must not be
		// what carries the topic.
		o.Replication.MetadataSyncInterval = time.Hour
	})
	m := r.master(0)
	r.waitSSS(m, 3)
	epoch := r.broker(m).Epoch()
	const topic, group = "made-before-failover", "made-before-failover-g"
	mb := r.broker(m)
	if err := mb.CreateTopic(broker.TopicConfig{Name: topic, ReadQueueNums: 2, WriteQueueNums: 2}, false); err != nil {
		t.Fatal(err)
	}
	if err := mb.UpdateSubscriptionGroup(broker.SubscriptionGroup{GroupName: group, ConsumeEnable: true, RetryMaxTimes: 7}); err != nil {
		t.Fatal(err)
	}
	r.kill(m)

	n := r.master(epoch)
	nb := r.broker(n)
	if _, ok := nb.LookupSubscriptionGroup(group); !ok {
		t.Fatalf("new master (replica %d) lacks group %s", n+1, group)
	}
	if !hasTopic(nb, topic) {
		t.Fatalf("new master (replica %d) lacks topic %s", n+1, topic)
	}
	r.waitSSS(n, 2) // sync sends need a slave in the set
	conn, err := dial(nb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bc := pb.NewBrokerClient(conn)
	for q := range int32(2) {
		if _, err := sendOne(bc, topic, q, fmt.Sprintf("after-failover-%d", q)); err != nil {
			t.Fatalf("send to %s/%d on the new master: %v", topic, q, err)
		}
	}
	got := 0
	if err := Poll(10*time.Second, func() error {
		got = 0
		for q := range int32(2) {
			got += len(dpPullAll(t, bc, topic, q))
		}
		if got != 2 {
			return fmt.Errorf("consumed %d of 2 messages from %s", got, topic)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The third replica follows the new master: a push from the old
	// master's epoch is refused, and its table stays.
	o := 3 - m - n
	ob := r.broker(o)
	if err := Poll(15*time.Second, func() error {
		if ob.Epoch() != epoch+1 || ob.Role() != broker.RoleSlave {
			return fmt.Errorf("replica %d: %s at epoch %d", o+1, ob.Role(), ob.Epoch())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	oc, err := dial(ob.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	push := func(masterEpoch, masterID int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := pb.NewBrokerHAClient(oc).PushMetadata(ctx, &pb.PushMetadataRequest{BrokerName: "broker-a",
			MasterEpoch: masterEpoch, MasterId: masterID,
			Metadata: &pb.GetMetadataResponse{DataVersion: &pb.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1 << 40}}})
		if err != nil {
			return err
		}
		return wire.FromStatus(resp.Status)
	}
	if err := push(epoch, int64(m+1)); errcode.Of(err) != errcode.ControllerFenced {
		t.Fatalf("push from the old master's epoch: %v, want CONTROLLER_FENCED", err)
	}
	if err := push(epoch+1, int64(o+1)); errcode.Of(err) != errcode.NotMaster {
		t.Fatalf("push naming a master of the epoch that is not it: %v, want NOT_MASTER", err)
	}
	if !hasTopic(ob, topic) {
		t.Fatalf("replica %d lost %s after refused pushes", o+1, topic)
	}

	// A topic deleted on the new master is gone from its sync state set
	// when the call returns.
	if err := nb.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if hasTopic(ob, topic) {
		t.Fatalf("replica %d still has %s after the delete returned", o+1, topic)
	}
}

func hasTopic(b interface{ TopicConfigs() []broker.TopicConfig }, name string) bool {
	for _, tc := range b.TopicConfigs() {
		if tc.Name == name {
			return true
		}
	}
	return false
}

// A member of the sync state set that cannot be reached makes a topic
// change fail with FLUSH_SLAVE_TIMEOUT after the bound; the change stays
// on the master.
func TestControllerTopicChangeUnconfirmed(t *testing.T) {
	// Each replica advertises its client address through a proxy, so that
	// a test can cut pushes to it while its HA session and controller
	// stream (which keep it in the sync state set) go on.
	// Each proxy is aimed at its replica once the replica's port is bound
	// (a port picked free beforehand may be taken by then).
	var proxies []*faultproxy.Proxy
	for range 2 {
		p, err := faultproxy.New("127.0.0.1:0", "127.0.0.1:1", zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p)
	}
	r := startCtlRigBound(t, 2, broker.ReplicationAsync, func(o *broker.Options) {
		o.Replication.MetadataSyncInterval = time.Hour
		o.AdvertiseAddr = proxies[o.BrokerID-1].Addr()
	}, func(i int, b *server.Server) { proxies[i].SetTarget(b.ListenAddr()) })
	m := r.master(0)
	r.waitSSS(m, 2)
	mb := r.broker(m)
	if err := mb.CreateTopic(broker.TopicConfig{Name: "confirmed", ReadQueueNums: 1, WriteQueueNums: 1}, false); err != nil {
		t.Fatal(err)
	}
	s := 1 - m
	if !hasTopic(r.broker(s), "confirmed") {
		t.Fatal("the slave lacks a topic whose creation returned")
	}
	proxies[s].Blackhole(true)
	proxies[s].Cut()
	start := time.Now()
	err := mb.CreateTopic(broker.TopicConfig{Name: "unconfirmed", ReadQueueNums: 1, WriteQueueNums: 1}, false)
	if errcode.Of(err) != errcode.FlushSlaveTimeout {
		t.Fatalf("create with an unreachable member: %v after %v, want FLUSH_SLAVE_TIMEOUT", err, time.Since(start))
	}
	t.Logf("refused after %v: %v", time.Since(start), err)
	if !hasTopic(mb, "unconfirmed") {
		t.Fatal("the master dropped the topic")
	}
	if hasTopic(r.broker(s), "unconfirmed") {
		t.Fatal("the slave got a topic no push reached it with")
	}
	// Reachable again: repeating the change (an update) confirms it.
	proxies[s].Blackhole(false)
	if err := Poll(10*time.Second, func() error {
		return mb.CreateTopic(broker.TopicConfig{Name: "unconfirmed", ReadQueueNums: 1, WriteQueueNums: 1}, true)
	}); err != nil {
		t.Fatal(err)
	}
	if !hasTopic(r.broker(s), "unconfirmed") {
		t.Fatal("the slave lacks a topic whose update returned")
	}
}

// Without controllers nothing is pushed: a slave refuses a push and gets
// its master's topics by the metadata sync, as before.
func TestNoMetadataPushWithoutController(t *testing.T) {
	c := Start(t, Options{Broker: fastHA(broker.ReplicationAsync)})
	master := c.Broker(0)
	s := c.StartSlave(0, 1)
	if err := master.CreateTopic(broker.TopicConfig{Name: "pulled", ReadQueueNums: 1, WriteQueueNums: 1}, false); err != nil {
		t.Fatal(err)
	}
	conn, err := dial(s.Broker().Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewBrokerHAClient(conn).PushMetadata(context.Background(), &pb.PushMetadataRequest{BrokerName: "broker-a",
		MasterEpoch: master.Epoch(), MasterId: 0, Metadata: &pb.GetMetadataResponse{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.FromStatus(resp.Status); errcode.Of(err) != errcode.InvalidParameter {
		t.Fatalf("push outside controller mode: %v, want INVALID_PARAMETER", err)
	}
	if err := Poll(10*time.Second, func() error {
		if !hasTopic(s.Broker(), "pulled") {
			return fmt.Errorf("the slave lacks the master's topic")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
