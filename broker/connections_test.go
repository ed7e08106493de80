package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestGroupConnections: the core lists a group's producers and consumers
// with what their front ends and heartbeats said.
func TestGroupConnections(t *testing.T) {
	b, _ := testBroker(t)
	remote := broker.ConnInfo{RemoteAddr: "10.0.0.7:5000", Language: "JAVA", Version: "453", Protocol: broker.ProtocolRemoting}
	before := time.Now()
	s1, err := b.Connect(broker.Heartbeat{ClientID: "c2", ProducerGroups: []string{"PG"}, Conn: remote,
		Consumers: []broker.ConsumerData{{Group: "CG", Model: broker.Broadcasting, Pull: true,
			Subscriptions: []broker.Subscription{{Topic: "t2", Expression: "*"}, {Topic: "t1", Expression: "a||b"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	v5 := broker.ConnInfo{RemoteAddr: "10.0.0.8:6000", Language: "GOLANG", Version: "5.1.4", Protocol: broker.ProtocolGRPCv5}
	s2, err := b.Connect(broker.Heartbeat{ClientID: "c1", Conn: v5,
		Consumers: []broker.ConsumerData{{Group: "CG", ConsumeType: "SIMPLE", Subscriptions: []broker.Subscription{{Topic: "t1", Expression: "*"}}}}})
	if err != nil {
		t.Fatal(err)
	}

	gc, err := b.GroupConnections("CG")
	if err != nil {
		t.Fatal(err)
	}
	if len(gc.Producers) != 0 || len(gc.Consumers) != 2 {
		t.Fatalf("connections of CG: %+v", gc)
	}
	c1, c2 := gc.Consumers[0], gc.Consumers[1] // by client id
	if c1.ClientID != "c1" || c1.ConnInfo != v5 || c1.ConsumeType != "SIMPLE" || c1.Model != broker.Clustering ||
		len(c1.Subscriptions) != 1 || c1.ConnectedSince.Before(before) || c1.LastHeartbeat.Before(c1.ConnectedSince) {
		t.Fatalf("c1: %+v", c1)
	}
	if c2.ClientID != "c2" || c2.ConnInfo != remote || c2.ConsumeType != "PULL" || c2.Model != broker.Broadcasting ||
		len(c2.Subscriptions) != 2 || c2.Subscriptions[0].Topic != "t1" || c2.Subscriptions[1].Expression != "*" {
		t.Fatalf("c2: %+v", c2)
	}
	gc, err = b.GroupConnections("PG")
	if err != nil || len(gc.Consumers) != 0 || len(gc.Producers) != 1 || gc.Producers[0].ClientID != "c2" ||
		gc.Producers[0].ConnInfo != remote || gc.Producers[0].ConsumeType != "" {
		t.Fatalf("connections of PG: %+v, %v", gc, err)
	}

	// A later heartbeat without connection details keeps them; it leaves
	// the producer group.
	s1.Heartbeat(broker.Heartbeat{ClientID: "c2", Consumers: []broker.ConsumerData{{Group: "CG"}}})
	gc, _ = b.GroupConnections("PG")
	if len(gc.Producers) != 0 {
		t.Fatalf("producers of PG after c2 left it: %+v", gc.Producers)
	}
	gc, _ = b.GroupConnections("CG")
	if len(gc.Consumers) != 2 || gc.Consumers[1].ConnInfo != remote || gc.Consumers[1].ConsumeType != "PUSH" {
		t.Fatalf("c2 after a heartbeat without details: %+v", gc.Consumers)
	}

	s2.Close()
	if gc, _ := b.GroupConnections("CG"); len(gc.Consumers) != 1 || gc.Consumers[0].ClientID != "c2" {
		t.Fatalf("after c1 closed: %+v", gc.Consumers)
	}
	if gc, err := b.GroupConnections("NOBODY"); err != nil || len(gc.Producers)+len(gc.Consumers) != 0 {
		t.Fatalf("a group without clients: %+v, %v", gc, err)
	}
	if _, err := b.GroupConnections("bad group"); errcode.Of(err) != errcode.IllegalGroup {
		t.Fatalf("illegal group: %v", err)
	}
}

// TestGroupConnectionsOverGRPC: a client on a bolide.v1 Connect stream is
// listed by GetGroupConnections with its address and user agent.
func TestGroupConnectionsOverGRPC(t *testing.T) {
	b, c := testBroker(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{ClientId: "g1",
		Consumers: []*pb.ConsumerData{{Group: "CG", Subscriptions: []*pb.Subscription{{Topic: "orders", Expression: "paid"}}}}}}}); err != nil {
		t.Fatal(err)
	}
	var resp *pb.GetGroupConnectionsResponse
	if err := cluster.Poll(10*time.Second, func() error {
		resp, err = c.GetGroupConnections(ctx, &pb.GetGroupConnectionsRequest{Group: "CG"})
		if err != nil {
			return err
		}
		if len(resp.Consumers) != 1 {
			return fmt.Errorf("consumers: %v", resp.Consumers)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := resp.Consumers[0]
	if got.ClientId != "g1" || got.Protocol != "bolide" || got.Language != "GO" || !strings.HasPrefix(got.Version, "grpc-go/") ||
		got.RemoteAddr == "" || got.ConsumeType != "PUSH" || got.MessageModel != pb.MessageModel_CLUSTERING ||
		len(got.Subscriptions) != 1 || got.Subscriptions[0].Expression != "paid" || got.ConnectedSinceMs == 0 || got.LastHeartbeatMs < got.ConnectedSinceMs {
		t.Fatalf("connection: %v", got)
	}
	if r, err := c.GetGroupConnections(ctx, &pb.GetGroupConnectionsRequest{Group: "bad group"}); err != nil || r.Status.GetCode() != pb.Code_ILLEGAL_GROUP {
		t.Fatalf("illegal group: %v, %v", r, err)
	}
	cancel()
	if err := cluster.Poll(10*time.Second, func() error {
		if gc, _ := b.GroupConnections("CG"); len(gc.Consumers) != 0 {
			return fmt.Errorf("still listed: %+v", gc.Consumers)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
