package nameserver

import (
	"context"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/portmux"
	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The NameServer's port also serves Bolide's frame protocol
// (internal/frame, connections that open with its magic), for one call:
// GetRoute, the route lookup a client makes for each topic it uses and
// again every 30 s, with the meaning of the gRPC call and at a fraction
// of its CPU on both sides. The SDK asks over it when the NameServer
// answers the magic, and over gRPC otherwise (Options.NoFrames, or a
// NameServer older than it). Access control is the gRPC call's: with ACL
// on, a connection identifies itself once with the Auth request, and a
// lookup from a connection without a successful one is answered
// UNAUTHENTICATED in its Status.

// frameBuffer is the size of a frame connection's read and write buffers:
// lookups and routes are small, and a NameServer may hold a connection
// for every client.
const frameBuffer = 4 << 10

// frameProtocol serves the frame protocol on the NameServer's port.
type frameProtocol struct{ srv *frame.Server }

func (s *Server) newFrames() frameProtocol {
	srv := frame.NewServer(frame.Options{MaxFrame: maxRecvMsgSize, BufferSize: frameBuffer,
		Authenticate: frame.AuthenticateWith(s.guard)}, s.lg.Named("frame"))
	srv.Handle(frame.MethodGetRoute, frame.Handler{
		NewRequest: func() proto.Message { return new(pb.GetRouteRequest) },
		Serve: func(ctx context.Context, req proto.Message) proto.Message {
			start := time.Now()
			resp := s.getRoute(req.(*pb.GetRouteRequest).GetTopic(),
				s.guard.Authenticated(auth.FromContext(ctx), frame.Peer(ctx)))
			s.observe("frame", "GetRoute", resp.GetStatus().GetCode().String(), start)
			return resp
		},
	})
	return frameProtocol{srv}
}

func (frameProtocol) Name() string { return "frame" }

func (frameProtocol) Claims(head []byte) bool { return frame.OpensWithMagic(head) }

func (p frameProtocol) Serve(lis net.Listener) error {
	return p.srv.ServeListener(lis, portmux.SniffTimeout)
}

// Shutdown answers the lookups begun and closes the connections; when ctx
// ends first, the rest are cut.
func (p frameProtocol) Shutdown(ctx context.Context) error { return p.srv.Shutdown(ctx) }

// RefusePlaintext answers a plain-text frame client of a port that
// accepts TLS only: the magic, then an error frame with the remark.
func (frameProtocol) RefusePlaintext(conn net.Conn, _ []byte) { plaintext.Frame(conn) }

// getRoute answers a route lookup whose caller authorized reports on (nil:
// allowed), for either protocol.
func (s *Server) getRoute(topic string, authorized error) *pb.GetRouteResponse {
	if authorized != nil {
		return &pb.GetRouteResponse{Status: wire.Status(authorized)}
	}
	rt, err := s.routes.Route(topic)
	if err != nil {
		return &pb.GetRouteResponse{Status: wire.Status(err)}
	}
	out := &pb.TopicRoute{}
	for _, q := range rt.Queues {
		out.QueueDatas = append(out.QueueDatas, &pb.QueueData{
			BrokerName: q.BrokerName, ReadQueueNums: q.ReadQueues, WriteQueueNums: q.WriteQueues,
			Perm: q.Perm, TopicSysFlag: q.SysFlag,
		})
	}
	for _, b := range rt.Brokers {
		out.BrokerDatas = append(out.BrokerDatas, brokerDataToProto(b))
	}
	return &pb.GetRouteResponse{Status: wire.Status(nil), Route: out}
}
