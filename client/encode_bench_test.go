package client

import (
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/hotwire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// BenchmarkEncodeBatch measures what the producer does per message of a
// batch of 64 before the request is written: validation, the properties
// it travels with, a unique id, and the request's encoding.
func BenchmarkEncodeBatch(b *testing.B) {
	p, err := NewProducer("bench-pg")
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for _, props := range []map[string]string{nil, {"BENCH_SENT_NS": "1764800000000000000", "trace": "on"}} {
		b.Run(map[bool]string{true: "props=0", false: "props=2"}[props == nil], func(b *testing.B) {
			msgs := make([]*Message, 64)
			for i := range msgs {
				msgs[i] = &Message{Topic: "bench", Tag: "t", Body: body, Properties: props}
			}
			var dst []byte
			b.ReportAllocs()
			for b.Loop() {
				slab := make([]pb.Message, len(msgs))
				pms := make([]*pb.Message, len(msgs))
				born := time.Now().UnixMilli()
				ids := p.ids.NextN(len(msgs))
				for i, m := range msgs {
					if err := p.fillWire(&slab[i], m, "", born, ids[i]); err != nil {
						b.Fatal(err)
					}
					pms[i] = &slab[i]
				}
				dst = hotwire.AppendSendRequest(dst[:0], &pb.SendRequest{ProducerGroup: "bench-pg", Messages: pms})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
		})
	}
}
