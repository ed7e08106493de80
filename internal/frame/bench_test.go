package frame

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// echoBroker answers every Send over gRPC as the frame handler below does.
type echoBroker struct {
	pb.UnimplementedBrokerServer
}

func (echoBroker) Send(_ context.Context, req *pb.SendRequest) (*pb.SendResponse, error) {
	return sendAnswer(req), nil
}

func sendAnswer(req *pb.SendRequest) *pb.SendResponse {
	return &pb.SendResponse{RequestId: req.RequestId, BrokerName: "bench",
		Results: []*pb.SendResult{{MsgId: "C0A800010000000000000001", QueueOffset: 1}}}
}

func benchRequest() *pb.SendRequest {
	return &pb.SendRequest{ProducerGroup: "bench", Messages: []*pb.Message{{Topic: "bench", Body: make([]byte, 1024)}}}
}

// BenchmarkRoundTrip measures one Send round trip over loopback with a 1 KiB
// body and a trivial handler: the transport's own cost. lockstep: one
// caller waiting for each answer; parallel: GOMAXPROCS×4 callers sharing
// the one connection. frame-app-ctx passes one long-lived cancellable
// context to every call, as an application does; frame-ctx-timeout bounds
// each call with a context of its own, as the SDK did, and frame-within
// with CallWithin, as it does.
//
//	go test -run - -bench RoundTrip -benchtime 2s ./internal/frame/
func BenchmarkRoundTrip(b *testing.B) {
	frameClient := func(b *testing.B) *Client {
		c := NewClient(benchFrameServer(b), Options{})
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	b.Run("frame", func(b *testing.B) {
		c := frameClient(b)
		run(b, func(ctx context.Context, req *pb.SendRequest) error {
			return c.Call(ctx, MethodSend, req, new(pb.SendResponse))
		})
	})
	b.Run("frame-app-ctx", func(b *testing.B) {
		c := frameClient(b)
		app, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		run(b, func(_ context.Context, req *pb.SendRequest) error {
			return c.Call(app, MethodSend, req, new(pb.SendResponse))
		})
	})
	b.Run("frame-ctx-timeout", func(b *testing.B) {
		c := frameClient(b)
		run(b, func(ctx context.Context, req *pb.SendRequest) error {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			return c.Call(ctx, MethodSend, req, new(pb.SendResponse))
		})
	})
	b.Run("frame-within", func(b *testing.B) {
		c := frameClient(b)
		run(b, func(ctx context.Context, req *pb.SendRequest) error {
			return c.CallWithin(ctx, 3*time.Second, MethodSend, req, new(pb.SendResponse))
		})
	})
	b.Run("grpc", func(b *testing.B) {
		addr := benchGRPCServer(b)
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cc.Close() })
		bc := pb.NewBrokerClient(cc)
		run(b, func(ctx context.Context, req *pb.SendRequest) error {
			_, err := bc.Send(ctx, req)
			return err
		})
	})
}

func run(b *testing.B, send func(context.Context, *pb.SendRequest) error) {
	ctx := context.Background()
	if err := send(ctx, benchRequest()); err != nil { // connect
		b.Fatal(err)
	}
	b.Run("lockstep", func(b *testing.B) {
		req := benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			if err := send(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(4)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := benchRequest()
			for pb.Next() {
				if err := send(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
}

func benchFrameServer(b *testing.B) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := NewServer(Options{}, nil)
	s.Handle(MethodSend, Handler{
		NewRequest: func() proto.Message { return new(pb.SendRequest) },
		Serve: func(_ context.Context, req proto.Message) proto.Message {
			return sendAnswer(req.(*pb.SendRequest))
		},
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				head := make([]byte, len(Magic))
				if _, err := io.ReadFull(nc, head); err != nil {
					_ = nc.Close()
					return
				}
				s.ServeConn(nc)
			})
		}
	})
	b.Cleanup(func() {
		_ = lis.Close()
		_ = s.Shutdown(context.Background())
		wg.Wait()
	})
	return lis.Addr().String()
}

func benchGRPCServer(b *testing.B) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterBrokerServer(gs, echoBroker{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	b.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}
