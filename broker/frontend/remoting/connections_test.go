package remoting_test

import (
	"strconv"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// TestGroupConnectionsOfRemotingClients: a remoting client's heartbeat
// gives the core's connection listing its address, language, version and
// protocol, and the connection's end removes it.
func TestGroupConnectionsOfRemotingClients(t *testing.T) {
	b, _ := adminBroker(t)
	client := dialBroker(t, b.Addr(), nil)
	wantOK(t, invoke(t, client, rmq.HeartBeat, nil, goHeartbeat("10.0.0.9@1", "PG", "CG", "orders")))
	gc, err := b.GroupConnections("CG")
	if err != nil {
		t.Fatal(err)
	}
	want := broker.ConnInfo{RemoteAddr: client.LocalAddr().String(), Language: rmq.Language,
		Version: strconv.Itoa(int(rmq.ServerVersion)), Protocol: broker.ProtocolRemoting}
	if len(gc.Consumers) != 1 || gc.Consumers[0].ClientID != "10.0.0.9@1" || gc.Consumers[0].ConnInfo != want ||
		gc.Consumers[0].ConsumeType != "PUSH" || len(gc.Consumers[0].Subscriptions) != 2 {
		t.Fatalf("consumers of CG: %+v, want %+v", gc.Consumers, want)
	}
	gc, err = b.GroupConnections("PG")
	if err != nil || len(gc.Producers) != 1 || gc.Producers[0].ConnInfo != want {
		t.Fatalf("producers of PG: %+v, %v", gc, err)
	}
}
