package grpcv5_test

import (
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// A broker relays QueryRoute and QueryAssignment to its NameServers: the
// answer covers every broker group, as the access point's does.
func TestRouteRelayedToNameServer(t *testing.T) {
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2})
	c.CreateTopic("orders", 2)
	conn, err := grpc.NewClient(c.NameServerAddrs()[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ns := v2.NewMessagingServiceClient(conn)
	viaBroker := dial(t, c.Broker(0))
	ctx := asClient(t, newClientID())

	routeReq := &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "orders"}}
	want, err := ns.QueryRoute(ctx, routeReq)
	if err != nil {
		t.Fatal(err)
	}
	got, err := viaBroker.QueryRoute(ctx, routeReq)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) || len(got.GetMessageQueues()) != 4 {
		t.Fatalf("route via the broker:\n%v\nfrom the NameServer:\n%v", got, want)
	}

	asg, err := viaBroker.QueryAssignment(ctx, &v2.QueryAssignmentRequest{Topic: &v2.Resource{Name: "orders"}, Group: &v2.Resource{Name: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "assignment", asg.GetStatus(), v2.Code_OK)
	brokers := map[string]bool{}
	for _, a := range asg.GetAssignments() {
		if a.GetMessageQueue().GetId() != -1 {
			t.Errorf("assignment %v: want queue -1", a)
		}
		brokers[a.GetMessageQueue().GetBroker().GetName()] = true
	}
	if len(asg.GetAssignments()) != 2 || !brokers["broker-a"] || !brokers["broker-b"] {
		t.Fatalf("assignments via the broker: %v", asg.GetAssignments())
	}
	resp, err := viaBroker.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "unknown topic", resp.GetStatus(), v2.Code_TOPIC_NOT_FOUND)
}

// Without NameServers a broker answers from its own topic table.
func TestRouteLocal(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "fifo", topic.TypeFIFO)
	cfg := subgroup.Default("ordered")
	cfg.ConsumeMessageOrderly = true
	if err := b.UpdateSubscriptionGroup(cfg); err != nil {
		t.Fatal(err)
	}
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	host, p, _ := net.SplitHostPort(b.Addr())
	port, _ := strconv.Atoi(p)
	wantBroker := &v2.Broker{Name: "broker-a", Endpoints: &v2.Endpoints{Scheme: v2.AddressScheme_IPv4,
		Addresses: []*v2.Address{{Host: host, Port: int32(port)}}}}

	route, err := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "fifo"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "route", route.GetStatus(), v2.Code_OK)
	if len(route.GetMessageQueues()) != 4 {
		t.Fatalf("route: %v", route)
	}
	for i, mq := range route.GetMessageQueues() {
		if mq.GetId() != int32(i) || mq.GetPermission() != v2.Permission_READ_WRITE || !proto.Equal(mq.GetBroker(), wantBroker) ||
			len(mq.GetAcceptMessageTypes()) != 1 || mq.AcceptMessageTypes[0] != v2.MessageType_FIFO {
			t.Errorf("queue %d: %v", i, mq)
		}
	}
	for group, want := range map[string][]int32{"plain": {-1}, "ordered": {0, 1, 2, 3}} {
		asg, err := c.QueryAssignment(ctx, &v2.QueryAssignmentRequest{Topic: &v2.Resource{Name: "fifo"}, Group: &v2.Resource{Name: group}})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "assignment of "+group, asg.GetStatus(), v2.Code_OK)
		var ids []int32
		for _, a := range asg.GetAssignments() {
			ids = append(ids, a.GetMessageQueue().GetId())
		}
		if len(ids) != len(want) {
			t.Fatalf("%s: queues %v, want %v", group, ids, want)
		}
		for i := range ids {
			if ids[i] != want[i] {
				t.Fatalf("%s: queues %v, want %v", group, ids, want)
			}
		}
	}
	resp, _ := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "nowhere"}})
	wantCode(t, "unknown topic", resp.GetStatus(), v2.Code_TOPIC_NOT_FOUND)
	asg, _ := c.QueryAssignment(ctx, &v2.QueryAssignmentRequest{Topic: &v2.Resource{Name: "fifo"}, Group: &v2.Resource{Name: "bad group"}})
	wantCode(t, "illegal group", asg.GetStatus(), v2.Code_ILLEGAL_CONSUMER_GROUP)
}
