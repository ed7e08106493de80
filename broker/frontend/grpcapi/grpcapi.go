// Package grpcapi is the broker's gRPC front end: bolide.v1's Broker,
// Transaction, DeadLetter, Delay and BrokerHA services over the broker core.
// Each handler converts its request, calls the core and converts the result;
// a coded error from the core becomes the response's Status. The SDK
// (package client) and the CLI speak this API.
package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"net"

	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Name labels this front end in metrics and logs.
const Name = "grpc"

// MaxMessage bounds one gRPC message: a 4 MiB body batch plus headroom.
const MaxMessage = 64 << 20

// preface is how every HTTP/2 connection, and so every gRPC one, opens.
var preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// Frontend serves bolide.v1 over gRPC.
type Frontend struct {
	srv *grpc.Server
}

// New returns the gRPC front end of core b.
func New(b *broker.Broker) *Frontend {
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage))
	pb.RegisterBrokerServer(srv, &brokerService{b: b})
	pb.RegisterDelayServer(srv, &delayService{b: b})
	pb.RegisterBrokerHAServer(srv, &haService{b: b})
	pb.RegisterTransactionServer(srv, &transactionService{b: b})
	pb.RegisterDeadLetterServer(srv, &deadLetterService{b: b})
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
