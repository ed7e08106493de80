package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/testutil"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Both transports carry the same sends and pulls: the default (frames)
// never opens a send stream; WithTransport(TransportGRPC) sends over the
// stream and pulls over gRPC.
func TestTransports(t *testing.T) {
	e := startEnv(t, 1, 1)
	for _, tr := range []Transport{TransportFrame, TransportGRPC} {
		t.Run(tr.String(), func(t *testing.T) {
			topic := "TestTransports-" + tr.String()
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := e.admin.CreateTopic(cctx, TopicSpec{Name: topic, Queues: 2}); err != nil {
				t.Fatal(err)
			}
			p := e.producer(WithTransport(tr))
			sent := e.sendN(p, topic, 20, nil)
			if len(sent) != 20 {
				t.Fatalf("%d sends", len(sent))
			}
			p.muxMu.Lock()
			for addr, m := range p.muxes {
				m.mu.Lock()
				stream := m.cur != nil
				m.mu.Unlock()
				if stream != (tr == TransportGRPC) {
					t.Errorf("%s: send stream to %s open: %v", tr, addr, stream)
				}
				if packs := m.packs.known(); packs != (tr == TransportFrame) {
					t.Errorf("%s: the broker at %s is taken to read packed sends: %v", tr, addr, packs)
				}
			}
			p.muxMu.Unlock()
			if (p.b.frames == nil) != (tr == TransportGRPC) {
				t.Errorf("%s: frame pool %v", tr, p.b.frames)
			}

			c, err := NewPullConsumer("pull-"+tr.String(), e.copts(WithTransport(tr), WithConsumeFrom(ConsumeFromFirst))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if err := c.Subscribe(topic, "*"); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			got := 0
			for got < 20 {
				pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				msgs, err := c.Poll(pctx)
				cancel()
				if err != nil {
					t.Fatalf("poll after %d messages: %v", got, err)
				}
				got += len(msgs)
			}
			if got != 20 {
				t.Fatalf("pulled %d messages, want 20", got)
			}
		})
	}
}

func TestParseTransport(t *testing.T) {
	for _, tr := range []Transport{TransportFrame, TransportGRPC} {
		if got, err := ParseTransport(tr.String()); err != nil || got != tr {
			t.Errorf("ParseTransport(%q) = %v, %v", tr, got, err)
		}
	}
	if _, err := ParseTransport("http"); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("ParseTransport(http): %v", err)
	}
	if _, err := NewProducer("pg", WithTransport(Transport(7))); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("unknown transport accepted: %v", err)
	}
}

// oldBroker is a broker that knows only gRPC: it stores nothing and
// answers sends on its send stream with their sequence number.
type oldBroker struct {
	pb.UnimplementedBrokerServer
	sends atomic.Int64
}

func (b *oldBroker) SendStream(stream pb.Broker_SendStreamServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		n := b.sends.Add(1)
		if err := stream.Send(&pb.SendResponse{RequestId: req.RequestId, BrokerName: "old",
			Results: []*pb.SendResult{{MsgId: "m", QueueOffset: n - 1}}}); err != nil {
			return err
		}
	}
}

// A broker that refuses the frame handshake is sent to over gRPC, and is
// not asked again.
func TestFrameFallsBackToGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	old := &oldBroker{}
	gs := grpc.NewServer()
	pb.RegisterBrokerServer(gs, old)
	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(lis) })
	defer func() {
		gs.Stop()
		wg.Wait()
	}()
	addr := lis.Addr().String()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	pool := newFramePool(options{transport: TransportFrame}, nil, zap.NewNop(), brokerFrames)
	defer pool.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs sync.WaitGroup
	defer runs.Wait()
	m := &sendMux{addr: addr, client: &brokerClient{BrokerClient: pb.NewBrokerClient(cc), addr: addr, frames: pool},
		parent: ctx, log: zap.NewNop(),
		goRun: func(fn func()) bool { runs.Go(fn); return true }}
	for i := range 3 {
		resp, err := m.do(ctx, 0, &pb.SendRequest{Messages: []*pb.Message{{Topic: "t", Body: []byte("x")}}}, false)
		if err != nil || resp.GetResults()[0].GetQueueOffset() != int64(i) {
			t.Fatalf("send %d to an old broker: %+v, %v", i, resp, err)
		}
	}
	if n := old.sends.Load(); n != 3 {
		t.Fatalf("the old broker served %d sends, want 3", n)
	}
	m.mu.Lock()
	stream := m.cur
	m.mu.Unlock()
	if stream == nil {
		t.Fatal("no send stream to the old broker")
	}
	defer stream.cancel()
	pool.mu.Lock()
	until, refused := pool.refused[addr]
	pool.mu.Unlock()
	if !refused || !until.IsZero() {
		t.Fatalf("the refusal was not remembered for good: %v %v", refused, until)
	}
}

// serveConns listens on 127.0.0.1:0 and hands each connection to handle,
// one after another, closing it when handle returns; it stops when the
// test ends. It returns the address.
func serveConns(t *testing.T, handle func(nc net.Conn)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { _ = lis.Close() })
	wg.Go(func() {
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			handle(nc)
			_ = nc.Close()
		}
	})
	return lis.Addr().String()
}

// A NameServer that closes a connection on the magic (one older than its
// frame lookups, or one draining) is asked over gRPC (the pool reports the
// call not made), then over frames again once closeRetry has passed; a
// broker pool (no closeRefuses) takes the same close for a broken connection.
func TestFramePoolCloseOnMagic(t *testing.T) {
	var accepted atomic.Int32
	addr := serveConns(t, func(nc net.Conn) {
		accepted.Add(1)
		head := make([]byte, len(frame.Magic))
		_, _ = io.ReadFull(nc, head)
	})
	ctx := context.Background()
	lookUp := func(p *framePool) (bool, error) {
		return p.call(ctx, 0, addr, frame.MethodGetRoute, &pb.GetRouteRequest{Topic: "t"}, new(pb.GetRouteResponse))
	}

	plain := newFramePool(options{transport: TransportFrame}, nil, zap.NewNop(), brokerFrames)
	defer plain.close()
	var ce *frame.ConnError
	if ok, err := lookUp(plain); !ok || !errors.As(err, &ce) || ce.Op != "handshake" {
		t.Fatalf("without closeRefuses: handled %v, %v; want a handshake error", ok, err)
	}

	pool := newFramePool(options{transport: TransportFrame}, nil, zap.NewNop(), nameServerFrames)
	defer pool.close()
	if ok, err := lookUp(pool); ok || err != nil {
		t.Fatalf("closed on the magic: handled %v, %v; want the call left to gRPC", ok, err)
	}
	n := accepted.Load()
	if ok, err := lookUp(pool); ok || err != nil || accepted.Load() != n {
		t.Fatalf("within closeRetry: handled %v, %v, %d new connections; want gRPC without a dial", ok, err, accepted.Load()-n)
	}
	pool.mu.Lock()
	pool.refused[addr] = time.Now().Add(-time.Second) // closeRetry has passed
	pool.mu.Unlock()
	if ok, err := lookUp(pool); ok || err != nil || accepted.Load() != n+1 {
		t.Fatalf("after closeRetry: handled %v, %v, %d new connections; want one new try", ok, err, accepted.Load()-n)
	}
}

// A frame connection that breaks under a call, or cannot be made, fails it
// with an error the retry and failover logic treats as gRPC's Unavailable.
func TestFrameConnErrorsAreRetryable(t *testing.T) {
	// A server that accepts, reads a request's first bytes and dies.
	addr := serveConns(t, func(nc net.Conn) {
		head := make([]byte, len(frame.Magic)+frame.HeaderSize)
		_, _ = io.WriteString(nc, frame.Magic)
		_, _ = io.ReadFull(nc, head)
	})
	pool := newFramePool(options{transport: TransportFrame}, nil, zap.NewNop(), brokerFrames)
	defer pool.close()
	ctx := context.Background()
	req := &pb.SendRequest{Messages: []*pb.Message{{Topic: "t", Body: []byte("x")}}}
	ok, err := pool.call(ctx, 0, addr, frame.MethodSend, req, new(pb.SendResponse))
	var ce *frame.ConnError
	if !ok || !errors.As(err, &ce) || !retryableSend(err) || !readUnavailable(err) {
		t.Fatalf("call on a connection that broke: %v (handled %v, retryable %v)", err, ok, retryableSend(err))
	}

	closed, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	ok, err = pool.call(ctx, 0, closed, frame.MethodPull, &pb.PullRequest{}, new(pb.PullResponse))
	if !ok || !errors.As(err, &ce) || ce.Op != "dial" || !retryableSend(err) {
		t.Fatalf("call to a closed port: %v", err)
	}

	if err := pool.close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := pool.call(ctx, 0, addr, frame.MethodSend, req, new(pb.SendResponse)); !ok || !errors.Is(err, ErrClosed) {
		t.Fatalf("call on a closed pool: %v", err)
	}
}

// A broker older than packed sends reads a packed request as one without
// messages and refuses it (INVALID_PARAMETER, "holds no message"): the
// send is made again with its messages as they are, and later sends to
// that broker, answered or oneway, are not packed. A broker that reads
// them gets them packed (TestTransports).
func TestUnpackedForOlderBrokers(t *testing.T) {
	var packedSeen, plainServed atomic.Int32
	srv := frame.NewServer(frame.Options{}, zap.NewNop())
	srv.Handle(frame.MethodSend, frame.Handler{
		NewRequest: func() proto.Message { return new(pb.SendRequest) },
		Serve: func(_ context.Context, r proto.Message) proto.Message {
			req := r.(*pb.SendRequest)
			if len(req.Packed) > 0 {
				packedSeen.Add(1)
			}
			if len(req.Messages) == 0 { // all an older broker's decoder finds in a packed request
				return &pb.SendResponse{RequestId: req.RequestId, Status: &pb.Status{Code: pb.Code_INVALID_PARAMETER, Message: "send request holds no message"}}
			}
			n := plainServed.Add(1)
			return &pb.SendResponse{RequestId: req.RequestId, Status: &pb.Status{},
				Results: []*pb.SendResult{{MsgId: "m", QueueOffset: int64(n - 1)}}}
		},
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.ServeListener(lis, time.Second) })
	defer func() {
		_ = srv.Shutdown(context.Background())
		_ = lis.Close()
		wg.Wait()
	}()
	addr := lis.Addr().String()
	pool := newFramePool(options{transport: TransportFrame}, nil, zap.NewNop(), brokerFrames)
	defer pool.close()
	ctx := context.Background()
	m := &sendMux{addr: addr, client: &brokerClient{addr: addr, frames: pool}, parent: ctx, log: zap.NewNop()}
	req := func() *pb.SendRequest {
		return &pb.SendRequest{Messages: []*pb.Message{{Topic: "t", Body: []byte("x"), Properties: map[string]string{"k": "v"}}}}
	}
	if _, err := m.do(ctx, 0, req(), true); err != nil { // oneway, nothing known yet: not packed
		t.Fatal(err)
	}
	for i := range 3 {
		resp, err := m.do(ctx, 0, req(), false)
		if err != nil || fromStatus(resp.GetStatus()) != nil || len(resp.GetResults()) != 1 {
			t.Fatalf("send %d: %v %v", i, resp, err)
		}
	}
	if _, err := m.do(ctx, 0, req(), true); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the oneway sends to be served", func() bool { return plainServed.Load() == 5 })
	if n := packedSeen.Load(); n != 1 {
		t.Fatalf("%d packed requests reached the older broker, want the first answered one only", n)
	}
	if m.packs.maybe() || m.packs.known() {
		t.Fatal("the broker is still taken to read packed sends")
	}
}
