// Package framed is the broker's frame front end (internal/frame): the data
// path, bolide.v1's Send and Pull, at a fraction of gRPC's CPU cost per
// call, with the same meaning as their gRPC counterparts (both go through
// broker/frontend/v1wire). The SDK uses it for sends and pulls when the
// broker offers it; everything else goes over gRPC.
package framed

import (
	"context"
	"net"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/frontend"
	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/hotwire"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Name labels this front end in metrics and logs.
const Name = "frame"

// Frontend serves the frame protocol.
type Frontend struct {
	srv *frame.Server
}

// New returns the frame front end of core b; maxFrame bounds one frame.
//
// Access control: a connection authenticates once, with the Auth request
// right after the magic (the signed-date header of package auth, checked
// by the broker's guard); its principal is in the context of every later
// request. With ACL on, Send needs PUB on its topic and Pull SUB on its
// topic and group: a refusal (UNAUTHENTICATED on a connection without a
// successful Auth, NO_PERMISSION otherwise) is the response's Status and
// nothing is stored or read.
func New(b *broker.Broker, maxFrame int, log *zap.Logger) *Frontend {
	g := b.Guard()
	srv := frame.NewServer(frame.Options{MaxFrame: maxFrame, MaxInflight: 1024, Authenticate: frame.AuthenticateWith(g)}, log)
	// A send waits for the disk under sync flush, and for the slaves under
	// sync replication; both modes are fixed for the broker's life.
	sendsWait := b.SendsWait()
	srv.Handle(frame.MethodSend, frame.Handler{
		NewRequest: func() proto.Message { return new(pb.SendRequest) },
		// The bodies stay in the frame's buffer until the send is served:
		// the broker copies them into the records it stores and keeps
		// nothing of the request.
		Decode: func(payload []byte) (proto.Message, error) {
			req, err := v1wire.DecodeSendRequestInPlace(payload)
			if err != nil {
				return nil, err
			}
			return req, nil
		},
		KeepsPayload: true,
		Blocking:     func(proto.Message) bool { return sendsWait },
		Serve: func(ctx context.Context, req proto.Message) proto.Message {
			r := req.(*pb.SendRequest)
			if g.Enabled() {
				if err := v1wire.AuthorizeSend(g, auth.FromContext(ctx), frame.Peer(ctx), r); err != nil {
					return &pb.SendResponse{RequestId: r.RequestId, Status: wire.Status(err)}
				}
			}
			return sendResponse{v1wire.Send(ctx, b, Name, r)}
		},
	})
	srv.Handle(frame.MethodPull, frame.Handler{
		NewRequest: func() proto.Message { return new(pb.PullRequest) },
		// A long-polling pull waits for messages.
		Blocking: func(req proto.Message) bool { return req.(*pb.PullRequest).SuspendTimeoutMs > 0 },
		Serve: func(ctx context.Context, req proto.Message) proto.Message {
			r := req.(*pb.PullRequest)
			if g.Enabled() {
				if err := v1wire.AuthorizePull(g, auth.FromContext(ctx), frame.Peer(ctx), r); err != nil {
					return &pb.PullResponse{Status: wire.Status(err)}
				}
			}
			return v1wire.Pull(ctx, b, Name, r)
		},
		// A pull at the end of its queue is held without a goroutine: the
		// arrival of a message on the queue answers it. One with messages
		// to read reads them on its own goroutine.
		Parks: func(req proto.Message) bool {
			r := req.(*pb.PullRequest)
			return b.PullWouldWait(r.Topic, r.QueueId, r.Offset)
		},
		Park: func(ctx context.Context, req proto.Message, reply func(proto.Message)) (proto.Message, func()) {
			r := req.(*pb.PullRequest)
			if g.Enabled() {
				if err := v1wire.AuthorizePull(g, auth.FromContext(ctx), frame.Peer(ctx), r); err != nil {
					return &pb.PullResponse{Status: wire.Status(err)}, nil
				}
			}
			resp, cancel := v1wire.PullOrPark(ctx, b, Name, r, func(resp *pb.PullResponse) { reply(resp) })
			if cancel == nil {
				return resp, nil
			}
			return nil, cancel
		},
	})
	return &Frontend{srv: srv}
}

// Name implements frontend.Frontend.
func (f *Frontend) Name() string { return Name }

// Claims takes connections that open with the frame magic.
func (f *Frontend) Claims(head []byte) bool { return frame.OpensWithMagic(head) }

// Serve serves each connection lis yields on a goroutine of its own, until
// lis is closed.
func (f *Frontend) Serve(lis net.Listener) error {
	return f.srv.ServeListener(lis, frontend.SniffTimeout)
}

// Shutdown drains the connections: requests begun are answered until ctx
// ends, then the rest are cancelled and the connections closed.
func (f *Frontend) Shutdown(ctx context.Context) error {
	return f.srv.Shutdown(ctx)
}

// sendResponse writes a send's answer with internal/hotwire's encoder,
// which spares protobuf's reflection on every result of a batch
// (frame.Appender).
type sendResponse struct{ *pb.SendResponse }

func (r sendResponse) AppendProto(dst []byte) []byte {
	return hotwire.AppendSendResponse(dst, r.SendResponse)
}
