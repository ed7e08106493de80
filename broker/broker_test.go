package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBroker starts a broker on 127.0.0.1:0 without NameServers and returns
// a client for it.
// testOptions are the options of a test broker storing in dir: loopback,
// no NameServers or gossip, small files.
func testOptions(dir string) broker.Options {
	opts := broker.DefaultOptions(dir)
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 1000
	opts.Store.Index.SlotCount = 1000
	opts.Store.Index.MaxEntries = 4000
	opts.MaxMessageSize = 1 << 20
	return opts
}

// newBroker builds a broker as the daemon does: the core with its front
// ends and its links to the NameServers and its master.
func newBroker(opts broker.Options, log *zap.Logger) (*server.Server, error) {
	return server.New(opts, log)
}

func testBroker(t *testing.T, mutate ...func(*broker.Options)) (*server.Server, pb.BrokerClient) {
	t.Helper()
	opts := testOptions(t.TempDir())
	for _, f := range mutate {
		f(&opts)
	}
	b, err := newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b, pb.NewBrokerClient(conn)
}

func createTopic(t *testing.T, c pb.BrokerClient, name string, queues int32) {
	t.Helper()
	resp, err := c.CreateTopic(context.Background(), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: name, ReadQueueNums: queues, WriteQueueNums: queues}})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("create topic: %v %v", err, resp.GetStatus())
	}
}

// waitQueue polls until a queue's max offset reaches n (dispatch is
// asynchronous).
func waitQueue(t *testing.T, c pb.BrokerClient, topic string, q int32, n int64) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("queue %s/%d to reach %d messages", topic, q, n), func() error {
		r, err := c.GetQueueOffsets(context.Background(), &pb.GetQueueOffsetsRequest{Topic: topic, QueueId: q})
		if err != nil {
			return err
		}
		if r.MaxOffset < n {
			return fmt.Errorf("max offset %d", r.MaxOffset)
		}
		return nil
	})
}

func msg(topic string, q int32, body, tag, keys string) *pb.Message {
	return &pb.Message{Topic: topic, QueueId: q, Body: []byte(body),
		Properties: map[string]string{message.PropertyTags: tag, message.PropertyKeys: keys}}
}

func TestSendPullOffsetsLookup(t *testing.T) {
	_, c := testBroker(t)
	ctx := context.Background()
	createTopic(t, c, "orders", 2)
	var ids []string
	for i := 0; i < 10; i++ {
		resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("orders", int32(i%2), fmt.Sprint("m", i), fmt.Sprint("t", i%3), fmt.Sprint("order-", i))}})
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Fatalf("send: %v %v", err, resp.GetStatus())
		}
		if r := resp.Results[0]; r.QueueOffset != int64(i/2) || r.QueueId != int32(i%2) {
			t.Fatalf("send %d: %+v", i, r)
		}
		ids = append(ids, resp.Results[0].MsgId)
	}
	waitQueue(t, c, "orders", 0, 5)
	waitQueue(t, c, "orders", 1, 5)
	pull, err := c.Pull(ctx, &pb.PullRequest{Group: "g", Topic: "orders", QueueId: 0, Offset: 0, MaxMessages: 32, CommitOffset: -1})
	if err != nil || pull.PullStatus != pb.PullStatus_FOUND || len(pull.Records) != 5 || pull.NextOffset != 5 {
		t.Fatalf("pull: %v %+v", err, pull)
	}
	m, _ := message.Decode(pull.Records[2])
	if string(m.Body) != "m4" {
		t.Fatalf("third message of queue 0 is %q", m.Body)
	}
	// Tag filter: queue 0 holds i = 0,2,4,6,8 with tags t0,t2,t1,t0,t2.
	pull, _ = c.Pull(ctx, &pb.PullRequest{Topic: "orders", QueueId: 0, TagExpression: "t0 || t1", CommitOffset: -1})
	if len(pull.Records) != 3 {
		t.Fatalf("tag filter returned %d", len(pull.Records))
	}
	if _, err := c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "orders", QueueId: 0, Offset: 3}}}); err != nil {
		t.Fatal(err)
	}
	q, _ := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "orders", QueueId: 0})
	if q.Offset != 3 {
		t.Fatalf("offset %d", q.Offset)
	}
	// A topic the broker does not know is skipped; alone it is refused.
	cr, err := c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{
		{Topic: "gone", QueueId: 0, Offset: 9}, {Topic: "orders", QueueId: 0, Offset: 4}}})
	if err != nil || wire.FromStatus(cr.Status) != nil {
		t.Fatalf("commit with an unknown topic: %v %v", err, cr.GetStatus())
	}
	if q, _ := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "orders", QueueId: 0}); q.Offset != 4 {
		t.Fatalf("offset %d after a commit next to an unknown topic", q.Offset)
	}
	cr, err = c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "gone", QueueId: 0, Offset: 9}}})
	if err != nil || cr.GetStatus().GetCode() != pb.Code_TOPIC_NOT_EXIST {
		t.Fatalf("commit of an unknown topic alone: %v %v", err, cr.GetStatus())
	}
	view, _ := c.ViewMessage(ctx, &pb.ViewMessageRequest{MsgId: ids[7]})
	if m, err := message.Decode(view.Record); err != nil || string(m.Body) != "m7" {
		t.Fatalf("view: %v", err)
	}
	var qr *pb.QueryMessageResponse
	testutil.Eventually(t, 5*time.Second, "the key to be indexed", func() bool {
		qr, _ = c.QueryMessage(ctx, &pb.QueryMessageRequest{Topic: "orders", Key: "order-6", Max: 4})
		return len(qr.GetRecords()) == 1
	})
	if m, err := message.Decode(qr.Records[0]); err != nil || string(m.Body) != "m6" {
		t.Fatalf("query: %v", err)
	}
	stats, _ := c.GetConsumeStats(ctx, &pb.GetConsumeStatsRequest{Group: "g", Topic: "orders"})
	if len(stats.Queues) != 2 || stats.Queues[0].BrokerOffset != 5 || stats.Queues[0].ConsumerOffset != 4 {
		t.Fatalf("stats %+v", stats.Queues)
	}
}

func TestLongPollWakesOnSend(t *testing.T) {
	_, c := testBroker(t)
	ctx := context.Background()
	createTopic(t, c, "lp", 1)
	type result struct {
		resp *pb.PullResponse
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		resp, _ := c.Pull(ctx, &pb.PullRequest{Topic: "lp", Offset: 0, SuspendTimeoutMs: 10_000, CommitOffset: -1})
		done <- result{resp, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond) // let the pull park; the assertion does not depend on it
	if _, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("lp", 0, "x", "", "")}}); err != nil {
		t.Fatal(err)
	}
	sent := time.Now() // the send is acknowledged
	r := <-done
	if r.resp.PullStatus != pb.PullStatus_FOUND {
		t.Fatalf("parked pull returned %v", r.resp.PullStatus)
	}
	// Not woken, the pull would be answered at its 10 s suspend timeout;
	// half of it tells the two apart on a loaded machine.
	if d := r.at.Sub(sent); d > 5*time.Second {
		t.Fatalf("parked pull answered %v after the send: not woken by it", d)
	}
}

func TestBadInput(t *testing.T) {
	_, c := testBroker(t)
	ctx := context.Background()
	createTopic(t, c, "ok", 1)
	big := make([]byte, 1<<20+1)
	props := map[string]string{}
	for i := 0; i < 2000; i++ {
		props[fmt.Sprintf("key-%04d", i)] = "value-value-value"
	}
	cases := []struct {
		name string
		m    *pb.Message
		code pb.Code
	}{
		{"illegal topic", msg("bad topic!", 0, "x", "", ""), pb.Code_ILLEGAL_TOPIC},
		{"long topic", msg(string(make([]byte, 200)), 0, "x", "", ""), pb.Code_ILLEGAL_TOPIC},
		{"unknown topic", msg("nope", 0, "x", "", ""), pb.Code_TOPIC_NOT_EXIST},
		{"empty body", msg("ok", 0, "", "", ""), pb.Code_MESSAGE_ILLEGAL},
		{"oversized body", &pb.Message{Topic: "ok", Body: big}, pb.Code_MESSAGE_TOO_LARGE},
		{"too many properties", &pb.Message{Topic: "ok", Body: []byte("x"), Properties: props}, pb.Code_PROPERTIES_TOO_LARGE},
		{"separator in property", &pb.Message{Topic: "ok", Body: []byte("x"), Properties: map[string]string{"a\x01": "b"}}, pb.Code_MESSAGE_ILLEGAL},
		{"queue out of range", msg("ok", 5, "x", "", ""), pb.Code_INVALID_PARAMETER},
		{"system topic", msg(message.ScheduleTopic, 0, "x", "", ""), pb.Code_NO_PERMISSION},
		{"delay level not a number", &pb.Message{Topic: "ok", Body: []byte("x"), Properties: map[string]string{message.PropertyDelayLevel: "two"}}, pb.Code_MESSAGE_ILLEGAL},
		{"timer beyond the maximum delay", &pb.Message{Topic: "ok", Body: []byte("x"), Properties: map[string]string{message.PropertyTimerDelaySec: "34560001"}}, pb.Code_ILLEGAL_DELIVERY_TIME},
		{"timer system topic", msg(message.TimerTopic, 0, "x", "", ""), pb.Code_NO_PERMISSION},
		{"half message without producer group", &pb.Message{Topic: "ok", Body: []byte("x"), SysFlag: message.SysFlagTransPrepared}, pb.Code_MESSAGE_ILLEGAL},
	}
	for _, tc := range cases {
		resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{tc.m}})
		if err != nil {
			t.Fatalf("%s: transport error %v", tc.name, err)
		}
		if resp.Status.GetCode() != tc.code {
			t.Errorf("%s: code %v (%s), want %v", tc.name, resp.Status.GetCode(), resp.Status.GetMessage(), tc.code)
		}
	}
	pull, _ := c.Pull(ctx, &pb.PullRequest{Topic: "nope", CommitOffset: -1})
	if pull.Status.GetCode() != pb.Code_TOPIC_NOT_EXIST {
		t.Errorf("pull of unknown topic: %v", pull.Status)
	}
	pull, _ = c.Pull(ctx, &pb.PullRequest{Topic: "ok", Offset: 1000, CommitOffset: -1})
	if pull.PullStatus != pb.PullStatus_OFFSET_ILLEGAL && pull.PullStatus != pb.PullStatus_NO_NEW_MESSAGE {
		t.Errorf("pull beyond max: %v", pull.PullStatus)
	}
	if resp, _ := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("ok", 0, "x", "", "")}}); wire.FromStatus(resp.Status) != nil {
		t.Fatal(resp.Status)
	}
	// Wait (long poll) until the message is dispatched, then pull past it.
	if p, _ := c.Pull(ctx, &pb.PullRequest{Topic: "ok", SuspendTimeoutMs: 5000, CommitOffset: -1}); p.PullStatus != pb.PullStatus_FOUND {
		t.Fatalf("message not visible: %v", p.PullStatus)
	}
	pull, _ = c.Pull(ctx, &pb.PullRequest{Topic: "ok", Offset: 1000, CommitOffset: -1})
	if pull.PullStatus != pb.PullStatus_OFFSET_ILLEGAL || pull.NextOffset != 1 {
		t.Errorf("pull beyond max: %v next %d", pull.PullStatus, pull.NextOffset)
	}
	gl, _ := c.GetConsumerList(ctx, &pb.GetConsumerListRequest{Group: "unknown-group"})
	if gl.Status.GetCode() != pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST {
		t.Errorf("unknown group: %v", gl.Status)
	}
	// The broker still serves.
	resp, _ := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("ok", 0, "still", "", "")}})
	if wire.FromStatus(resp.Status) != nil {
		t.Fatal(resp.Status)
	}
}

// rawCodec sends bytes as they are, to put garbage on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func TestGarbagePayloadIsRejected(t *testing.T) {
	b, c := testBroker(t)
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	for _, garbage := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 0x0f},             // a varint that never ends
		{0x1a, 0x80, 0x80, 0x80, 0x80, 0x10},       // a length far past the end
		[]byte("this is not a protobuf message!!"), // text
	} {
		in, out := garbage, []byte(nil)
		err := conn.Invoke(ctx, "/bolide.v1.Broker/Send", &in, &out, grpc.ForceCodec(rawCodec{}))
		if err == nil {
			t.Fatalf("garbage %x accepted", garbage)
		}
	}
	// Still serving.
	createTopic(t, c, "after-garbage", 1)
	resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("after-garbage", 0, "ok", "", "")}})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("broker stopped serving after garbage: %v %v", err, resp.GetStatus())
	}
}

// TestShutdownWithDrainDeadline: Shutdown with a short drain deadline (a
// daemon's --drain-timeout) ends an open send stream, returns, and still
// closes the store cleanly: what was acknowledged is there after a restart.
func TestShutdownWithDrainDeadline(t *testing.T) {
	b, c := testBroker(t) // its cleanup's Close is a no-op after Shutdown
	createTopic(t, c, "drain", 1)
	stream, err := c.SendStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.SendRequest{Messages: []*pb.Message{msg("drain", 0, "kept", "", "")}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || wire.FromStatus(r.Status) != nil {
		t.Fatalf("send on the stream: %v %v", err, r.GetStatus())
	}
	// The stream stays open.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(began); took >= server.CloseDrain {
		t.Fatalf("Shutdown with a 200 ms drain took %v (Close's own bound is %v)", took, server.CloseDrain)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the send stream is still open after Shutdown")
	}

	b2, err := newBroker(b.Options(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if !b2.Store().Recovery().CleanShutdown {
		t.Fatal("the store did not close cleanly")
	}
	if n := b2.Store().CommitLog().MaxOffset(); n == 0 {
		t.Fatal("the acknowledged message is gone after the restart")
	}
}
