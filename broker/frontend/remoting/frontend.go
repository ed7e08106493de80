package remoting

import (
	"context"
	"fmt"
	"net"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// Name labels this front end in metrics and logs.
const Name = "remoting"

// handler serves one request code. A nil response sends nothing.
type handler func(ctx context.Context, cs *connState, req *rmq.Command) *rmq.Command

// Frontend serves RocketMQ's remoting protocol on the broker's port.
type Frontend struct {
	b        *broker.Broker
	log      *zap.Logger
	srv      *rmq.Server
	handlers map[int32]handler
	// config is the allow-list of UPDATE_BROKER_CONFIG (admin.go).
	brokerConf *rmq.ConfigAllowList
}

// connState is what the front end keeps per connection.
type connState struct {
	conn *rmq.Conn
	sessionState
}

// New returns the remoting front end of core b.
func New(b *broker.Broker, log *zap.Logger) *Frontend {
	if log == nil {
		log = zap.NewNop()
	}
	f := &Frontend{b: b, log: log, handlers: make(map[int32]handler), brokerConf: brokerConfig(b)}
	for _, hs := range f.handlerSets() {
		for code, h := range hs {
			if _, dup := f.handlers[code]; dup {
				panic(fmt.Sprintf("remoting: request code %d registered twice", code))
			}
			f.handlers[code] = h
		}
	}
	// A send that waits for neither the disk nor the slaves is served on
	// the connection's reader: no goroutine per message, and the answers
	// to the sends that arrived together leave in one write.
	sendsWait := b.SendsWait()
	f.srv = rmq.NewServer(parker{f}, rmq.ServerOptions{
		Options: rmq.Options{Inline: func(req *rmq.Command) bool {
			switch req.Code {
			case rmq.SendMessage, rmq.SendMessageV2, rmq.SendBatchMessage:
				return !sendsWait
			case rmq.UpdateConsumerOffset, rmq.QueryConsumerOffset, rmq.GetMaxOffset, rmq.GetMinOffset:
				return true
			}
			return false
		}},
		OnOpen:  func(c *rmq.Conn) { c.SetValue(&connState{conn: c}) },
		OnClose: func(c *rmq.Conn) { f.closed(c.Value().(*connState)) },
	}, log)
	return f
}

// handlerSets are the request codes served, by part of the protocol; each
// code is classified in accessTable (access.go).
func (f *Frontend) handlerSets() []map[int32]handler {
	return []map[int32]handler{f.sendHandlers(), f.pullHandlers(), f.adminHandlers()}
}

// Name implements frontend.Frontend.
func (f *Frontend) Name() string { return Name }

// Claims takes connections that open with a frame length under 16 MiB:
// RocketMQ's protocol has no magic, and its first byte is then 0.
func (f *Frontend) Claims(head []byte) bool { return len(head) > 0 && head[0] == 0 }

// Serve serves the connections lis yields until lis is closed.
func (f *Frontend) Serve(lis net.Listener) error { return f.srv.Serve(lis) }

// Shutdown lets requests in flight finish until ctx ends, then closes the
// connections.
func (f *Frontend) Shutdown(ctx context.Context) error { return f.srv.Shutdown(ctx) }

// parker is the front end as the connections see it: pulls at the end of
// their queue are parked, the other requests served.
type parker struct{ f *Frontend }

func (p parker) ServeRemoting(ctx context.Context, c *rmq.Conn, req *rmq.Command) *rmq.Command {
	return p.f.serve(ctx, c, req)
}

func (p parker) Parks(req *rmq.Command) bool { return p.f.parksPull(req) }

func (p parker) Park(ctx context.Context, c *rmq.Conn, req *rmq.Command, reply func(*rmq.Command)) (*rmq.Command, func()) {
	ctx, refused := p.f.check(ctx, c, req)
	if refused != nil {
		return refused, nil
	}
	return p.f.parkPull(broker.WithFrontend(ctx, Name), req, reply)
}

func (f *Frontend) serve(ctx context.Context, c *rmq.Conn, req *rmq.Command) *rmq.Command {
	ctx, refused := f.check(ctx, c, req)
	if refused != nil {
		return refused
	}
	h, ok := f.handlers[req.Code]
	if !ok {
		f.log.Debug("request code not supported", zap.Int32("code", req.Code), zap.Stringer("remote", c.RemoteAddr()))
		return req.Reply(rmq.RequestCodeNotSupported, fmt.Sprintf("request code %d not supported", req.Code))
	}
	return h(broker.WithFrontend(ctx, Name), c.Value().(*connState), req)
}
