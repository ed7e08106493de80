package grpcv5_test

import (
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
)

// TestGroupConnectionsOfV5Clients: a RocketMQ 5 client's Settings give the
// core's connection listing its address, language, version, protocol and
// consume type.
func TestGroupConnectionsOfV5Clients(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", "")
	c := dial(t, b)
	simple, _ := handshake(t, c, newClientID(), consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "CG", "orders", "*"))
	defer simple.CloseSend()
	push, _ := handshake(t, c, newClientID(), consumerSettings(v2.ClientType_PUSH_CONSUMER, "CG", "orders", "paid"))
	defer push.CloseSend()
	prod, _ := handshake(t, c, newClientID(), producerSettings("orders"))
	defer prod.CloseSend()

	gc, err := b.GroupConnections("CG")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, cc := range gc.Consumers {
		types[cc.ConsumeType]++
		if cc.Protocol != broker.ProtocolGRPCv5 || cc.Language != "GO" || cc.Version != "5.1.4" || cc.RemoteAddr == "" ||
			len(cc.Subscriptions) != 1 || cc.Subscriptions[0].Topic != "orders" {
			t.Fatalf("consumer: %+v", cc)
		}
	}
	if len(gc.Consumers) != 2 || types["SIMPLE"] != 1 || types["PUSH"] != 1 {
		t.Fatalf("consumers of CG: %+v", gc.Consumers)
	}
	// A producer's topics are its producer groups.
	gc, err = b.GroupConnections("orders")
	if err != nil || len(gc.Producers) != 1 || gc.Producers[0].Protocol != broker.ProtocolGRPCv5 || gc.Producers[0].RemoteAddr == "" {
		t.Fatalf("producers of orders: %+v, %v", gc, err)
	}
}
