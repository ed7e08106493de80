package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestSubscriptionGroupsReplicated: subscription groups declared on a
// master reach its slave with the metadata sync (changes and deletions
// too), and a promoted slave, restarted, still has them.
func TestSubscriptionGroupsReplicated(t *testing.T) {
	c := Start(t, Options{Broker: fastHA(broker.ReplicationAsync)})
	master := c.Broker(0)
	mc := brokerClient(t, master.Addr())
	put := func(g *pb.SubscriptionGroupConfig) {
		t.Helper()
		resp, err := mc.PutSubscriptionGroup(context.Background(), &pb.PutSubscriptionGroupRequest{Group: g})
		if err == nil {
			err = wire.FromStatus(resp.Status)
		}
		if err != nil {
			t.Fatalf("put %s: %v", g.Group, err)
		}
	}
	// One group declared before the slave exists, one after.
	put(&pb.SubscriptionGroupConfig{Group: "fifo-g", ConsumeMessageOrderly: true, RetryMaxTimes: 4,
		RetryPolicy: &pb.RetryPolicy{Type: "CUSTOMIZED", Customized: &pb.CustomizedRetryPolicy{NextMs: []int64{1000, 5000}}}})
	s := c.StartSlave(0, 1)
	sc := brokerClient(t, s.Broker().Addr())
	put(&pb.SubscriptionGroupConfig{Group: "plain-g", RetryMaxTimes: 16})

	waitGroups := func(want map[string]int32) {
		t.Helper()
		if err := Poll(10*time.Second, func() error {
			resp, err := sc.ListSubscriptionGroups(context.Background(), &pb.ListSubscriptionGroupsRequest{})
			if err != nil {
				return err
			}
			got := map[string]int32{}
			for _, g := range resp.Groups {
				got[g.Group] = g.RetryMaxTimes
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("slave has groups %v, want %v", got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitGroups(map[string]int32{"fifo-g": 4, "plain-g": 16})
	resp, err := sc.GetSubscriptionGroup(context.Background(), &pb.GetSubscriptionGroupRequest{Group: "fifo-g"})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("get fifo-g on the slave: %v %v", err, resp.GetStatus())
	}
	if g := resp.Group; !g.ConsumeMessageOrderly || fmt.Sprint(g.RetryPolicy.GetCustomized().GetNextMs()) != "[1000 5000]" {
		t.Fatalf("fifo-g on the slave: %+v", g)
	}

	// The slave refuses changes; the master's changes and deletions reach it.
	if r, err := sc.PutSubscriptionGroup(context.Background(), &pb.PutSubscriptionGroupRequest{
		Group: &pb.SubscriptionGroupConfig{Group: "on-slave"}}); err != nil || !errors.Is(wire.FromStatus(r.Status), wire.ErrNotMaster) {
		t.Fatalf("put on the slave: %v %v", err, r.GetStatus())
	}
	put(&pb.SubscriptionGroupConfig{Group: "plain-g", RetryMaxTimes: 2})
	if r, err := mc.DeleteSubscriptionGroup(context.Background(), &pb.DeleteSubscriptionGroupRequest{Group: "fifo-g"}); err != nil || r.Status.Code != pb.Code_OK {
		t.Fatalf("delete fifo-g: %v %v", err, r.GetStatus())
	}
	waitGroups(map[string]int32{"plain-g": 2})

	// Promoted and restarted, the slave keeps the table.
	conn, err := dial(s.Broker().Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pr, err := pb.NewBrokerHAClient(conn).Promote(context.Background(), &pb.PromoteRequest{BrokerName: "broker-a"})
	if err != nil || wire.FromStatus(pr.Status) != nil {
		t.Fatalf("promote: %v %v", err, pr.GetStatus())
	}
	c.StopBroker(0)
	s.Stop()
	sc = brokerClient(t, s.Start().Addr())
	waitGroups(map[string]int32{"plain-g": 2})
}
