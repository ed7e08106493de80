package frame

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/afterreply"
	"github.com/bolide-mq/bolide/internal/rawconn"
	"github.com/bolide-mq/bolide/internal/readahead"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/internal/workers"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Handler serves the requests of one method.
type Handler struct {
	// NewRequest returns an empty request to decode a payload into.
	NewRequest func() proto.Message
	// Decode, when set, decodes a payload in place of NewRequest and
	// proto.Unmarshal: a faster decoder of the same message. Unless
	// KeepsPayload, the request must not refer to payload, which the
	// connection reuses for the next frame.
	Decode func(payload []byte) (proto.Message, error)
	// KeepsPayload says that Decode's requests may refer to their payload
	// (a message body as a slice of it, not a copy) until Serve returns:
	// the connection then reads the next frame into another buffer while
	// such a request is served on its own goroutine. Serve must not keep
	// any part of the request after it returns.
	KeepsPayload bool
	// Blocking reports whether serving req may wait (for a disk flush, a
	// replica, new messages). Such a request runs on its own goroutine, so
	// that the requests behind it on the connection are not held up; the
	// others are served on the connection's reader goroutine, with no
	// hand-off. Nil: never.
	Blocking func(req proto.Message) bool
	// Serve answers req; it never returns nil. ctx ends when the client
	// cancels the request or goes away, or when the server stops waiting.
	Serve func(ctx context.Context, req proto.Message) proto.Message
	// Park, when set, serves the requests Blocking and Parks pick in
	// place of Serve, without a goroutine of their own: it answers at once
	// (resp, and a nil cancel), or holds req and returns a cancel function. A
	// held request is answered by calling reply exactly once, from any
	// goroutine and perhaps before Park returns; cancel, which may be
	// called more than once and after the answer, makes it answer soon.
	// The server calls cancel when the client cancels the request or goes
	// away, or when it stops waiting. ctx is the connection's: it is not
	// cancelled with the request.
	Park func(ctx context.Context, req proto.Message, reply func(proto.Message)) (resp proto.Message, cancel func())
	// Parks reports whether Park should serve a Blocking request: one that
	// will most likely wait. The others run on their own goroutine, so
	// that the work of answering them (reading a backlog) is not done on
	// the reader, one request after another. Nil: all of them.
	Parks func(req proto.Message) bool
}

func (hd Handler) decode(payload []byte) (proto.Message, error) {
	if hd.Decode != nil {
		return hd.Decode(payload)
	}
	req := hd.NewRequest()
	if err := proto.Unmarshal(payload, req); err != nil {
		return nil, err
	}
	return req, nil
}

// Server serves frame connections handed to it by ServeConn; it does not
// listen (the broker shares its port with gRPC and sorts connections by
// their first bytes). Register every handler before serving.
type Server struct {
	opts     Options
	log      *zap.Logger
	handlers map[Method]Handler

	// ctx is the parent of every connection's context; cancelled when
	// Shutdown stops waiting.
	ctx    context.Context
	cancel context.CancelFunc

	// mu protects conns and draining.
	mu       sync.Mutex
	conns    map[*serverConn]struct{}
	draining bool
	wg       sync.WaitGroup // one per ServeConn

	// workers run the requests served on goroutines of their own
	// (Handler.Blocking), reused so that each request does not grow a
	// fresh stack; Shutdown closes it once every connection has ended.
	workers *workers.Pool
}

// NewServer returns a server without handlers.
func NewServer(opts Options, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{opts: opts.withDefaults(), log: log, handlers: make(map[Method]Handler),
		conns: make(map[*serverConn]struct{}), workers: workers.ForHandlers()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Handle registers the handler of method m. Call it before ServeConn.
// MethodAuth has no handler: the server serves it (Options.Authenticate).
func (s *Server) Handle(m Method, h Handler) {
	if m == MethodAuth {
		panic("frame: Auth is served by Options.Authenticate, not by a Handler")
	}
	s.handlers[m] = h
}

// ServeConn serves nc until the client closes it, sends a malformed frame,
// or the server shuts down; then it closes nc. nc must have been read up to
// and including the client's magic (the caller sorted it by that); the
// server answers it. The calling goroutine is the connection's reader.
func (s *Server) ServeConn(nc net.Conn) {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	c := &serverConn{s: s, nc: nc, raw: rawconn.Of(nc), sem: make(chan struct{}, s.opts.MaxInflight),
		cancels: make(map[uint32]*inflight)}
	var ctx context.Context
	ctx, c.cancel = context.WithCancel(s.ctx)
	c.base = context.WithValue(ctx, peerKey{}, nc.RemoteAddr().String())
	c.setCtx(c.base)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	c.serve()
}

// ServeListener serves each connection lis yields on a goroutine of its
// own, until lis is closed; then it waits for them to end. Each connection
// must open with the magic, not yet read (a port shared with other
// protocols replays the bytes it sorted the connection by): it is read
// within sniff, then the connection is served (ServeConn).
func (s *Server) ServeListener(lis net.Listener, sniff time.Duration) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		nc, err := lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			magic := make([]byte, len(Magic))
			_ = nc.SetReadDeadline(time.Now().Add(sniff))
			if _, err := io.ReadFull(nc, magic); err != nil {
				_ = nc.Close()
				return
			}
			_ = nc.SetReadDeadline(time.Time{})
			s.ServeConn(nc)
		}()
	}
}

// aLongTimeAgo is a read deadline that wakes a blocked reader at once.
var aLongTimeAgo = time.Unix(1, 0)

// Shutdown drains the connections: each stops reading (requests not read
// yet are never served: the client sees its connection close, a failure it
// may retry), finishes the requests it has begun, writes their answers and
// closes. When ctx ends first, the requests still running have their
// context cancelled and every connection is closed; Shutdown then returns
// ctx's error once every goroutine of the server has ended.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	for c := range s.conns {
		_ = c.nc.SetReadDeadline(aLongTimeAgo)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	defer s.workers.Close() // every return below comes after done
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
	}
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
		c.cancelParked()
	}
	s.mu.Unlock()
	<-done
	return fmt.Errorf("frame: shutdown: %w", ctx.Err())
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// serverConn is one client connection.
type serverConn struct {
	s  *Server
	nc net.Conn

	// base is the context of the connection's requests before any Auth:
	// cancelled when the client goes away or the server stops waiting, and
	// carrying Peer. ctx is base with the identity the last Auth request
	// established (Options.Authenticate). Both are the reader's.
	base   context.Context
	ctx    context.Context
	cancel context.CancelFunc
	// later is the work the requests served on the reader left for after
	// their answers (afterreply); inline is ctx carrying it, the context
	// of those requests.
	later  afterreply.Queue
	inline context.Context

	// Lock order: wmu (writing answers) and mu (the running requests) are
	// never held together.
	//
	// wmu protects bw and werr. writers counts the answers waiting for
	// wmu, so that the last one flushes: answers written while others
	// queue leave in one write.
	wmu     sync.Mutex
	bw      *bufio.Writer
	raw     syscall.RawConn // nc's descriptor, for writes that must not wait; nil: none
	werr    error           // sticky: the connection is broken
	writers atomic.Int32

	sem      chan struct{}  // one slot per request running on its own goroutine
	handlers sync.WaitGroup // those goroutines

	// mu protects cancels: the requests running on their own goroutine,
	// by id, for cancel frames.
	mu      sync.Mutex
	cancels map[uint32]*inflight
}

// inflight is a request served on its own goroutine (cancel: its
// context's) or parked (cancel: the one Handler.Park returned, set under
// mu once Park returns). Call cancel without holding mu: a parked request
// answers as it is cancelled.
type inflight struct{ cancel func() }

func (c *serverConn) serve() {
	log := c.s.log.With(zap.Stringer("remote", c.nc.RemoteAddr()))
	graceful := false
	defer func() { c.finish(graceful) }()
	if _, err := io.WriteString(c.nc, Magic); err != nil {
		log.Debug("frame handshake failed", zap.Error(err))
		return
	}
	// Requests served inline are not read while they are served: the
	// reader reads ahead in large gulps while the client keeps it busy.
	br := readahead.New(c.nc, c.s.opts.BufferSize)
	defer br.Release()
	c.bw = bufio.NewWriterSize(c.nc, c.s.opts.BufferSize)
	var rbuf []byte // payloads are decoded before the next read: reused
	for {
		if !frameBuffered(br) {
			c.flush() // about to wait for the client: answers go out now
		}
		// What the answered requests left for later, now that their
		// answers are out (or, with more requests buffered, before the
		// next one).
		c.later.Run()
		h, payload, err := readFrame(br, rbuf, c.s.opts.MaxFrame)
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded) && c.s.isDraining():
				graceful = true
			case errors.Is(err, ErrMalformed) || errors.Is(err, ErrTooLarge):
				log.Warn("frame connection closed: malformed frame", zap.Error(err))
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				log.Debug("frame connection closed", zap.Error(err))
			}
			return
		}
		kept, err := c.dispatch(h, payload)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				log.Warn("frame connection closed: malformed frame", zap.Error(err))
			}
			return
		}
		switch {
		case kept:
			rbuf = nil // a request still being served refers to it
		case cap(payload) <= keptReadBufMax:
			rbuf = payload[:0]
		}
	}
}

// finish ends the connection once its requests are answered. Unless it
// drains gracefully, the client is gone or broke the protocol: the running
// requests are cancelled first.
func (c *serverConn) finish(graceful bool) {
	c.later.Run()
	if !graceful {
		c.cancel()
		c.cancelParked()
	}
	c.handlers.Wait()
	c.flush()
	_ = c.nc.Close()
	c.cancel()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

// dispatch serves one frame; an error closes the connection. kept says
// that a request served on its own goroutine still refers to payload
// (Handler.KeepsPayload).
func (c *serverConn) dispatch(h Header, payload []byte) (kept bool, err error) {
	switch h.Kind {
	case KindCancel:
		var cancel func()
		c.mu.Lock()
		if r := c.cancels[h.ID]; r != nil {
			cancel = r.cancel
		}
		c.mu.Unlock()
		// Outside mu: a parked request answers as it is cancelled.
		if cancel != nil {
			cancel()
		}
		return false, nil
	case KindRequest, KindOneway:
	default:
		return false, fmt.Errorf("%w: a client sends no %s frame", ErrMalformed, h.Kind)
	}
	if h.Method == MethodAuth {
		c.authenticate(h, payload)
		return false, nil
	}
	hd, ok := c.s.handlers[h.Method]
	if !ok {
		c.replyError(h, fmt.Sprintf("unknown method %d", h.Method))
		return false, nil
	}
	req, err := hd.decode(payload)
	if err != nil {
		c.replyError(h, fmt.Sprintf("cannot decode the %s request: %v", h.Method, err))
		return false, nil
	}
	if hd.Blocking == nil || !hd.Blocking(req) {
		c.reply(h, hd.Serve(c.inline, req), true)
		return false, nil
	}
	if hd.Park != nil && (hd.Parks == nil || hd.Parks(req)) {
		return false, c.park(h, hd, req)
	}
	return hd.KeepsPayload, c.serveAsync(h, hd, req)
}

// authenticate serves an Auth request: its outcome replaces the
// connection's identity.
func (c *serverConn) authenticate(h Header, payload []byte) {
	req := new(pb.FrameAuthRequest)
	if err := proto.Unmarshal(payload, req); err != nil {
		c.replyError(h, fmt.Sprintf("cannot decode the %s request: %v", h.Method, err))
		return
	}
	c.setCtx(c.base)
	st := wire.OK
	if fn := c.s.opts.Authenticate; fn != nil {
		ctx, err := fn(c.base, c.nc, req)
		switch {
		case err != nil:
			st = wire.Status(err)
			var coded *wire.Error
			if !errors.As(err, &coded) {
				st = &pb.Status{Code: pb.Code_UNAUTHENTICATED, Message: err.Error()}
			}
		case ctx != nil:
			c.setCtx(ctx)
		}
	}
	c.reply(h, &pb.FrameAuthResponse{Status: st}, true)
}

// setCtx sets the context of the connection's requests.
func (c *serverConn) setCtx(ctx context.Context) {
	c.ctx = ctx
	c.inline = afterreply.NewContext(ctx, &c.later)
}

type peerKey struct{}

// Peer is the remote address of the connection a request handed to a
// Handler (or to Options.Authenticate) came on; "" outside a server.
func Peer(ctx context.Context) string {
	p, _ := ctx.Value(peerKey{}).(string)
	return p
}

// takeSlot takes one of the connection's slots for a request that is not
// served on the reader, waiting for one when all are taken.
func (c *serverConn) takeSlot() error {
	select {
	case c.sem <- struct{}{}:
		return nil
	default:
	}
	c.flush() // the answers written so far must not wait for a slot
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// serveAsync serves a request that may wait on its own goroutine, once a
// slot is free.
func (c *serverConn) serveAsync(h Header, hd Handler, req proto.Message) error {
	if err := c.takeSlot(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	r := &inflight{cancel: cancel}
	if h.Kind == KindRequest {
		c.mu.Lock()
		c.cancels[h.ID] = r
		c.mu.Unlock()
	}
	c.handlers.Add(1)
	c.s.workers.Go(func() {
		defer c.handlers.Done()
		defer func() { <-c.sem }()
		resp := hd.Serve(ctx, req)
		c.mu.Lock()
		if c.cancels[h.ID] == r {
			delete(c.cancels, h.ID)
		}
		c.mu.Unlock()
		cancel()
		c.reply(h, resp, false)
	})
	return nil
}

// park serves a request with its handler's Park. It takes a slot as a
// request on its own goroutine does, and counts among handlers until it
// is answered.
func (c *serverConn) park(h Header, hd Handler, req proto.Message) error {
	if err := c.takeSlot(); err != nil {
		return err
	}
	r := &inflight{}
	if h.Kind == KindRequest {
		c.mu.Lock()
		c.cancels[h.ID] = r
		c.mu.Unlock()
	}
	c.handlers.Add(1)
	end := func() {
		c.mu.Lock()
		if c.cancels[h.ID] == r {
			delete(c.cancels, h.ID)
		}
		c.mu.Unlock()
		<-c.sem
		c.handlers.Done()
	}
	resp, cancel := hd.Park(c.ctx, req, func(resp proto.Message) {
		c.replyParked(h, resp, end)
	})
	if cancel == nil {
		end()
		c.reply(h, resp, true)
		return nil
	}
	c.mu.Lock()
	r.cancel = cancel
	c.mu.Unlock()
	// A connection that ended while Park ran was not there to cancel it.
	if c.ctx.Err() != nil {
		cancel()
	}
	return nil
}

// replyParked answers a parked request from the goroutine that ended it:
// a message's arrival reported by another connection's reader or by the
// broker's dispatcher, a timer. That goroutine must not wait for this
// client to read, so it writes only what the socket takes at once and
// leaves the rest of the frame, and any answer it cannot write now, to a
// worker. end runs once the frame is written (or the connection broke).
func (c *serverConn) replyParked(h Header, resp proto.Message, end func()) {
	if h.Kind != KindRequest {
		end()
		return
	}
	p := getBuf()
	b := c.appendAnswer((*p)[:0], h, resp)
	done := func() {
		putBuf(p, b)
		end()
	}
	// The frame may go straight to the socket only when the write buffer
	// is empty: it may hold the first part of an answer, written when the
	// buffer filled, whose rest must follow it. (Ahead of whole answers
	// would do: answers are matched to requests by id, not order.)
	if c.raw == nil || !c.wmu.TryLock() {
		c.writeLater(b, done)
		return
	}
	if c.werr != nil {
		c.wmu.Unlock()
		done()
		return
	}
	if c.bw.Buffered() > 0 {
		c.wmu.Unlock()
		c.writeLater(b, done)
		return
	}
	n, err := rawconn.WriteNow(c.raw, b)
	if err != nil || n == len(b) {
		if err != nil {
			c.werr = err
			_ = c.nc.Close()
		}
		c.wmu.Unlock()
		done()
		return
	}
	// The socket is full: a worker writes the rest, holding wmu so that
	// nothing comes between the two parts of the frame.
	c.s.workers.Go(func() {
		if _, err := c.nc.Write(b[n:]); err != nil {
			c.werr = err
			_ = c.nc.Close()
		}
		c.wmu.Unlock()
		done()
	})
}

// writeLater has a worker write frame b after the buffered answers, then
// call done.
func (c *serverConn) writeLater(b []byte, done func()) {
	c.s.workers.Go(func() {
		c.write(b, true)
		done()
	})
}

// cancelParked cancels the requests in flight on the connection once its
// context has ended: those on their own goroutine were cancelled with the
// context already, the parked ones learn it here.
func (c *serverConn) cancelParked() {
	c.mu.Lock()
	cancels := make([]func(), 0, len(c.cancels))
	for _, r := range c.cancels {
		if r.cancel != nil {
			cancels = append(cancels, r.cancel)
		}
	}
	c.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// reply answers a request (a oneway request gets no answer). Inline
// answers, written by the reader, are flushed when it is about to wait;
// the others by the last writer in line.
func (c *serverConn) reply(h Header, resp proto.Message, inline bool) {
	if h.Kind != KindRequest {
		return
	}
	p := getBuf()
	b := c.appendAnswer((*p)[:0], h, resp)
	c.write(b, !inline)
	putBuf(p, b)
}

// appendAnswer appends the frame answering request h with resp, or the
// error frame saying why resp cannot be sent.
func (c *serverConn) appendAnswer(dst []byte, h Header, resp proto.Message) []byte {
	b, err := AppendMessage(dst, Header{Kind: KindResponse, Method: h.Method, ID: h.ID}, resp, c.s.opts.MaxFrame)
	if err != nil {
		b = AppendFrame(b, Header{Kind: KindError, Method: h.Method, ID: h.ID},
			[]byte(fmt.Sprintf("the %s response cannot be sent: %v", h.Method, err)))
	}
	return b
}

func (c *serverConn) replyError(h Header, msg string) {
	if h.Kind != KindRequest {
		return
	}
	p := getBuf()
	b := AppendFrame((*p)[:0], Header{Kind: KindError, Method: h.Method, ID: h.ID}, []byte(msg))
	c.write(b, false)
	putBuf(p, b)
}

// write writes one frame, and flushes when asked and no other frame waits
// to be written. A write error breaks the connection: closing it ends the
// reader.
func (c *serverConn) write(frame []byte, flush bool) {
	c.writers.Add(1)
	c.wmu.Lock()
	last := c.writers.Add(-1) == 0
	if c.werr == nil {
		_, c.werr = c.bw.Write(frame)
		if c.werr == nil && flush && last {
			c.werr = c.bw.Flush()
		}
	}
	err := c.werr
	c.wmu.Unlock()
	if err != nil {
		_ = c.nc.Close()
	}
}

// flush writes out the buffered answers.
func (c *serverConn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr == nil && c.bw != nil && c.bw.Buffered() > 0 {
		if c.werr = c.bw.Flush(); c.werr != nil {
			_ = c.nc.Close()
		}
	}
}

// AuthenticateWith is an Options.Authenticate that checks a connection's
// Auth request with g (the signed-date header of package auth) and puts
// the caller's principal in the context of its later requests
// (auth.FromContext); nil with ACL off.
func AuthenticateWith(g *auth.Guard) func(ctx context.Context, nc net.Conn, req *pb.FrameAuthRequest) (context.Context, error) {
	return func(ctx context.Context, _ net.Conn, req *pb.FrameAuthRequest) (context.Context, error) {
		p, err := g.Header(Peer(ctx), req.GetAuthorization(), req.GetDateTime())
		if err != nil || p == nil {
			return ctx, err
		}
		return auth.WithPrincipal(ctx, p), nil
	}
}
