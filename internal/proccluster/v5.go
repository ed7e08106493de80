package proccluster

import (
	"context"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The RocketMQ 5 RPCs (apache.rocketmq.v2.MessagingService) the clients
// call, by where they go: the access point (the NameServer) and the
// brokers.
var (
	V5AccessPointRPCs = []string{"QueryRoute", "QueryAssignment"}
	V5BrokerRPCs      = []string{"Telemetry", "Heartbeat", "SendMessage", "ReceiveMessage", "AckMessage",
		"ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue", "EndTransaction", "NotifyClientTermination"}
)

// V5Unimplemented returns the RocketMQ 5 RPCs the cluster answers with
// gRPC UNIMPLEMENTED (the service or the method is not there), probed once
// per cluster with the generated stubs over plaintext: the access-point
// RPCs on the NameServer, the others on the first master.
func (c *Cluster) V5Unimplemented() map[string]bool {
	c.v5once.Do(func() {
		m := map[string]bool{}
		probeV5(c.NameSrv, V5AccessPointRPCs, m)
		probeV5(c.Brokers[0].Addr, V5BrokerRPCs, m)
		c.v5missing = m
	})
	return c.v5missing
}

// probeV5 calls each RPC on addr with an empty request and records those
// answered UNIMPLEMENTED in m.
func probeV5(addr string, rpcs []string, m map[string]bool) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	defer conn.Close()
	cl := v2.NewMessagingServiceClient(conn)
	for _, r := range rpcs {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var err error
		switch r {
		case "QueryRoute":
			_, err = cl.QueryRoute(ctx, &v2.QueryRouteRequest{})
		case "QueryAssignment":
			_, err = cl.QueryAssignment(ctx, &v2.QueryAssignmentRequest{})
		case "Heartbeat":
			_, err = cl.Heartbeat(ctx, &v2.HeartbeatRequest{})
		case "SendMessage":
			_, err = cl.SendMessage(ctx, &v2.SendMessageRequest{})
		case "AckMessage":
			_, err = cl.AckMessage(ctx, &v2.AckMessageRequest{})
		case "ChangeInvisibleDuration":
			_, err = cl.ChangeInvisibleDuration(ctx, &v2.ChangeInvisibleDurationRequest{})
		case "ForwardMessageToDeadLetterQueue":
			_, err = cl.ForwardMessageToDeadLetterQueue(ctx, &v2.ForwardMessageToDeadLetterQueueRequest{})
		case "EndTransaction":
			_, err = cl.EndTransaction(ctx, &v2.EndTransactionRequest{})
		case "NotifyClientTermination":
			_, err = cl.NotifyClientTermination(ctx, &v2.NotifyClientTerminationRequest{})
		case "ReceiveMessage":
			var s grpc.ServerStreamingClient[v2.ReceiveMessageResponse]
			if s, err = cl.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{}); err == nil {
				_, err = s.Recv()
			}
		case "Telemetry":
			var s grpc.BidiStreamingClient[v2.TelemetryCommand, v2.TelemetryCommand]
			if s, err = cl.Telemetry(ctx); err == nil {
				_ = s.CloseSend()
				_, err = s.Recv()
			}
		}
		cancel()
		if status.Code(err) == codes.Unimplemented {
			m[r] = true
		}
	}
}

// v5probe is the Cluster's cache of V5Unimplemented.
type v5probe struct {
	v5once    sync.Once
	v5missing map[string]bool
}
