package broker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func frameClient(t *testing.T, addr string) *frame.Client {
	t.Helper()
	c := frame.NewClient(addr, frame.Options{})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func frameSend(t *testing.T, c *frame.Client, msgs ...*pb.Message) *pb.SendResponse {
	t.Helper()
	resp := new(pb.SendResponse)
	if err := c.Call(context.Background(), frame.MethodSend, &pb.SendRequest{Messages: msgs}, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// One port serves both front ends; a send and a pull mean the same on both.
func TestFramePortServesBoth(t *testing.T) {
	b, gc := testBroker(t)
	createTopic(t, gc, "both", 2)
	fc := frameClient(t, b.Addr())

	resp := frameSend(t, fc, msg("both", 1, "over frames", "tag", "k1"), msg("both", 1, "second", "tag", ""))
	if err := wire.FromStatus(resp.Status); err != nil || len(resp.Results) != 2 || resp.BrokerName != b.Options().BrokerName {
		t.Fatalf("frame send: %v %+v", err, resp)
	}
	if r := resp.Results[1]; r.QueueId != 1 || r.QueueOffset != 1 || r.MsgId == "" {
		t.Fatalf("second result %+v", r)
	}
	gresp, err := gc.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{msg("both", 1, "over grpc", "", "")}})
	if err != nil || wire.FromStatus(gresp.Status) != nil || gresp.Results[0].QueueOffset != 2 {
		t.Fatalf("grpc send after frame sends: %v %+v", err, gresp)
	}
	waitQueue(t, gc, "both", 1, 3)

	req := &pb.PullRequest{Group: "g", Topic: "both", QueueId: 1, MaxMessages: 32, CommitOffset: -1}
	fpull := new(pb.PullResponse)
	if err := fc.Call(context.Background(), frame.MethodPull, req, fpull); err != nil {
		t.Fatal(err)
	}
	gpull, err := gc.Pull(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if fpull.PullStatus != pb.PullStatus_FOUND || len(fpull.Records) != 3 || fpull.NextOffset != 3 {
		t.Fatalf("frame pull: %v, %d records, next %d", fpull.PullStatus, len(fpull.Records), fpull.NextOffset)
	}
	for i := range gpull.Records {
		if string(gpull.Records[i]) != string(fpull.Records[i]) {
			t.Fatalf("record %d differs between the front ends", i)
		}
	}

	// Failures come back in the Status, as over gRPC.
	resp = frameSend(t, fc, msg("no-such-topic", 0, "x", "", ""))
	if err := wire.FromStatus(resp.Status); !errors.Is(err, wire.ErrTopicNotExist) {
		t.Fatalf("send to a missing topic: %v", err)
	}
	if err := fc.Call(context.Background(), frame.MethodSend, &pb.SendRequest{Messages: []*pb.Message{{}}}, resp); err != nil ||
		!errors.Is(wire.FromStatus(resp.Status), wire.ErrIllegalTopic) {
		t.Fatalf("send of an empty message: %v %v", err, resp.Status)
	}
	fpull.Reset()
	if err := fc.Call(context.Background(), frame.MethodPull, &pb.PullRequest{Topic: "both", QueueId: 9}, fpull); err != nil ||
		!errors.Is(wire.FromStatus(fpull.Status), wire.ErrInvalidParameter) {
		t.Fatalf("pull of a missing queue: %v %v", err, fpull.Status)
	}
}

// A long-polling pull and, under sync flush, sends run on their own
// goroutines: requests behind them on the connection are served.
func TestFrameBlockingRequestsDoNotStall(t *testing.T) {
	b, gc := testBroker(t, func(o *broker.Options) { o.Store.CommitLog.FlushMode = commitlog.FlushSync })
	createTopic(t, gc, "poll", 1)
	fc := frameClient(t, b.Addr())

	pulled := make(chan *pb.PullResponse, 1)
	errc := make(chan error, 1)
	go func() {
		resp := new(pb.PullResponse)
		err := fc.Call(context.Background(), frame.MethodPull,
			&pb.PullRequest{Group: "g", Topic: "poll", MaxMessages: 8, SuspendTimeoutMs: 60_000, CommitOffset: -1}, resp)
		if err != nil {
			errc <- err
			return
		}
		pulled <- resp
	}()
	// The pull is parked until a message arrives; the send behind it on
	// the same connection stores that message.
	resp := frameSend(t, fc, msg("poll", 0, "wake up", "", ""))
	if err := wire.FromStatus(resp.Status); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	case p := <-pulled:
		if p.PullStatus != pb.PullStatus_FOUND || len(p.Records) != 1 {
			t.Fatalf("long poll: %v with %d records", p.PullStatus, len(p.Records))
		}
	}
}

// Bytes that are neither protocol close that connection only.
func TestFramePortGarbage(t *testing.T) {
	b, gc := testBroker(t)
	createTopic(t, gc, "junk", 1)
	for _, junk := range []string{
		"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",                     // to gRPC, which refuses it
		frame.Magic + "\x00\x00\x00\x07\x09\x00\x01\x00\x00\x00\x01", // a frame of kind 9
		frame.Magic + "\xff\xff\xff\xff\x01\x00\x01\x00\x00\x00\x01", // a 4 GiB frame
	} {
		nc, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(nc, junk); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, nc) // until the broker closes it
		_ = nc.Close()
	}
	fc := frameClient(t, b.Addr())
	if resp := frameSend(t, fc, msg("junk", 0, "still up", "", "")); wire.FromStatus(resp.Status) != nil {
		t.Fatalf("frame send after garbage: %v", resp.Status)
	}
	if _, err := gc.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{msg("junk", 0, "x", "", "")}}); err != nil {
		t.Fatalf("grpc send after garbage: %v", err)
	}
}

// Close answers the frame requests in flight (a parked pull ends with no
// new message), then closes the connections; later calls fail with a
// connection error.
func TestCloseDrainsFrameConnections(t *testing.T) {
	b, gc := testBroker(t)
	createTopic(t, gc, "drain", 1)
	fc := frameClient(t, b.Addr())
	frameSend(t, fc, msg("drain", 0, "x", "", ""))
	waitQueue(t, gc, "drain", 0, 1)

	pulled := make(chan error, 1)
	go func() {
		resp := new(pb.PullResponse)
		err := fc.Call(context.Background(), frame.MethodPull,
			&pb.PullRequest{Group: "g", Topic: "drain", Offset: 1, SuspendTimeoutMs: 60_000, CommitOffset: -1}, resp)
		if err == nil && resp.PullStatus != pb.PullStatus_NO_NEW_MESSAGE {
			err = errors.New("parked pull answered " + resp.PullStatus.String())
		}
		pulled <- err
	}()
	// The pull takes its queue's arrival signal before it parks.
	testutil.WaitFor(t, 10*time.Second, "the pull to reach the broker", func() error {
		if ok := b.PullParked("drain", 0); !ok {
			return errors.New("no pull of the queue yet")
		}
		return nil
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-pulled; err != nil {
		t.Fatalf("pull in flight at Close: %v", err)
	}
	var ce *frame.ConnError
	if err := fc.Call(context.Background(), frame.MethodSend, &pb.SendRequest{}, new(pb.SendResponse)); !errors.As(err, &ce) {
		t.Fatalf("send to a closed broker: %v, want a *frame.ConnError", err)
	}
}
