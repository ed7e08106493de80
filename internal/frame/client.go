package frame

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/internal/rawconn"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

var (
	// ErrClosed: a call on a closed Client, or one in flight when it
	// closed.
	ErrClosed = errors.New("frame: client closed")
	// ErrNotSupported: the server answered the handshake with something
	// else than the magic: it does not speak this protocol (an older
	// broker). Use gRPC for it.
	ErrNotSupported = errors.New("frame: the server does not speak the frame protocol")
)

// ConnError reports a call that failed because the connection could not be
// made or broke. A request that was written may or may not have been
// served; one that failed to dial was not.
type ConnError struct {
	Op   string // "dial", "handshake", "write" or "read"
	Addr string
	Err  error
}

func (e *ConnError) Error() string {
	return "frame: " + e.Op + " " + e.Addr + ": " + e.Err.Error()
}

func (e *ConnError) Unwrap() error { return e.Err }

// AuthError is a connection whose Auth request the server refused; Err is
// the coded error of the response's Status (UNAUTHENTICATED, or
// NO_PERMISSION for a peer the access key may not be used from).
type AuthError struct {
	Addr string
	Err  error
}

func (e *AuthError) Error() string {
	return "frame: " + e.Addr + " refused the credentials: " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// RemoteError is a request the server could not serve (an error frame): an
// unknown method, an undecodable request, a response over the limit.
type RemoteError struct {
	Method Method
	Msg    string
}

func (e *RemoteError) Error() string { return "frame: server: " + e.Msg }

// Client calls one server address over one connection shared by every
// caller. It dials on first use and again after the connection broke;
// requests are written by their callers, and a caller that finds no other
// request in flight reads its answer itself, while answers that others
// wait for are delivered by whoever reads (clientConn). Close stops it.
type Client struct {
	addr   string
	opts   Options
	dialer net.Dialer
	nextID atomic.Uint32

	// mu protects cur, dialing and closed.
	mu      sync.Mutex
	cur     *clientConn
	dialing chan struct{} // closed when the dial in progress ends
	closed  bool
	wg      sync.WaitGroup // the reader goroutines
}

// NewClient returns a client of addr; it connects on the first call.
func NewClient(addr string, opts Options) *Client {
	return &Client{addr: addr, opts: opts.withDefaults()}
}

// Addr is the server's address.
func (c *Client) Addr() string { return c.addr }

// Call sends req as a request of method m and decodes the answer into
// resp (with resp's own decoder if it is an Unmarshaler). When ctx ends
// first it returns ctx's error (the server is told to give up the
// request). Errors: ErrTooLarge (nothing was written), *ConnError,
// *AuthError (nothing was written), *RemoteError, ErrNotSupported,
// ErrClosed.
func (c *Client) Call(ctx context.Context, m Method, req, resp proto.Message) error {
	return c.CallWithin(ctx, 0, m, req, resp)
}

// CallWithin is Call bounded also by timeout (none when it is 0): when
// the timeout passes before ctx ends, the call ends with
// context.DeadlineExceeded, as it would with a ctx of that deadline. It
// spares the caller a context of its own per call (a context with a
// deadline, its timer and its channel are most of what a small call
// allocates).
func (c *Client) CallWithin(ctx context.Context, timeout time.Duration, m Method, req, resp proto.Message) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	payload, err := c.do(ctx, deadline, KindRequest, m, req)
	if err != nil {
		return err
	}
	if u, ok := resp.(Unmarshaler); ok {
		err = u.UnmarshalProto(payload)
	} else {
		err = proto.Unmarshal(payload, resp)
	}
	if err != nil {
		return fmt.Errorf("frame: decode the %s response from %s: %w", m, c.addr, err)
	}
	return nil
}

// Oneway sends req as a oneway request of method m: it returns once the
// request is written, and no answer comes.
func (c *Client) Oneway(ctx context.Context, m Method, req proto.Message) error {
	_, err := c.do(ctx, time.Time{}, KindOneway, m, req)
	return err
}

// do makes one call, bounded by ctx and by deadline when it is not zero.
func (c *Client) do(ctx context.Context, deadline time.Time, kind Kind, m Method, req proto.Message) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !deadline.IsZero() {
		if dl, ok := ctx.Deadline(); ok && !dl.After(deadline) {
			deadline = time.Time{} // ctx ends first
		}
	}
	p := getBuf()
	b, err := AppendMessage((*p)[:0], Header{Kind: kind, Method: m}, req, c.opts.MaxFrame)
	defer func() { putBuf(p, b) }()
	if err != nil {
		return nil, fmt.Errorf("frame: %s request to %s: %w", m, c.addr, err)
	}
	for {
		cc, err := c.conn(ctx, deadline)
		if err != nil {
			return nil, err
		}
		if kind == KindOneway {
			if cc.idleClosed() {
				// As below: nothing was written, a new connection takes it.
				cc.fail(&ConnError{Op: "read", Addr: c.addr, Err: io.EOF})
				continue
			}
			return nil, cc.write(b)
		}
		id, ch, lead, err := cc.register(&c.nextID)
		if err != nil {
			return nil, err
		}
		if lead && !cc.alive() {
			// The server closed the connection while nobody read it:
			// nothing was written, so the request goes on a new one.
			cc.fail(&ConnError{Op: "read", Addr: c.addr, Err: io.EOF})
			<-ch
			putReplyChan(ch)
			continue
		}
		SetID(b, id)
		if lead && !deadline.IsZero() {
			// Before the write: setting it adds a runtime timer, which
			// may wake an idle thread, off the round trip's path.
			_ = cc.nc.SetReadDeadline(deadline)
		}
		if err := cc.write(b); err != nil {
			return nil, err
		}
		var r reply
		if lead {
			r, err = cc.lead(ctx, deadline, id, ch)
		} else {
			r, err = cc.follow(ctx, deadline, id, ch)
		}
		if err != nil { // ctx ended or the deadline passed
			if cc.unregister(id) {
				// Best effort: a request running on its own goroutine stops.
				_ = cc.write(AppendHeader(b[:0], Header{Kind: KindCancel, Method: m, ID: id}))
			}
			if lead {
				cc.release()
			}
			return nil, err
		}
		// Nothing sends on ch any more: it was answered, or not used.
		putReplyChan(ch)
		return r.payload, r.err
	}
}

// replyChans keeps the answer channels of finished calls: one that was
// answered, or whose answer its caller read itself, is empty and no longer
// in any waiters map. A call that gave up does not return its channel (an
// answer may still come on it).
var replyChans = sync.Pool{New: func() any { return make(chan reply, 1) }}

func putReplyChan(ch chan reply) { replyChans.Put(ch) }

// conn returns the connection, dialing one when there is none, within
// ctx and deadline (none when zero).
func (c *Client) conn(ctx context.Context, deadline time.Time) (*clientConn, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, ErrClosed
		case c.cur != nil:
			cc := c.cur
			c.mu.Unlock()
			return cc, nil
		case !deadline.IsZero():
			// Waiting for a connection is rare: a context bounds it.
			c.mu.Unlock()
			dctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			ctx, deadline = dctx, time.Time{}
			continue
		case c.dialing != nil:
			wait := c.dialing
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.dialing = done
		c.mu.Unlock()

		cc, err := c.dial(ctx)
		c.mu.Lock()
		c.dialing = nil
		close(done)
		if err == nil && c.closed {
			_ = cc.nc.Close()
			cc, err = nil, ErrClosed
		}
		if err == nil {
			c.cur = cc
			c.wg.Add(1)
			go cc.readLoop()
		}
		c.mu.Unlock()
		return cc, err
	}
}

// dial connects and makes the handshake (TLS, the magic, the Auth
// request), within ctx and the dial timeout.
func (c *Client) dial(ctx context.Context) (*clientConn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	nc, err := c.dialer.DialContext(dctx, "tcp", c.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnError{Op: "dial", Addr: c.addr, Err: err}
	}
	nc = rawconn.Wrap(nc)
	// The handshake ends with dctx: its end unblocks the reads (a deadline
	// on the TCP connection holds for the TLS one over it too). The
	// function reads raw, not nc, which the handshake replaces.
	raw := nc
	stop := context.AfterFunc(dctx, func() { _ = raw.SetDeadline(aLongTimeAgo) })
	var br *bufio.Reader
	nc, br, err = c.handshake(nc)
	if !stop() {
		err = errors.Join(err, dctx.Err()) // the deadline may have hit after the read
	}
	if err == nil {
		err = nc.SetDeadline(time.Time{})
	}
	var refused *AuthError
	switch {
	case err == nil:
	case errors.As(err, &refused) || errors.Is(err, ErrNotSupported):
		_ = nc.Close()
		return nil, err
	case ctx.Err() != nil:
		_ = nc.Close()
		return nil, ctx.Err()
	default:
		_ = nc.Close()
		return nil, &ConnError{Op: "handshake", Addr: c.addr, Err: err}
	}
	return &clientConn{c: c, nc: nc, raw: raw, br: br,
		bw: bufio.NewWriterSize(nc, c.opts.BufferSize), waiters: make(map[uint32]chan reply),
		takeover: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// handshake runs TLS when configured, exchanges the magic and sends the
// Auth request when configured. It returns the connection to use (the TLS
// one) and its reader.
func (c *Client) handshake(nc net.Conn) (net.Conn, *bufio.Reader, error) {
	if c.opts.TLS != nil {
		cfg := c.opts.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(c.addr)
			if err != nil {
				host = c.addr
			}
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			return nc, nil, fmt.Errorf("TLS: %w", err)
		}
		nc = tc
	}
	if _, err := io.WriteString(nc, Magic); err != nil {
		return nc, nil, err
	}
	br := bufio.NewReaderSize(nc, c.opts.BufferSize)
	answer := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, answer); err != nil {
		return nc, nil, err
	}
	if string(answer) != Magic {
		return nc, nil, fmt.Errorf("%w: %s answered %q", ErrNotSupported, c.addr, answer)
	}
	if c.opts.Auth == nil {
		return nc, br, nil
	}
	return nc, br, c.authenticate(nc, br)
}

// authenticate sends the Auth request on a new connection and reads its
// answer. A server that does not know the method (older than it) answers
// an error frame: it checks no credentials, and the connection is used
// as it is.
func (c *Client) authenticate(nc net.Conn, br *bufio.Reader) error {
	const id = 1 // the connection's only request so far
	b, err := AppendMessage(nil, Header{Kind: KindRequest, Method: MethodAuth, ID: id}, c.opts.Auth(), c.opts.MaxFrame)
	if err != nil {
		return err
	}
	if _, err := nc.Write(b); err != nil {
		return err
	}
	h, payload, err := readFrame(br, nil, c.opts.MaxFrame)
	switch {
	case err != nil:
		return err
	case h.ID != id || (h.Kind != KindResponse && h.Kind != KindError):
		return fmt.Errorf("%w: a %s frame for request %d answers the Auth request", ErrMalformed, h.Kind, h.ID)
	case h.Kind == KindError:
		return nil
	}
	resp := new(pb.FrameAuthResponse)
	if err := proto.Unmarshal(payload, resp); err != nil {
		return fmt.Errorf("decode the Auth response: %w", err)
	}
	if err := wire.FromStatus(resp.GetStatus()); err != nil {
		return &AuthError{Addr: c.addr, Err: err}
	}
	return nil
}

// Close fails the calls in flight with ErrClosed, closes the connection
// and waits for its reader goroutine. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cc := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cc != nil {
		cc.fail(ErrClosed)
	}
	c.wg.Wait()
	return nil
}

// clientConn is one connection to the server.
//
// Its read side is held by one goroutine at a time: a caller that finds
// no other request in flight reads its own answer from the connection (the
// leader), so that a lone caller is woken once, by the network poller,
// rather than by a reader goroutine that was woken by it. Answers of other
// requests that it reads on the way go to their callers (the followers,
// which wait on their channel). A leader that has its answer hands the read
// side to the connection's reader goroutine when requests remain in
// flight, and leaves it free otherwise; the reader goroutine reads until
// none remains. So while any request is in flight someone reads, and while
// none is nobody does: a connection the server closed meanwhile is found
// out before the next request is written on it (alive).
type clientConn struct {
	c   *Client
	nc  net.Conn
	raw net.Conn      // the TCP connection under nc (the same without TLS)
	br  *bufio.Reader // the read side's

	// Lock order: wmu (writing) and mu (the waiters) are never held
	// together; a caller registers its waiter under mu, then writes under
	// wmu.
	//
	// wmu protects bw and werr; queued counts the callers waiting for it,
	// so that the last one in line flushes.
	wmu    sync.Mutex
	bw     *bufio.Writer
	werr   error
	queued atomic.Int32

	// mu protects waiters, err, reading and idleSince.
	mu      sync.Mutex
	waiters map[uint32]chan reply
	err     error // set once the connection is broken
	// reading: a leader or the reader goroutine holds the read side. It is
	// true whenever waiters is not empty.
	reading   bool
	idleSince time.Time // when the read side was last left free

	// The read side's partial frame: a leader whose context ends stops
	// reading in the middle of a frame, and the next reader goes on.
	rhave bool
	rh    Header
	rbuf  []byte
	rn    int

	takeover chan struct{} // the read side handed to the reader goroutine
	done     chan struct{} // closed when the connection breaks

	// ctxMu protects the watch on the leader's context (watch): the Done
	// channel of the context registered, how to stop the registration and
	// whether registering is over (the connection broke), the Done channel
	// of the leader reading now (nil when none) and whether its read was
	// interrupted.
	ctxMu       sync.Mutex
	watchDone   <-chan struct{}
	watchStop   func() bool
	watchOff    bool
	leadDone    <-chan struct{}
	interrupted bool
}

type reply struct {
	payload []byte
	err     error
}

// idleProbeAfter: a leader that finds the connection unread for longer
// checks that the server has not closed it before writing (alive).
const idleProbeAfter = time.Millisecond

// register reserves a request id not in flight and its answer channel. It
// reports whether the caller leads: it found the read side free and now
// holds it.
func (cc *clientConn) register(next *atomic.Uint32) (uint32, chan reply, bool, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return 0, nil, false, cc.err
	}
	ch := replyChans.Get().(chan reply)
	for {
		id := next.Add(1)
		if _, busy := cc.waiters[id]; !busy && id != 0 {
			cc.waiters[id] = ch
			lead := !cc.reading
			cc.reading = true
			return id, ch, lead, nil
		}
	}
}

// unregister forgets request id; it reports whether it was still waited for.
func (cc *clientConn) unregister(id uint32) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	_, ok := cc.waiters[id]
	delete(cc.waiters, id)
	return ok
}

// alive reports, for a leader, that the connection was in use a moment
// ago or has not been closed by the server since.
func (cc *clientConn) alive() bool {
	cc.mu.Lock()
	idle := !cc.idleSince.IsZero() && time.Since(cc.idleSince) > idleProbeAfter
	cc.mu.Unlock()
	if !idle || cc.br.Buffered() > 0 {
		return true
	}
	return !peerClosed(cc.raw)
}

// idleClosed reports, for a oneway request, that nobody reads the
// connection, nobody did for a while, and the server has closed it.
func (cc *clientConn) idleClosed() bool {
	cc.mu.Lock()
	idle := !cc.reading && !cc.idleSince.IsZero() && time.Since(cc.idleSince) > idleProbeAfter
	cc.mu.Unlock()
	return idle && peerClosed(cc.raw)
}

// follow waits for the answer to request id, which the read side's holder
// hands over, or for ctx, or until deadline (none when zero).
func (cc *clientConn) follow(ctx context.Context, deadline time.Time, id uint32, ch chan reply) (reply, error) {
	if deadline.IsZero() {
		select {
		case r := <-ch:
			return r, nil
		case <-ctx.Done():
			return reply{}, ctx.Err()
		}
	}
	t := getTimer(time.Until(deadline))
	defer putTimer(t)
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return reply{}, ctx.Err()
	case <-t.C:
		return reply{}, context.DeadlineExceeded
	}
}

// timers keeps stopped timers for the followers' deadlines.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d) // stopped, so its channel holds nothing (Go 1.23 timers)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// lead reads the connection until the answer to request id comes, handing
// the other answers to their callers, then leaves the read side (release).
// When ctx ends or deadline (none when zero; the caller set it as the
// connection's read deadline) passes first it returns ctx's error or
// context.DeadlineExceeded, still holding the read side at a frame
// boundary or in the middle of one: the caller unregisters and releases.
func (cc *clientConn) lead(ctx context.Context, deadline time.Time, id uint32, ch chan reply) (reply, error) {
	done := ctx.Done()
	if done != nil {
		cc.watch(ctx, done)
	}
	r, mine, err := cc.readUntil(id)
	timedOut := err != nil && errors.Is(err, os.ErrDeadlineExceeded)
	if done != nil && cc.unwatch() {
		// The leader's context ended during the read and its deadline was
		// set to interrupt it: undo that.
		_ = cc.nc.SetReadDeadline(time.Time{})
		if timedOut && ctx.Err() != nil {
			return reply{}, ctx.Err()
		}
	} else if !deadline.IsZero() {
		_ = cc.nc.SetReadDeadline(time.Time{})
	}
	if timedOut && !deadline.IsZero() {
		return reply{}, context.DeadlineExceeded
	}
	if err != nil {
		cc.fail(&ConnError{Op: "read", Addr: cc.c.addr, Err: err})
	}
	if !mine {
		// The connection broke (fail answered every waiter) or another
		// reader delivered the answer.
		return <-ch, nil
	}
	cc.release()
	return r, nil
}

// watch makes the end of ctx (whose Done channel is done) interrupt the
// leader's read from now until unwatch. The connection keeps one
// registration (context.AfterFunc) across calls and makes a new one only
// for a context with another Done channel: callers usually pass the same
// long-lived context, and a registration per call was an allocation and
// two turns of a lock that all the callers of that context share.
func (cc *clientConn) watch(ctx context.Context, done <-chan struct{}) {
	cc.ctxMu.Lock()
	defer cc.ctxMu.Unlock()
	if cc.watchDone != done && !cc.watchOff {
		if cc.watchStop != nil {
			cc.watchStop()
		}
		cc.watchDone = done
		cc.watchStop = context.AfterFunc(ctx, func() { cc.interrupt(done) })
	}
	cc.leadDone = done
	if ctx.Err() != nil {
		// It ended before; the registration may have run already, while
		// no leader of this context read.
		cc.interruptLocked()
	}
}

// unwatch ends watch; it reports whether the leader's read was
// interrupted (its read deadline is then in the past).
func (cc *clientConn) unwatch() (interrupted bool) {
	cc.ctxMu.Lock()
	defer cc.ctxMu.Unlock()
	interrupted = cc.interrupted
	cc.leadDone, cc.interrupted = nil, false
	return interrupted
}

// interrupt wakes a leader reading under the context whose Done channel
// is done: its read fails with a timeout.
func (cc *clientConn) interrupt(done <-chan struct{}) {
	cc.ctxMu.Lock()
	defer cc.ctxMu.Unlock()
	if cc.leadDone == done {
		cc.interruptLocked()
	}
}

// interruptLocked sets the read deadline in the past, once per leader;
// ctxMu is held.
func (cc *clientConn) interruptLocked() {
	if !cc.interrupted {
		_ = cc.nc.SetReadDeadline(aLongTimeAgo)
		cc.interrupted = true
	}
}

// stopWatch drops the connection's registration for good, when it breaks.
func (cc *clientConn) stopWatch() {
	cc.ctxMu.Lock()
	defer cc.ctxMu.Unlock()
	cc.watchOff = true
	if cc.watchStop != nil {
		cc.watchStop()
		cc.watchStop, cc.watchDone = nil, nil
	}
}

// readUntil reads frames, handing each to its caller, until the answer to
// request id comes (mine) or reading fails.
func (cc *clientConn) readUntil(id uint32) (r reply, mine bool, err error) {
	for {
		h, payload, err := cc.readOne()
		if err != nil {
			return reply{}, false, err
		}
		if h.ID != id {
			cc.deliver(h, payload)
			continue
		}
		cc.mu.Lock()
		_, mine = cc.waiters[id]
		delete(cc.waiters, id)
		cc.mu.Unlock()
		if !mine { // the caller gave up (it is this goroutine: cannot happen)
			continue
		}
		return answer(h, payload), true, nil
	}
}

// release leaves the read side: to the reader goroutine while requests
// are in flight, free otherwise.
func (cc *clientConn) release() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return
	}
	if len(cc.waiters) > 0 {
		cc.takeover <- struct{}{} // a buffer of one: only a reader hands over
		return
	}
	cc.reading = false
	cc.idleSince = time.Now()
}

// readOne reads the next frame, going on with a partial one.
func (cc *clientConn) readOne() (Header, []byte, error) {
	if !cc.rhave {
		hb, err := cc.br.Peek(HeaderSize)
		if err != nil {
			if len(hb) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Header{}, nil, err
		}
		h, err := ParseHeader(hb, cc.c.opts.MaxFrame)
		if err != nil {
			return Header{}, nil, err
		}
		if h.Kind != KindResponse && h.Kind != KindError {
			return Header{}, nil, fmt.Errorf("%w: a server sends no %s frame", ErrMalformed, h.Kind)
		}
		_, _ = cc.br.Discard(HeaderSize) // peeked: cannot fail
		cc.rhave, cc.rh, cc.rbuf, cc.rn = true, h, make([]byte, h.Size), 0
	}
	for cc.rn < len(cc.rbuf) {
		n, err := cc.br.Read(cc.rbuf[cc.rn:])
		cc.rn += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Header{}, nil, fmt.Errorf("read %s payload: %w", cc.rh.Kind, err)
		}
	}
	h, payload := cc.rh, cc.rbuf
	cc.rhave, cc.rbuf = false, nil
	return h, payload, nil
}

func answer(h Header, payload []byte) reply {
	if h.Kind == KindError {
		return reply{err: &RemoteError{Method: h.Method, Msg: string(payload)}}
	}
	return reply{payload: payload}
}

// deliver hands a frame to the caller waiting for it, if any.
func (cc *clientConn) deliver(h Header, payload []byte) {
	cc.mu.Lock()
	ch := cc.waiters[h.ID]
	delete(cc.waiters, h.ID)
	cc.mu.Unlock()
	if ch != nil { // else the caller gave up
		ch <- answer(h, payload)
	}
}

// write writes one frame; the last caller in line flushes. A failure
// breaks the connection.
func (cc *clientConn) write(frame []byte) error {
	cc.queued.Add(1)
	cc.wmu.Lock()
	last := cc.queued.Add(-1) == 0
	err := cc.werr
	if err == nil {
		_, err = cc.bw.Write(frame)
		if err == nil && last {
			err = cc.bw.Flush()
		}
		cc.werr = err
	}
	cc.wmu.Unlock()
	if err == nil {
		return nil
	}
	ce := &ConnError{Op: "write", Addr: cc.c.addr, Err: err}
	cc.fail(ce)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err // the first failure says most
}

// readLoop is the connection's reader goroutine: each time a leader hands
// it the read side it delivers the answers until no request is in flight,
// and it ends when the connection breaks.
func (cc *clientConn) readLoop() {
	defer cc.c.wg.Done()
	for {
		select {
		case <-cc.takeover:
		case <-cc.done:
			return
		}
		for {
			h, payload, err := cc.readOne()
			if err != nil {
				cc.fail(&ConnError{Op: "read", Addr: cc.c.addr, Err: err})
				return
			}
			cc.deliver(h, payload)
			cc.mu.Lock()
			idle := len(cc.waiters) == 0
			if idle {
				cc.reading = false
				cc.idleSince = time.Now()
			}
			cc.mu.Unlock()
			if idle {
				break
			}
		}
	}
}

// fail breaks the connection: the next call dials again, and every call
// waiting on this one fails with err (the first failure wins).
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	waiters := cc.waiters
	cc.waiters = nil
	cc.mu.Unlock()
	cc.stopWatch()
	_ = cc.nc.Close()
	c := cc.c
	c.mu.Lock()
	if c.cur == cc {
		c.cur = nil
	}
	c.mu.Unlock()
	close(cc.done)
	for _, ch := range waiters {
		ch <- reply{err: err}
	}
}
