package remoting_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// BenchmarkSendMessage sends 1 KiB messages as the Go client does (SEND
// 10, long header, UNIQ_KEY, tags, keys) from parallel goroutines on one
// connection.
func BenchmarkSendMessage(b *testing.B) {
	opts := broker.DefaultOptions(b.TempDir())
	opts.ListenAddr, opts.NameServers, opts.GossipAddr = "127.0.0.1:0", nil, "off"
	opts.Store.CommitLog.SegmentSize = 64 << 20
	srv, err := server.New(opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	if err := srv.CreateTopic(broker.TopicConfig{Name: "bench", ReadQueueNums: 8, WriteQueueNums: 8}, false); err != nil {
		b.Fatal(err)
	}
	c, err := rmq.Dial(context.Background(), srv.Addr(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := bytes.Repeat([]byte("x"), 1024)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			ext := sendExt("PG", "bench", int(i%8), 0, props("TAGS", "TagA", "KEYS", "k1", "UNIQ_KEY", "C0A8000100010000000000000000ABCD"))
			resp, err := c.Invoke(context.Background(), rmq.NewRequest(rmq.SendMessage, ext, body))
			if err != nil || resp.Code != rmq.Success {
				b.Errorf("send: %v %+v", err, resp)
				return
			}
		}
	})
}
