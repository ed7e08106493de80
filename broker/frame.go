package broker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/frame"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The broker's port serves two front ends: gRPC for everything, and the
// frame protocol (internal/frame) for the data path, sends and pulls, at a
// fraction of gRPC's CPU cost per call. A connection's first bytes tell
// them apart: the frame magic, or gRPC's HTTP/2 preface (anything that is
// not the magic goes to gRPC, which rejects what it does not understand).

// sniffTimeout bounds the wait for a new connection's first bytes: clients
// of both protocols speak first, at once.
const sniffTimeout = 10 * time.Second

// newFrameServer returns the frame front end: Send and Pull, with the same
// semantics as their gRPC counterparts (sendWire, pullWire).
func newFrameServer(b *Broker) *frame.Server {
	s := frame.NewServer(frame.Options{MaxFrame: maxFrame, MaxInflight: maxStreamInflight}, b.log.Named("frame"))
	// A send waits for the disk under sync flush, and for the slaves under
	// sync replication; both modes are fixed for the broker's life.
	sendsWait := b.store.CommitLog().Options().FlushMode == commitlog.FlushSync ||
		b.repl.Mode() == ReplicationSync
	s.Handle(frame.MethodSend, frame.Handler{
		NewRequest: func() proto.Message { return new(pb.SendRequest) },
		Blocking:   func(proto.Message) bool { return sendsWait },
		Serve: func(ctx context.Context, req proto.Message) proto.Message {
			return b.sendWire(ctx, protoFrame, req.(*pb.SendRequest))
		},
	})
	s.Handle(frame.MethodPull, frame.Handler{
		NewRequest: func() proto.Message { return new(pb.PullRequest) },
		// A long-polling pull waits for messages.
		Blocking: func(req proto.Message) bool { return req.(*pb.PullRequest).SuspendTimeoutMs > 0 },
		Serve: func(ctx context.Context, req proto.Message) proto.Message {
			return b.pullWire(ctx, protoFrame, req.(*pb.PullRequest))
		},
	})
	return s
}

// portMux accepts the connections of the broker's listener and hands each
// to gRPC (through grpcLis) or to the frame server.
type portMux struct {
	lis     net.Listener
	grpcLis *connListener
	frames  *frame.Server
	log     *zap.Logger

	// mu protects sniffing (connections whose first bytes are awaited)
	// and closed.
	mu       sync.Mutex
	sniffing map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup // one per accepted connection until handed over or served
}

func newPortMux(lis net.Listener, frames *frame.Server, log *zap.Logger) *portMux {
	return &portMux{lis: lis, frames: frames, log: log,
		grpcLis:  &connListener{addr: lis.Addr(), conns: make(chan net.Conn), done: make(chan struct{})},
		sniffing: make(map[net.Conn]struct{})}
}

// serve accepts connections until stopAccepting, then waits for the
// connections it has not handed over yet. Frame connections are served on
// the goroutine that sorted them: serve returns after they end too.
func (m *portMux) serve() {
	defer m.wg.Wait()
	var backoff time.Duration
	for {
		nc, err := m.lis.Accept()
		if err != nil {
			if m.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			if isTemporary(err) { // out of file descriptors, say
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				m.log.Warn("accept failed, retrying", zap.Error(err), zap.Duration("backoff", backoff))
				time.Sleep(backoff)
				continue
			}
			m.log.Error("broker listener failed", zap.Error(err))
			return
		}
		backoff = 0
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			_ = nc.Close()
			return
		}
		m.sniffing[nc] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.route(nc)
	}
}

// route reads a connection's first bytes and hands it over.
func (m *portMux) route(nc net.Conn) {
	defer m.wg.Done()
	head := make([]byte, len(frame.Magic))
	_ = nc.SetReadDeadline(time.Now().Add(sniffTimeout))
	n, err := io.ReadFull(nc, head)
	_ = nc.SetReadDeadline(time.Time{})
	m.mu.Lock()
	delete(m.sniffing, nc)
	closed := m.closed
	m.mu.Unlock()
	switch {
	case closed || err != nil:
		if err != nil && !closed {
			m.log.Debug("connection closed before its protocol was known", zap.Stringer("remote", nc.RemoteAddr()), zap.Error(err))
		}
		_ = nc.Close()
	case bytes.Equal(head, []byte(frame.Magic)):
		m.frames.ServeConn(nc)
	default:
		m.grpcLis.hand(&replayConn{Conn: nc, head: head[:n]})
	}
}

// stopAccepting closes the listener and the connections still being
// sorted. The connections already handed over are the front ends' to stop.
func (m *portMux) stopAccepting() {
	m.mu.Lock()
	m.closed = true
	for nc := range m.sniffing {
		_ = nc.Close()
	}
	m.mu.Unlock()
	_ = m.lis.Close()
}

func (m *portMux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func isTemporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

// connListener is the net.Listener gRPC serves: it yields the connections
// the mux sorted to gRPC. gRPC closes it when it stops.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// hand gives nc to gRPC, or closes it once gRPC has stopped.
func (l *connListener) hand(nc net.Conn) {
	select {
	case l.conns <- nc:
	case <-l.done:
		_ = nc.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case nc := <-l.conns:
		return nc, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// replayConn gives back the bytes read to sort a connection before the
// rest of it.
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
