// Package grpcapi is the broker's gRPC front end: bolide.v1's Broker,
// Transaction, DeadLetter, Delay, BrokerHA and Acl services over the broker core,
// and whatever other services the assembler registers on the same
// grpc.Server (RocketMQ 5's apache.rocketmq.v2.MessagingService, package
// broker/frontend/grpcv5). Each handler converts its request, calls the core and converts the result;
// a coded error from the core becomes the response's Status. The SDK
// (package client) and the CLI speak this API.
package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/aclrpc"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Name labels this front end in metrics and logs.
const Name = "grpc"

// MaxMessage bounds one gRPC message: a 4 MiB body batch plus headroom.
const MaxMessage = 64 << 20

// MaxRecv bounds one received gRPC message: RocketMQ 5's proxy accepts
// 130 MiB, and its clients may batch up to that.
const MaxRecv = 130 << 20

// preface is how every HTTP/2 connection, and so every gRPC one, opens.
var preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// Frontend serves bolide.v1 over gRPC.
type Frontend struct {
	srv *grpc.Server
}

// streamWorkers is how many goroutines serve the server's streams (New).
const streamWorkers = 32

// New returns the gRPC front end of core b. Each extra function registers
// one more service on the same grpc.Server (before it serves).
//
// Keepalive is lenient: clients may ping as often as every second, with or
// without calls in flight (RocketMQ 5's clients hold idle Telemetry streams
// for hours), and connections are never aged out — a client whose
// connection the server closes drops it and its streams. The server pings
// an idle connection after a minute to find peers that are gone.
//
// Every bolide.v1 call goes through the access control of auth.go with the
// broker's guard; the services extra registers do not.
//
// Streams (a unary call is one too) are served by streamWorkers goroutines
// that live as long as the server, so that a call does not start on a
// fresh goroutine's small stack and copy it to bigger ones as it goes deep
// (13 % of the broker's CPU under RocketMQ 5 clients). A stream that finds
// every worker busy (long polls and Telemetry streams hold theirs) gets a
// goroutine of its own, as without workers.
func New(b *broker.Broker, extra ...func(grpc.ServiceRegistrar)) *Frontend {
	az := &authorizer{g: b.Guard()}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(az.unary),
		grpc.ChainStreamInterceptor(az.stream),
		grpc.MaxRecvMsgSize(MaxRecv),
		grpc.MaxSendMsgSize(MaxMessage),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.NumStreamWorkers(streamWorkers),
	)
	pb.RegisterBrokerServer(srv, &brokerService{b: b, az: az})
	pb.RegisterDelayServer(srv, &delayService{b: b})
	pb.RegisterBrokerHAServer(srv, &haService{b: b})
	pb.RegisterTransactionServer(srv, &transactionService{b: b})
	pb.RegisterDeadLetterServer(srv, &deadLetterService{b: b})
	pb.RegisterAclServer(srv, aclrpc.New(b.Guard(), nil)) // the interceptor admits admins only
	for _, register := range extra {
		register(srv)
	}
	return &Frontend{srv: srv}
}

// Name implements frontend.Frontend.
func (f *Frontend) Name() string { return Name }

// Claims takes connections that open with the HTTP/2 preface.
func (f *Frontend) Claims(head []byte) bool { return bytes.HasPrefix(preface, head) }

// Serve serves gRPC on lis until Shutdown.
func (f *Frontend) Serve(lis net.Listener) error {
	if err := f.srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Shutdown stops gracefully, cutting the calls still running when ctx ends.
func (f *Frontend) Shutdown(ctx context.Context) error {
	stopped := make(chan struct{})
	go func() { f.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		f.srv.Stop()
		<-stopped
		return ctx.Err()
	}
}
