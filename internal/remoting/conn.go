package remoting

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/afterreply"
	"github.com/bolide-mq/bolide/internal/rawconn"
	"github.com/bolide-mq/bolide/internal/readahead"
	"github.com/bolide-mq/bolide/internal/workers"
)

// Handler serves the requests that arrive on a connection.
type Handler interface {
	// ServeRemoting answers req; a nil response sends nothing. ctx ends
	// when the connection closes or the server stops.
	ServeRemoting(ctx context.Context, conn *Conn, req *Command) *Command
}

// Parker is a Handler that holds some requests without a goroutine of
// their own: a long-polled pull waiting for messages. A held request on a
// goroutine costs two goroutine wake-ups per answer (its own and the
// worker's), which at low rates are most of what answering it costs.
type Parker interface {
	Handler
	// Parks reports whether req, a request not served inline, goes to
	// Park rather than to ServeRemoting on a goroutine of its own. It runs
	// on the connection's reader and must not wait.
	Parks(req *Command) bool
	// Park answers req at once (resp, with a nil cancel; a nil resp sends
	// nothing) or holds it and returns cancel. A held request is answered
	// by calling reply exactly once, from any goroutine and perhaps before
	// Park returns (reply(nil) sends nothing); cancel, which may be called
	// more than once and after the answer, makes it answer soon. The
	// connection calls cancel when it ends. ctx is the connection's. Park
	// runs on the reader and must not wait.
	Park(ctx context.Context, conn *Conn, req *Command, reply func(*Command)) (resp *Command, cancel func())
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, conn *Conn, req *Command) *Command

// ServeRemoting calls f.
func (f HandlerFunc) ServeRemoting(ctx context.Context, conn *Conn, req *Command) *Command {
	return f(ctx, conn, req)
}

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("remoting: connection closed")

// writeTimeout bounds one frame's write: a peer that stops reading is cut.
const writeTimeout = 30 * time.Second

// Options tune a connection; zero values take the defaults.
type Options struct {
	MaxFrame    int // DefaultMaxFrame
	MaxInFlight int // requests served at once per connection: 1024
	// Inline reports whether a request is served on the connection's
	// reader goroutine: for requests that never wait (a send under async
	// flush), it saves a goroutine hand-off, and their responses are
	// written together once the requests that have arrived are served.
	// Nil: every request runs on a goroutine of its own.
	Inline           func(req *Command) bool
	MaxInFlightBytes int           // bytes of requests being served per connection: 64 MiB
	IdleTimeout      time.Duration // no frame for this long closes the connection: 120 s; < 0 never
}

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1024
	}
	if o.MaxInFlightBytes <= 0 {
		o.MaxInFlightBytes = 64 << 20
	}
	if o.MaxInFlightBytes < o.MaxFrame {
		o.MaxInFlightBytes = o.MaxFrame
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 120 * time.Second
	}
	return o
}

// Conn is one remoting connection, either end: it reads frames, serves
// requests concurrently through its handler, pairs responses with the
// requests it sent, and serialises its writes.
type Conn struct {
	nc   net.Conn
	raw  syscall.RawConn // nc's socket, for parked answers; nil without one (TLS)
	h    Handler
	pk   Parker // h, when it parks requests
	opts Options
	log  *zap.Logger

	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc
	// later is the work that requests served on the reader (Inline) left
	// for after their answers (afterreply); inline is ctx carrying it,
	// their context. Both are the reader's.
	later  afterreply.Queue
	inline context.Context
	done   chan struct{} // closed when the reader has stopped

	wmu     sync.Mutex // wmu serialises writes to bw
	bw      *bufio.Writer
	writers atomic.Int32 // writers waiting for wmu: the last one flushes
	wbuf    []byte       // encode buffer, under wmu
	dirty   atomic.Bool  // bw holds responses of inline requests not yet flushed

	opaque atomic.Int32

	// mu protects pending, inFlight, inBytes, closed and parked.
	mu       sync.Mutex
	cond     *sync.Cond // signalled when a request finishes
	pending  map[int32]chan *Command
	inFlight int
	inBytes  int
	closed   bool
	// parked are the requests Park holds, for the connection's end to
	// cancel; made by the first.
	parked map[*parkedReq]struct{}
	// handlers counts the requests being served on goroutines of their
	// own and the parked ones.
	handlers sync.WaitGroup
	// workers run the requests not served inline, reusing goroutines
	// whose stacks have grown already: the server's pool for its
	// connections, nil (a goroutine each) for a dialled one.
	workers *workers.Pool

	value atomic.Value
}

func newConn(parent context.Context, nc net.Conn, h Handler, opts Options, log *zap.Logger) *Conn {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{nc: nc, raw: rawconn.Of(nc), h: h, opts: opts.withDefaults(), log: log, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), bw: bufio.NewWriterSize(nc, 32<<10), pending: make(map[int32]chan *Command)}
	c.pk, _ = h.(Parker)
	c.cond = sync.NewCond(&c.mu)
	c.inline = afterreply.NewContext(ctx, &c.later)
	context.AfterFunc(ctx, func() { // wake a reader waiting in admit
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	return c
}

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Context ends when the connection does.
func (c *Conn) Context() context.Context { return c.ctx }

// Value returns what SetValue stored.
func (c *Conn) Value() any { return c.value.Load() }

// SetValue stores per-connection state for the connection's user. Every
// call must store the same concrete type.
func (c *Conn) SetValue(v any) { c.value.Store(v) }

// Close ends the connection: pending invokes fail with ErrClosed and the
// handlers' context ends.
func (c *Conn) Close() error {
	c.cancel()
	return c.nc.Close()
}

// Send writes one frame.
func (c *Conn) Send(cmd *Command) error { return c.write(cmd, true) }

// write writes one frame; with flush unset it may stay buffered until the
// reader flushes (see serve).
func (c *Conn) write(cmd *Command, flush bool) error {
	last, err := c.lockWriter()
	if err != nil {
		return err
	}
	defer c.wmu.Unlock()
	c.wbuf = AppendFrame(c.wbuf[:0], cmd)
	err = c.writeLocked(c.wbuf, flush, last)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // do not keep a large body's buffer
	}
	return err
}

// writeFrame writes the encoded frame b and flushes, as write does.
func (c *Conn) writeFrame(b []byte) error {
	last, err := c.lockWriter()
	if err != nil {
		return err
	}
	defer c.wmu.Unlock()
	return c.writeLocked(b, true, last)
}

// lockWriter takes wmu in turn with the other writers; last says that no
// writer waits behind this one. On a connection that has ended it returns
// ErrClosed without holding wmu.
func (c *Conn) lockWriter() (last bool, err error) {
	c.writers.Add(1)
	c.wmu.Lock()
	last = c.writers.Add(-1) == 0
	if c.ctx.Err() != nil {
		c.wmu.Unlock()
		return false, ErrClosed
	}
	return last, nil
}

// writeLocked buffers the frame b and flushes when asked and last in line;
// wmu is held.
func (c *Conn) writeLocked(b []byte, flush, last bool) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.bw.Write(b); err != nil {
		c.fail(err)
		return fmt.Errorf("remoting: write to %s: %w", c.nc.RemoteAddr(), err)
	}
	if !flush {
		c.dirty.Store(true)
		return nil
	}
	if last {
		c.dirty.Store(false)
		if err := c.bw.Flush(); err != nil {
			c.fail(err)
			return fmt.Errorf("remoting: write to %s: %w", c.nc.RemoteAddr(), err)
		}
	}
	return nil
}

func (c *Conn) fail(err error) {
	c.log.Debug("remoting connection failed", zap.Stringer("remote", c.nc.RemoteAddr()), zap.Error(err))
	_ = c.Close()
}

// Oneway sends a request that wants no answer (the oneway flag is set).
func (c *Conn) Oneway(req *Command) error {
	req.Opaque = c.opaque.Add(1)
	req.Flag = (req.Flag | FlagOneway) &^ FlagResponse
	return c.Send(req)
}

// Invoke sends a request and waits for its response until ctx ends.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	req.Opaque = c.opaque.Add(1)
	req.Flag &^= FlagResponse | FlagOneway
	ch := make(chan *Command, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.pending[req.Opaque] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, req.Opaque)
		c.mu.Unlock()
	}()
	if err := c.Send(req); err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, ErrClosed
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, ErrClosed
	}
}

// serve reads frames until the connection ends, then waits for the
// handlers it started.
func (c *Conn) serve() {
	defer func() {
		c.later.Run()
		c.cancel()
		_ = c.nc.Close()
		c.mu.Lock()
		c.closed = true
		for op, ch := range c.pending {
			close(ch)
			delete(c.pending, op)
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		close(c.done)
		c.cancelParked()
		c.handlers.Wait()
	}()
	// Requests served inline are not read while they are served: the
	// reader reads ahead in large gulps while the peer keeps it busy.
	br := readahead.New(c.nc, 64<<10)
	defer br.Release()
	for {
		if !c.admit() {
			return
		}
		if c.dirty.Load() && !frameBuffered(br) {
			c.flush() // the reader is about to wait: send what inline requests answered
		}
		c.later.Run() // what they left for after their answers
		if c.opts.IdleTimeout > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(c.opts.IdleTimeout))
		}
		frame, err := ReadFrame(br, c.opts.MaxFrame, nil)
		if err != nil {
			if c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("remoting connection ends", zap.Stringer("remote", c.nc.RemoteAddr()), zap.Error(err))
			}
			return
		}
		cmd, err := DecodeFrame(frame)
		if err != nil {
			c.log.Info("remoting: undecodable frame", zap.Stringer("remote", c.nc.RemoteAddr()), zap.Error(err))
			if cmd != nil && !cmd.IsResponse() && !cmd.IsOneway() {
				_ = c.Send(cmd.Reply(SystemError, err.Error()))
			}
			continue
		}
		if cmd.IsResponse() {
			c.mu.Lock()
			ch := c.pending[cmd.Opaque]
			delete(c.pending, cmd.Opaque)
			c.mu.Unlock()
			if ch != nil {
				ch <- cmd
			}
			continue
		}
		if c.h == nil {
			continue
		}
		if c.opts.Inline != nil && c.opts.Inline(cmd) {
			c.serveInline(cmd)
			continue
		}
		size := len(frame)
		c.mu.Lock()
		c.inFlight++
		c.inBytes += size
		c.mu.Unlock()
		c.handlers.Add(1)
		if c.pk != nil && c.pk.Parks(cmd) {
			c.park(cmd, size)
			continue
		}
		c.workers.Go(func() { c.handle(cmd, size) })
	}
}

// admit waits until the connection may take another request.
func (c *Conn) admit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed && c.ctx.Err() == nil && (c.inFlight >= c.opts.MaxInFlight || c.inBytes+c.opts.MaxFrame > c.opts.MaxInFlightBytes) {
		c.cond.Wait()
	}
	return !c.closed && c.ctx.Err() == nil
}

// frameBuffered reports whether br holds a whole frame, which the next
// read takes without waiting.
func frameBuffered(br *readahead.Reader) bool {
	if br.Buffered() < 4 {
		return false
	}
	head, _ := br.Peek(4)
	return int(binary.BigEndian.Uint32(head)) <= br.Buffered()-4
}

func (c *Conn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.dirty.Swap(false) || c.ctx.Err() != nil {
		return
	}
	if err := c.bw.Flush(); err != nil {
		c.fail(err)
	}
}

// serveInline serves req on the reader goroutine; its response is
// buffered for the reader's next flush.
func (c *Conn) serveInline(req *Command) {
	resp := c.h.ServeRemoting(c.inline, c, req)
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	_ = c.write(resp, false)
}

func (c *Conn) handle(req *Command, size int) {
	defer c.finished(size)
	resp := c.h.ServeRemoting(c.ctx, c, req)
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	if err := c.Send(resp); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Debug("remoting: response not written", zap.Error(err))
	}
}

// finished counts out a request of size bytes served on a goroutine of its
// own or parked.
func (c *Conn) finished(size int) {
	c.mu.Lock()
	c.inFlight--
	c.inBytes -= size
	c.cond.Broadcast()
	c.mu.Unlock()
	c.handlers.Done()
}

// Dial connects to a remoting server; h serves the requests the server
// sends (nil: they are ignored). The connection's reader runs until Close.
func Dial(ctx context.Context, addr string, h Handler, log *zap.Logger) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
	}
	c := newConn(context.Background(), nc, h, Options{IdleTimeout: -1}, log)
	go c.serve()
	return c, nil
}
