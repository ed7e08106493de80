package nameserver

import (
	"bytes"
	"context"
	"errors"
	"net"

	"google.golang.org/grpc"
)

// The NameServer's port serves three protocols, sorted by internal/portmux
// from each connection's first four bytes: bolide.v1 over gRPC (the HTTP/2
// preface "PRI "), unless Options.NoFrames route lookups over Bolide's
// frame protocol (its magic "BLD1"; framed.go), and unless
// Options.Remoting is off RocketMQ's remoting protocol (a big-endian frame
// length under 16 MiB, so a first byte 0x00). A connection none claims is
// closed.

// http2Preface is how every HTTP/2 connection, and so every gRPC one, opens.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// grpcProtocol serves the NameServer's gRPC API on the connections that
// open with the HTTP/2 preface.
type grpcProtocol struct{ srv *grpc.Server }

func (grpcProtocol) Name() string { return "grpc" }

func (grpcProtocol) Claims(head []byte) bool { return bytes.HasPrefix(http2Preface, head) }

func (p grpcProtocol) Serve(lis net.Listener) error {
	if err := p.srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Shutdown stops gracefully, cutting the calls still running when ctx ends.
func (p grpcProtocol) Shutdown(ctx context.Context) error {
	stopped := make(chan struct{})
	go func() { p.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		p.srv.Stop()
		<-stopped
		return ctx.Err()
	}
}
