package v1wire

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// batchPayload is a send of 64 messages of 1 KiB with the properties the
// SDK sets (unique id, tags, keys, wait).
func batchPayload(b *testing.B) []byte {
	req := &pb.SendRequest{RequestId: 1, ProducerGroup: "bench"}
	for i := range 64 {
		req.Messages = append(req.Messages, &pb.Message{Topic: "bench", QueueId: 3, Body: make([]byte, 1024),
			BornTimestamp: 1_700_000_000_000, BornHost: "127.0.0.1:40000",
			Properties: map[string]string{"UNIQ_KEY": fmt.Sprintf("7F0000010000A2930000000000%06d", i), "TAGS": "t", "WAIT": "true"}})
	}
	p, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkDecodeSend compares DecodeSendRequest, in place or not, with proto.Unmarshal on
// a batch of 64 messages.
func BenchmarkDecodeSend(b *testing.B) {
	p := batchPayload(b)
	b.Run("DecodeSendRequest", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeSendRequest(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeSendRequestInPlace", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeSendRequestInPlace(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := proto.Unmarshal(p, new(pb.SendRequest)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
