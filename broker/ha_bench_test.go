package broker_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func benchBroker(tb testing.TB, mutate ...func(*broker.Options)) *server.Server {
	tb.Helper()
	opts := broker.DefaultOptions(tb.TempDir())
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 256 << 20
	opts.Replication.HAListenAddr = "127.0.0.1:0"
	for _, f := range mutate {
		f(&opts)
	}
	b, err := newBroker(opts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := b.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Error(err)
		}
	})
	return b
}

// BenchmarkReplication measures a master's send throughput with 16
// concurrent producers of 1 KiB messages, each waiting for its
// acknowledgement before the next send (via=direct: Broker.Send; via=grpc:
// one SendStream per producer on one connection, as the SDK sends): without a slave, with an asynchronous slave and with a synchronous
// one (the send returns once the slave acknowledged it), for both flush
// modes (the slave flushing like the master, or asynchronously behind a
// sync-flush master). Master and slave run in this process on loopback, so
// they share the CPUs and the disk.
//
//	go test -run '^$' -bench BenchmarkReplication -benchtime 5s ./broker/
func BenchmarkReplication(b *testing.B) {
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	type config struct {
		name          string
		master, slave commitlog.FlushMode
	}
	configs := []config{
		{"flush=async", commitlog.FlushAsync, commitlog.FlushAsync},
		{"flush=sync,slave=async", commitlog.FlushSync, commitlog.FlushAsync},
		{"flush=sync,slave=sync", commitlog.FlushSync, commitlog.FlushSync},
	}
	for _, via := range []string{"direct", "grpc"} {
		for _, cfg := range configs {
			for _, repl := range []string{"none", broker.ReplicationAsync, broker.ReplicationSync} {
				if repl == "none" && cfg.slave != cfg.master {
					continue // same as the row above
				}
				b.Run(fmt.Sprintf("via=%s/%s/repl=%s", via, cfg.name, repl), func(b *testing.B) {
					mode := repl
					if repl == "none" {
						mode = broker.ReplicationAsync
					}
					setFlush := func(o *broker.Options) { o.Store.CommitLog.FlushMode = cfg.master; o.Replication.Mode = mode }
					slaveFlush := func(o *broker.Options) { o.Store.CommitLog.FlushMode = cfg.slave }
					master := benchBroker(b, setFlush)
					if _, err := master.Store().Put(context.Background(), &message.Ext{Message: message.Message{Topic: "warm", Body: body}}); err != nil {
						b.Fatal(err)
					}
					if err := master.PutTopic(broker.TopicConfig{Name: "bench", ReadQueueNums: 16, WriteQueueNums: 16, Perm: broker.PermReadWrite}, true); err != nil {
						b.Fatal(err)
					}
					var slave *server.Server
					if repl != "none" {
						slave = benchBroker(b, setFlush, slaveFlush, slaveOf(master, 1))
						deadline := time.Now().Add(10 * time.Second)
						for master.Replication().Server().InSync() < 1 {
							if time.Now().After(deadline) {
								b.Fatal("slave not in sync")
							}
							time.Sleep(time.Millisecond)
						}
					}
					ctx := context.Background()
					b.SetBytes(int64(len(body)))
					b.SetParallelism(benchProducers() / max(1, testingProcs()))
					b.ResetTimer()
					cpu0, flt0 := testutil.ProcessCPU(b), minorFaults()
					start := time.Now()
					var client pb.BrokerClient
					if via == "grpc" {
						conn, err := remote.Dial(master.Addr())
						if err != nil {
							b.Fatal(err)
						}
						defer conn.Close()
						client = pb.NewBrokerClient(conn)
					}
					b.RunParallel(func(p *testing.PB) {
						q := int32(0)
						var stream pb.Broker_SendStreamClient
						if client != nil {
							var err error
							if stream, err = client.SendStream(ctx); err != nil {
								b.Error(err)
								return
							}
							defer func() { _ = stream.CloseSend() }()
						}
						for p.Next() {
							q++
							if stream != nil {
								// A producer waiting for each acknowledgement, over
								// the SDK's transport.
								err := stream.Send(&pb.SendRequest{RequestId: uint64(q), Messages: []*pb.Message{{Topic: "bench", QueueId: q % 16, Body: body}}})
								var resp *pb.SendResponse
								if err == nil {
									resp, err = stream.Recv()
								}
								if err == nil {
									err = wire.FromStatus(resp.Status)
								}
								if err != nil {
									b.Error(err)
									return
								}
								continue
							}
							m := &message.Ext{Message: message.Message{Topic: "bench", Body: body}, QueueID: q % 16}
							if _, err := master.Send(ctx, []*message.Ext{m}); err != nil {
								b.Error(err)
								return
							}
						}
					})
					el := time.Since(start)
					b.StopTimer()
					b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
					// CPU time of the whole process (master and slave) per message:
					// on a busy machine it is steadier than the rate.
					b.ReportMetric(float64((testutil.ProcessCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
					b.ReportMetric(float64(minorFaults()-flt0)/float64(b.N), "faults/msg")
					if st := master.Replication().Server().Stats(); st.Frames > 0 {
						b.ReportMetric(float64(st.Bytes)/float64(st.Frames), "B/frame")
					}
					if slave != nil {
						caughtUp := time.Now()
						for slave.Store().CommitLog().MaxOffset() < master.Store().CommitLog().MaxOffset() {
							if time.Since(caughtUp) > 30*time.Second {
								b.Fatal("slave did not catch up")
							}
							time.Sleep(time.Millisecond)
						}
						// Time from the last acknowledgement until the slave held
						// everything (0 in sync mode).
						b.ReportMetric(float64(time.Since(caughtUp).Microseconds()), "catchup-µs")
					}
				})
			}
		}
	}
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }

// benchProducers is 16, or BOLIDE_BENCH_PRODUCERS.
func benchProducers() int {
	if n, err := strconv.Atoi(os.Getenv("BOLIDE_BENCH_PRODUCERS")); err == nil && n > 0 {
		return n
	}
	return 16
}

// minorFaults is the number of minor page faults this process took so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// BenchmarkSlaveCatchUp measures replication throughput: a new, empty slave
// joins a master holding 256 MiB of 1 KiB messages and copies it (every
// record verified and written to the slave's segment files). The time is
// until the slave's CommitLog ends where the master's does;
// "dispatched-ms" adds the slave building its queues and index. Master and
// slave share this process, the CPUs and the disk.
//
//	go test -run '^$' -bench BenchmarkSlaveCatchUp -benchtime 3x ./broker/
func BenchmarkSlaveCatchUp(b *testing.B) {
	master := benchBroker(b)
	if err := master.PutTopic(broker.TopicConfig{Name: "bench", ReadQueueNums: 8, WriteQueueNums: 8, Perm: broker.PermReadWrite}, true); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	ctx := context.Background()
	batch := make([]*message.Ext, 256)
	for q := int32(0); master.Store().CommitLog().MaxOffset() < 256<<20; q++ {
		for i := range batch {
			batch[i] = &message.Ext{Message: message.Message{Topic: "bench", Body: body}, QueueID: q % 8}
		}
		if _, err := master.Store().PutBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := master.Store().Flush(); err != nil {
		b.Fatal(err)
	}
	size := master.Store().CommitLog().MaxOffset()
	b.SetBytes(size)
	var dispatched time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		slaveOpts := broker.DefaultOptions(b.TempDir())
		slaveOpts.ListenAddr = "127.0.0.1:0"
		slaveOpts.NameServers = nil
		slaveOpts.GossipAddr = "off"
		slaveOpts.Store.CommitLog.SegmentSize = master.Options().Store.CommitLog.SegmentSize
		slaveOpts.Replication.HAListenAddr = "127.0.0.1:0"
		slaveOf(master, 1)(&slaveOpts)
		slave, err := newBroker(slaveOpts, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := slave.Start(); err != nil {
			b.Fatal(err)
		}
		for slave.Store().CommitLog().MaxOffset() < size {
			time.Sleep(200 * time.Microsecond)
		}
		b.StopTimer()
		for slave.Store().DispatchedOffset() < size {
			time.Sleep(200 * time.Microsecond)
		}
		dispatched += time.Since(start)
		if err := slave.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(dispatched.Milliseconds())/float64(b.N), "dispatched-ms")
}
