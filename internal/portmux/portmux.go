package portmux

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/ratelog"
	"github.com/bolide-mq/bolide/internal/rawconn"
)

// HeadLen is how many bytes of a new connection the Mux reads to sort it.
const HeadLen = 4

// SniffTimeout bounds the wait for a new connection's first bytes and,
// for a TLS connection, its handshake and the first bytes inside it.
const SniffTimeout = 10 * time.Second

// tlsHandshake is the first byte of a TLS record carrying a handshake
// message: a TLS connection opens with its ClientHello in one.
const tlsHandshake = 0x16

// Protocol is one protocol served on the port.
type Protocol interface {
	// Name labels the protocol in logs and metrics ("grpc", "frame",
	// "remoting").
	Name() string
	// Claims reports whether a connection that opened with head (HeadLen
	// bytes) speaks this protocol.
	Claims(head []byte) bool
	// Serve serves the connections lis yields until lis is closed or
	// Shutdown is called. The connections replay their head.
	Serve(lis net.Listener) error
	// Shutdown stops serving: calls in flight may finish until ctx ends,
	// then the remaining connections are cut.
	Shutdown(ctx context.Context) error
}

// Mux accepts a listener's connections and hands each to the protocol
// that claims it.
type Mux struct {
	lis   net.Listener
	log   *zap.Logger
	fes   []Protocol
	lises []*connListener
	// tls is the port's TLS (SetTLS); the zero value serves plain text
	// only.
	tls TLS
	// refusing holds a token per RefusePlaintext running (MaxRefusing).
	refusing chan struct{}
	// warner rate-limits the WARN about refused connections.
	warner ratelog.Warner

	// mu protects sniffing (connections whose first bytes are awaited)
	// and closed.
	mu       sync.Mutex
	sniffing map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup // the accept loop, each sorting, each Serve
}

// NewMux returns a mux over lis; Serve starts it.
func NewMux(lis net.Listener, log *zap.Logger, fes ...Protocol) *Mux {
	if log == nil {
		log = zap.NewNop()
	}
	m := &Mux{lis: lis, log: log, fes: fes, sniffing: make(map[net.Conn]struct{}), refusing: make(chan struct{}, MaxRefusing)}
	for range fes {
		m.lises = append(m.lises, &connListener{addr: lis.Addr(), conns: make(chan net.Conn), done: make(chan struct{})})
	}
	return m
}

// Mode is what the port does with TLS and plain text.
type Mode int

// The modes (tlsconf.Mode is this type).
const (
	// Permissive serves both, told apart by the first byte.
	Permissive Mode = iota
	// Off serves plain text only: a connection opening with a TLS
	// handshake is closed.
	Off
	// Enforcing serves TLS only: a plain-text connection is handed to the
	// RefusePlaintext of the protocol that claims it, if it has one, to
	// answer with a clear error in that protocol, then closed.
	Enforcing
)

// String is the mode's name as the daemons' --tls-mode takes it.
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Enforcing:
		return "enforcing"
	}
	return "permissive"
}

// TLS is the port's TLS.
type TLS struct {
	Mode Mode
	// Config is called for each TLS connection (so certificates may
	// change). Nil: TLS is refused whatever the mode.
	Config func() *tls.Config
	// Refused, when set, counts each refused connection: "tls" for a TLS
	// handshake in Off mode, "plaintext_<protocol>" (the Name of the
	// protocol claiming it, "unknown" for none) in Enforcing mode.
	Refused func(kind string)
}

// Refuser is implemented by a Protocol that can tell a plain-text client
// in its own protocol that the port takes TLS only (Enforcing).
type Refuser interface {
	// RefusePlaintext answers the client on conn (which replays head, its
	// first HeadLen bytes) with a clear error, within conn's deadline;
	// the mux closes conn afterwards.
	RefusePlaintext(conn net.Conn, head []byte)
}

// MaxRefusing bounds the RefusePlaintext calls running at once: beyond
// it (a flood of plain-text connections) a refused connection is closed
// without an answer.
const MaxRefusing = 64

// RefuseTimeout bounds a RefusePlaintext.
const RefuseTimeout = 5 * time.Second

// RefuseLogInterval is the least time between two WARNs about refused
// connections; the ones in between are counted in the next.
const RefuseLogInterval = ratelog.Interval

// SetTLS sets the port's TLS mode, before Serve.
func (m *Mux) SetTLS(t TLS) { m.tls = t }

// Addr is the listener's address.
func (m *Mux) Addr() net.Addr { return m.lis.Addr() }

// Serve starts every protocol and the accept loop, and returns at once.
func (m *Mux) Serve() {
	for i, fe := range m.fes {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if err := fe.Serve(m.lises[i]); err != nil && !errors.Is(err, net.ErrClosed) {
				m.log.Error("protocol server stopped", zap.String("protocol", fe.Name()), zap.Error(err))
			}
		}()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.accept()
	}()
}

// accept runs until StopAccepting.
func (m *Mux) accept() {
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
			m.log.Error("listener failed", zap.Error(err))
			return
		}
		backoff = 0
		nc = rawconn.Wrap(nc)
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
func (m *Mux) route(nc net.Conn) {
	defer m.wg.Done()
	_ = nc.SetDeadline(time.Now().Add(SniffTimeout))
	conn, head, err := m.sniff(nc)
	_ = nc.SetDeadline(time.Time{})
	m.mu.Lock()
	delete(m.sniffing, nc)
	closed := m.closed
	m.mu.Unlock()
	if closed || err != nil {
		var he *handshakeError
		switch {
		case closed:
		case errors.As(err, &he):
			// A client certificate missing or not verified, say: worth a
			// (rate-limited) WARN and a count, unlike a client leaving.
			if m.tls.Refused != nil {
				m.tls.Refused("handshake")
			}
			m.warn("TLS handshake failed", zap.Stringer("remote", nc.RemoteAddr()), zap.Error(he.err))
		default:
			m.log.Debug("connection closed before its protocol was known", zap.Stringer("remote", nc.RemoteAddr()), zap.Error(err))
		}
		_ = nc.Close()
		return
	}
	if refuse := m.refusal(conn, head); refuse != nil {
		m.refuse(nc, conn, head, refuse)
		return
	}
	for i, fe := range m.fes {
		if fe.Claims(head) {
			m.lises[i].hand(conn)
			return
		}
	}
	m.log.Debug("connection speaks no protocol served here", zap.Stringer("remote", nc.RemoteAddr()), zap.Binary("head", head))
	_ = conn.Close()
}

// sniff reads nc's first HeadLen bytes, and for a TLS connection does the
// handshake and reads the first HeadLen bytes inside. It returns the
// connection to serve (replaying them) and those bytes.
func (m *Mux) sniff(nc net.Conn) (net.Conn, []byte, error) {
	head := make([]byte, HeadLen)
	if _, err := io.ReadFull(nc, head); err != nil {
		return nil, nil, err
	}
	var cfg *tls.Config
	if head[0] == tlsHandshake && m.tls.Mode != Off && m.tls.Config != nil {
		cfg = m.tls.Config()
	}
	if cfg == nil {
		return &replayConn{Conn: nc, head: head}, head, nil
	}
	tc := tls.Server(&replayConn{Conn: nc, head: head}, cfg)
	if err := tc.Handshake(); err != nil {
		if isTimeoutOrEOF(err) {
			return nil, nil, fmt.Errorf("tls handshake: %w", err)
		}
		return nil, nil, &handshakeError{err}
	}
	inner := make([]byte, HeadLen)
	if _, err := io.ReadFull(tc, inner); err != nil {
		return nil, nil, fmt.Errorf("tls: first bytes: %w", err)
	}
	return &replayConn{Conn: tc, head: inner}, inner, nil
}

// refusal is why the mode refuses a connection.
type refusal struct {
	kind  string
	proto Protocol // claiming a refused plain-text connection; nil if none
	tls   bool     // a TLS handshake refused in Off mode
}

// refusal is non-nil when the mode refuses conn, which opened with head.
func (m *Mux) refusal(conn net.Conn, head []byte) *refusal {
	if _, isTLS := conn.(*replayConn).Conn.(*tls.Conn); isTLS {
		return nil
	}
	switch {
	case head[0] == tlsHandshake && (m.tls.Mode == Off || m.tls.Config == nil):
		return &refusal{kind: "tls", tls: true}
	case m.tls.Mode == Enforcing:
		for _, fe := range m.fes {
			if fe.Claims(head) {
				return &refusal{kind: "plaintext_" + fe.Name(), proto: fe}
			}
		}
		return &refusal{kind: "plaintext_unknown"}
	}
	return nil
}

// refuse answers a refused connection in its protocol when it can, counts
// and logs it, and closes it. nc stays among the sniffed connections until
// then, so StopAccepting cuts a refusal short.
func (m *Mux) refuse(nc, conn net.Conn, head []byte, r *refusal) {
	if m.tls.Refused != nil {
		m.tls.Refused(r.kind)
	}
	msg := "plain-text connection refused: this port accepts TLS only (--tls-mode enforcing)"
	if r.tls {
		msg = "TLS connection refused: this port serves plain text only (--tls-mode off)"
	}
	m.warn(msg, zap.String("kind", r.kind), zap.Stringer("remote", nc.RemoteAddr()))
	if rf, ok := r.proto.(Refuser); ok && m.takeRefusing() {
		defer func() { <-m.refusing }()
		m.mu.Lock()
		closed := m.closed
		if !closed {
			m.sniffing[nc] = struct{}{}
		}
		m.mu.Unlock()
		if !closed {
			_ = nc.SetDeadline(time.Now().Add(RefuseTimeout))
			rf.RefusePlaintext(conn, head)
			m.mu.Lock()
			delete(m.sniffing, nc)
			m.mu.Unlock()
		}
	}
	_ = nc.Close()
}

// takeRefusing takes a token for one RefusePlaintext, false when
// MaxRefusing are running.
func (m *Mux) takeRefusing() bool {
	select {
	case m.refusing <- struct{}{}:
		return true
	default:
		return false
	}
}

// warn logs a refusal at most once per RefuseLogInterval.
func (m *Mux) warn(msg string, fields ...zap.Field) { m.warner.Warn(m.log, msg, fields...) }

// StopAccepting closes the listener and the connections still being
// sorted. The connections already handed over are the protocols' to stop.
func (m *Mux) StopAccepting() {
	m.mu.Lock()
	m.closed = true
	for nc := range m.sniffing {
		_ = nc.Close()
	}
	m.mu.Unlock()
	_ = m.lis.Close()
}

// Shutdown stops accepting, then shuts every protocol down in parallel,
// each bounded by ctx, and waits for them to return.
func (m *Mux) Shutdown(ctx context.Context) error {
	m.StopAccepting()
	errs := make([]error, len(m.fes))
	var wg sync.WaitGroup
	for i, fe := range m.fes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fe.Shutdown(ctx)
			_ = m.lises[i].Close()
		}()
	}
	wg.Wait()
	m.wg.Wait()
	return errors.Join(errs...)
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// handshakeError is a TLS handshake the server refused (not one the
// client abandoned).
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "tls handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// isTimeoutOrEOF reports a client that went silent or away.
func isTimeoutOrEOF(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func isTemporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

// connListener is the net.Listener a protocol serves: it yields the
// connections the mux sorted to it.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// hand gives nc to the protocol, or closes it once that has stopped.
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

// errNoDescriptor: the connection has no socket of its own to offer
// (TLS: its bytes must go through the TLS layer).
var errNoDescriptor = errors.New("portmux: the connection offers no descriptor")

// SyscallConn is the socket's descriptor access of a plain TCP connection,
// for the protocols that write without waiting (package frame); a TLS
// connection has none.
func (c *replayConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoDescriptor
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
