package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func route(t *testing.T, nsAddr, topic string) (*pb.TopicRoute, error) {
	t.Helper()
	conn, err := dial(nsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewNameServerClient(conn).GetRoute(context.Background(), &pb.GetRouteRequest{Topic: topic})
	if err != nil {
		return nil, err
	}
	return resp.Route, wire.FromStatus(resp.Status)
}

func TestRoutesAcrossNameServersAndRestarts(t *testing.T) {
	for _, gossip := range []bool{false, true} {
		t.Run(fmt.Sprintf("membership=%v", gossip), func(t *testing.T) {
			c := Start(t, Options{NameServers: 2, BrokerGroups: 2, Membership: gossip})
			c.CreateTopic("routes", 4)
			for _, ns := range c.NameServerAddrs() {
				r, err := route(t, ns, "routes")
				if err != nil || len(r.QueueDatas) != 2 || len(r.BrokerDatas) != 2 {
					t.Fatalf("%s: route %v %v", ns, r, err)
				}
				for _, bd := range r.BrokerDatas {
					if bd.BrokerAddrs[0] == "" {
						t.Fatalf("broker %s has no master address", bd.BrokerName)
					}
				}
			}
			// A clean stop unregisters at once.
			addr := c.Broker(1).Addr()
			c.StopBroker(1)
			c.WaitFor(5*time.Second, func() error {
				for _, ns := range c.NameServerAddrs() {
					r, err := route(t, ns, "routes")
					if err != nil {
						return err
					}
					if len(r.QueueDatas) != 1 {
						return fmt.Errorf("%s still routes to %d brokers", ns, len(r.QueueDatas))
					}
				}
				return nil
			})
			// Restarted on the same address, it comes back.
			b := c.StartBroker(1)
			if b.Addr() != addr {
				t.Fatalf("restarted on %s, was %s", b.Addr(), addr)
			}
			c.WaitFor(5*time.Second, func() error {
				for _, ns := range c.NameServerAddrs() {
					r, err := route(t, ns, "routes")
					if err != nil {
						return err
					}
					if len(r.QueueDatas) != 2 {
						return fmt.Errorf("%s routes to %d brokers", ns, len(r.QueueDatas))
					}
				}
				return nil
			})
		})
	}
}
