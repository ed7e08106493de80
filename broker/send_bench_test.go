package broker_test

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/message"
)

// sendBench is the broker of the send benchmarks, with the store's default
// sizes (not the tests' small files) and topic "bench" of 8 queues, and
// what their messages are made of: a 1 KiB body, unique ids, a born host.
func sendBench(b *testing.B) (*server.Server, []byte, *message.UniqueIDGenerator, netip.AddrPort) {
	s := benchBroker(b, func(o *broker.Options) { o.Store = broker.DefaultOptions(o.Store.Dir).Store })
	if err := s.CreateTopic(broker.TopicConfig{Name: "bench", ReadQueueNums: 8, WriteQueueNums: 8, Perm: broker.PermReadWrite}, false); err != nil {
		b.Fatal(err)
	}
	return s, make([]byte, 1024), message.NewUniqueIDGenerator(netip.MustParseAddr("127.0.0.1")), netip.MustParseAddrPort("127.0.0.1:40000")
}

// BenchmarkSendBatch64 sends batches of 64 messages of 1 KiB, each with a
// unique id of its own (as every SDK sets one), through the core on one
// broker (async flush, deduplication window on): what the broker does for
// a batched message after the front end has decoded it. ns/op and the
// allocations are per message.
func BenchmarkSendBatch64(b *testing.B) {
	const batch = 64
	ctx := context.Background()
	s, body, ids, born := sendBench(b)
	// The messages are made outside the timer, a chunk of batches at a
	// time (Send rewrites what it is given, so each is sent once).
	const chunk = 256 * batch
	ms := make([]message.Ext, chunk)
	fill := func(from int) {
		uniq := ids.NextN(chunk)
		for i := range ms {
			ms[i] = message.Ext{
				Message: message.Message{Topic: "bench", Body: body, Properties: map[string]string{
					message.PropertyUniqueKey: uniq[i], message.PropertyWaitStoreMsgOK: "true",
					message.PropertyKeys: "k" + strconv.Itoa(from+i)}},
				QueueID: int32((from + i) / batch % 8), BornTimestamp: time.Now().UnixMilli(), BornHost: born,
			}
		}
	}
	msgs := make([]*message.Ext, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		if done%chunk == 0 {
			b.StopTimer()
			fill(done)
			b.StartTimer()
		}
		for i := range msgs {
			msgs[i] = &ms[done%chunk+i]
		}
		if _, err := s.Send(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendPackedBatch64 is BenchmarkSendBatch64 with the batches
// packed as the SDK sends them over frames (SendPacked): the same
// messages, made into records without a property map. ns/op and the
// allocations are per message.
func BenchmarkSendPackedBatch64(b *testing.B) {
	const batch = 64
	ctx := context.Background()
	s, body, ids, born := sendBench(b)
	// The batches are packed outside the timer, a chunk at a time.
	const chunk = 256
	packed := make([][]byte, chunk)
	fill := func(from int) {
		uniq := ids.NextN(chunk * batch)
		for k := range packed {
			p := packed[k][:0]
			for i := range batch {
				n := k*batch + i
				var err error
				p, err = message.AppendPacked(p, &message.Ext{
					Message: message.Message{Body: body, Properties: map[string]string{
						message.PropertyUniqueKey: uniq[n], message.PropertyWaitStoreMsgOK: "true",
						message.PropertyKeys: "k" + strconv.Itoa(from+n)}},
					BornTimestamp: time.Now().UnixMilli(), BornHost: born,
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			packed[k] = p
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		k := done / batch % chunk
		if k == 0 {
			b.StopTimer()
			fill(done)
			b.StartTimer()
		}
		if _, err := s.SendPacked(ctx, "bench", int32(done/batch%8), packed[k]); err != nil {
			b.Fatal(err)
		}
	}
}
