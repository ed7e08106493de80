package remoting

import (
	"context"
	"errors"
	"net"
	"sync"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/workers"
)

// Server serves remoting connections with one handler.
type Server struct {
	h       Handler
	opts    Options
	onOpen  func(*Conn)
	onClose func(*Conn)
	log     *zap.Logger

	ctx    context.Context // parent of every connection's context
	cancel context.CancelFunc

	// mu protects lis, conns and draining.
	mu       sync.Mutex
	lis      []net.Listener
	conns    map[*Conn]struct{}
	draining bool
	wg       sync.WaitGroup // one per connection

	// workers serve the connections' requests that are not served inline;
	// Shutdown closes it once every connection has ended.
	workers *workers.Pool
}

// ServerOptions tune a server.
type ServerOptions struct {
	Options
	// OnOpen is called with each new connection before its first request
	// is read (to attach the user's state with SetValue).
	OnOpen func(*Conn)
	// OnClose is called once when a connection has ended (its handlers'
	// context is cancelled; they may still be returning).
	OnClose func(*Conn)
}

// NewServer returns a server of h.
func NewServer(h Handler, opts ServerOptions, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{h: h, opts: opts.Options.withDefaults(), onOpen: opts.OnOpen, onClose: opts.OnClose, log: log,
		ctx: ctx, cancel: cancel, conns: make(map[*Conn]struct{}), workers: workers.ForHandlers()}
}

// Serve serves the connections lis yields until lis is closed or Shutdown
// is called; then it returns nil.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return nil
	}
	s.lis = append(s.lis, lis)
	s.mu.Unlock()
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			draining := s.draining
			s.mu.Unlock()
			if draining || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.ServeConn(nc)
	}
}

// ServeConn serves one connection on goroutines of its own.
func (s *Server) ServeConn(nc net.Conn) {
	c := newConn(s.ctx, nc, s.h, s.opts, s.log)
	c.workers = s.workers
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if s.onOpen != nil {
		s.onOpen(c)
	}
	go func() {
		defer s.wg.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		if s.onClose != nil {
			s.onClose(c)
		}
	}()
}

// Conns returns the connections being served.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// then closes every connection and waits for their goroutines.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	for _, l := range s.lis {
		_ = l.Close()
	}
	s.mu.Unlock()
	idle := make(chan struct{})
	go func() {
		defer close(idle)
		for _, c := range s.Conns() {
			c.mu.Lock()
			for c.inFlight > 0 && c.ctx.Err() == nil {
				c.cond.Wait()
			}
			c.mu.Unlock()
		}
	}()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.cancel()
	for _, c := range s.Conns() {
		_ = c.nc.Close()
	}
	<-idle
	s.wg.Wait()
	s.workers.Close()
	return err
}
