package broker_test

import (
	"context"
	"maps"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/testutil"
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
// allocations are per message; cpu-ns/op is the process's CPU time per
// message, the dispatcher's included.
func BenchmarkSendPackedBatch64(b *testing.B) { benchSendPacked64(b, nil) }

// BenchmarkSendPackedDelayed64 is BenchmarkSendPackedBatch64 with every
// message asking to be delivered in an hour (TIMER_DELAY_MS): stored in
// the timer topic, its properties rewritten, and indexed by the timer
// engine (in cpu-ns/op), none due while the benchmark runs.
func BenchmarkSendPackedDelayed64(b *testing.B) {
	benchSendPacked64(b, map[string]string{message.PropertyTimerDelayMS: strconv.Itoa(3600 * 1000)})
}

// benchSendPacked64 sends packed batches of 64 messages of 1 KiB, each
// with a unique id, keys and the properties extra, to the 8 queues of a
// topic in turn.
func benchSendPacked64(b *testing.B, extra map[string]string) {
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
				props := map[string]string{message.PropertyUniqueKey: uniq[n], message.PropertyWaitStoreMsgOK: "true",
					message.PropertyKeys: "k" + strconv.Itoa(from+n)}
				maps.Copy(props, extra)
				var err error
				p, err = message.AppendPacked(p, &message.Ext{Message: message.Message{Body: body, Properties: props},
					BornTimestamp: time.Now().UnixMilli(), BornHost: born})
				if err != nil {
					b.Fatal(err)
				}
			}
			packed[k] = p
		}
	}
	b.ReportAllocs()
	cpu0 := testutil.ProcessCPU(b)
	var fillCPU time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		k := done / batch % chunk
		if k == 0 {
			b.StopTimer()
			c := testutil.ProcessCPU(b)
			fill(done)
			fillCPU += testutil.ProcessCPU(b) - c
			b.StartTimer()
		}
		if _, err := s.SendPacked(ctx, "bench", int32(done/batch%8), packed[k]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0-fillCPU)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSendPackedTopics sends lone messages of 1 KiB (SendPacked, as
// the SDK sends a synchronous one over frames) to one topic of 8 queues
// and, on another broker, to 10 000 topics of 8 queues in turn: what the
// broker's core spends more on a message when the queues it writes are
// many (the scale comparison of bench-scale.sh, without the network and
// the clients). ns/op is per message; cpu-ns/op is the process's CPU time
// per message, the dispatcher's included.
func BenchmarkSendPackedTopics(b *testing.B) {
	for _, topics := range []int{1, 10000} {
		// Made on the sub-benchmark's first run and kept for its later
		// ones (making 80 000 queues takes a while), closed at the end.
		var s *server.Server
		b.Run("topics="+strconv.Itoa(topics), func(sb *testing.B) {
			if s == nil {
				s = topicsBroker(keptBy{sb, b}, topics)
			}
			benchSendPackedTopics(sb, s, topics)
		})
	}
}

// keptBy hands what a helper makes on a sub-benchmark's run (its
// temporary directory, its cleanups, failures after the run) to parent,
// so that it outlives the run; failures during the run are the run's.
type keptBy struct {
	*testing.B // the sub-benchmark running
	parent     *testing.B
}

func (k keptBy) TempDir() string   { return k.parent.TempDir() }
func (k keptBy) Cleanup(f func())  { k.parent.Cleanup(f) }
func (k keptBy) Error(args ...any) { k.parent.Error(args...) }

// topicsBroker starts a broker with the store's default sizes and topics
// bench-0 … bench-(topics-1) of 8 queues.
func topicsBroker(tb testing.TB, topics int) *server.Server {
	s := benchBroker(tb, func(o *broker.Options) { o.Store = broker.DefaultOptions(o.Store.Dir).Store })
	for i := range topics {
		if err := s.CreateTopic(broker.TopicConfig{Name: "bench-" + strconv.Itoa(i), ReadQueueNums: 8, WriteQueueNums: 8, Perm: broker.PermReadWrite}, false); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func benchSendPackedTopics(b *testing.B, s *server.Server, topics int) {
	ctx := context.Background()
	names := make([]string, topics)
	for i := range names {
		names[i] = "bench-" + strconv.Itoa(i)
	}
	ids := message.NewUniqueIDGenerator(netip.MustParseAddr("127.0.0.1"))
	born := netip.MustParseAddrPort("127.0.0.1:40000")
	body := make([]byte, 1024)
	// The records are packed outside the timer, a chunk at a time.
	const chunk = 4096
	packed := make([][]byte, chunk)
	fill := func() {
		uniq := ids.NextN(chunk)
		for k := range packed {
			p, err := message.AppendPacked(packed[k][:0], &message.Ext{
				Message: message.Message{Body: body, Properties: map[string]string{
					message.PropertyUniqueKey: uniq[k], message.PropertyWaitStoreMsgOK: "true"}},
				BornTimestamp: time.Now().UnixMilli(), BornHost: born,
			})
			if err != nil {
				b.Fatal(err)
			}
			packed[k] = p
		}
	}
	b.ReportAllocs()
	cpu0 := testutil.ProcessCPU(b)
	var fillCPU time.Duration
	b.ResetTimer()
	for i := range b.N {
		k := i % chunk
		if k == 0 {
			b.StopTimer()
			c := testutil.ProcessCPU(b)
			fill()
			fillCPU += testutil.ProcessCPU(b) - c
			b.StartTimer()
		}
		// Topic after topic, and each topic's queues in turn, as the
		// producers of the scale comparison spread their sends.
		if _, err := s.SendPacked(ctx, names[i%topics], int32(i/topics%8), packed[k]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The dispatcher runs beside the sends: the process's CPU time per
	// message counts its work too (but not the packing of the records).
	b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0-fillCPU)/float64(b.N), "cpu-ns/op")
}
