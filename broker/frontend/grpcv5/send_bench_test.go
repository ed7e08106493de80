package grpcv5_test

import (
	"strings"
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// BenchmarkSendMessage sends 1 KiB messages over one gRPC connection from
// parallel goroutines, as v5 producers do (one message per call).
func BenchmarkSendMessage(b *testing.B) {
	srv := startBroker(b)
	createTopic(b, srv, "bench", "")
	c := dial(b, srv)
	ctx := asClient(b, newClientID())
	body := strings.Repeat("x", 1024)
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{newMessage("bench", body)}})
			if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
				b.Errorf("send: %v %v", resp.GetStatus(), err)
				return
			}
		}
	})
}
