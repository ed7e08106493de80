package tlsconf

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/acceptq"
	"github.com/bolide-mq/bolide/internal/portmux"
	"github.com/bolide-mq/bolide/internal/ratelog"
)

// HandshakeTimeout bounds the wait, on a listener from Listen, for a new
// connection's first byte and its TLS handshake.
const HandshakeTimeout = 10 * time.Second

// recordHandshake is the first byte of a TLS connection: a record carrying
// its ClientHello.
const recordHandshake = 0x16

// Listen applies c.Mode to a listener that serves one protocol whose client
// speaks first (the HA port, the admin HTTP port). Each accepted
// connection's first byte tells TLS (0x16, a handshake record) from plain
// text:
//
//   - Off: plain text is served; a TLS handshake is closed.
//   - Permissive: both; a TLS one is served with src's configuration
//     (certificate renewal and client certificates included).
//   - Enforcing: TLS only; plain text is closed.
//
// Refused connections are closed, counted (RefusedCollector) and logged as
// a WARN at most once per RefuseLogInterval. A TLS connection is handed
// out by Accept as a *tls.Conn whose handshake is done (a failed handshake
// is closed and logged); a plain one as a net.Conn replaying its first
// byte. The sorting runs off the Accept path: a slow client holds no one
// up. src may be nil with Off; without a src, TLS is refused in every mode.
func Listen(lis net.Listener, c Config, src *Source, log *zap.Logger) net.Listener {
	return ListenRefusing(lis, c, src, log, nil)
}

// RefuseTimeout bounds a refusePlain of ListenRefusing.
const RefuseTimeout = 5 * time.Second

// ListenRefusing is Listen that, in enforcing mode, hands a plain-text
// connection to refusePlain (when not nil) to tell the client in its own
// protocol to use TLS (within RefuseTimeout) before it is closed — the
// admin listener answers HTTP 400 (plaintext.HTTP).
func ListenRefusing(lis net.Listener, c Config, src *Source, log *zap.Logger, refusePlain func(net.Conn)) net.Listener {
	if log == nil {
		log = zap.NewNop()
	}
	if src == nil && c.Mode != Off {
		log.Error("TLS listener without a certificate source: TLS connections are refused", zap.Stringer("addr", lis.Addr()))
	}
	s := &sorter{addr: lis.Addr(), mode: c.Mode, src: src, log: log, refuse: refusePlain}
	return acceptq.New(lis, s.open, nil)
}

// RefuseLogInterval is the least time between two WARNs of one listener
// about refused connections; the ones in between are counted in the next.
const RefuseLogInterval = ratelog.Interval

// sorter applies a listener's mode to each accepted connection.
type sorter struct {
	addr   net.Addr
	mode   Mode
	src    *Source
	log    *zap.Logger
	refuse func(net.Conn) // answers a refused plain-text client; may be nil

	warn RateLimitedWarn
}

// errRefused is a connection the mode refuses (logged and counted by open).
var errRefused = errors.New("tlsconf: connection refused by the TLS mode")

// open reads nc's first byte and applies the mode: it returns the
// connection to serve, or an error for one refused or gone.
func (l *sorter) open(nc net.Conn) (net.Conn, error) {
	_ = nc.SetDeadline(time.Now().Add(HandshakeTimeout))
	head := make([]byte, 1)
	if _, err := io.ReadFull(nc, head); err != nil {
		return nil, err
	}
	rc := &replayConn{Conn: nc, head: head}
	if head[0] != recordHandshake {
		if l.mode == Enforcing {
			CountRefused(RefusedPlaintext)
			l.warn.Warn(l.log, "plain-text connection refused: this listener accepts TLS only (--tls-mode enforcing)",
				zap.Stringer("addr", l.addr), zap.Stringer("remote", nc.RemoteAddr()))
			if l.refuse != nil {
				_ = nc.SetDeadline(time.Now().Add(RefuseTimeout))
				l.refuse(rc)
			}
			return nil, errRefused
		}
		_ = nc.SetDeadline(time.Time{})
		return rc, nil
	}
	if l.mode == Off || l.src == nil {
		CountRefused(RefusedTLS)
		l.warn.Warn(l.log, "TLS connection refused: this listener serves plain text only (--tls-mode off)",
			zap.Stringer("addr", l.addr), zap.Stringer("remote", nc.RemoteAddr()))
		return nil, errRefused
	}
	tc := tls.Server(rc, l.src.ServerConfig())
	if err := tc.Handshake(); err != nil {
		CountRefused(RefusedHandshake)
		l.warn.Warn(l.log, "TLS handshake failed", zap.Stringer("addr", l.addr),
			zap.Stringer("remote", nc.RemoteAddr()), zap.Error(err))
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return tc, nil
}

// replayConn gives back the byte read to sort a connection before the
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

// NetConn is the connection underneath (as tls.Conn's).
func (c *replayConn) NetConn() net.Conn { return c.Conn }

// RateLimitedWarn logs a WARN at most once per RefuseLogInterval, with the
// number of the ones left out since the last. The zero value is ready.
type RateLimitedWarn = ratelog.Warner

// The kinds of refused connections counted.
const (
	// RefusedPlaintext: plain text in enforcing mode on a listener from
	// Listen (portmux counts per protocol: RefusedPlaintext + "_" + name).
	RefusedPlaintext = "plaintext"
	// RefusedTLS: a TLS handshake in off mode.
	RefusedTLS = "tls"
	// RefusedHandshake: a TLS handshake that failed (a client
	// certificate missing or not verified, say).
	RefusedHandshake = "handshake"
)

var refused sync.Map // kind → *atomic.Int64

// CountRefused counts one refused connection of kind (one of the Refused
// constants, or RefusedPlaintext+"_"+protocol).
func CountRefused(kind string) {
	v, ok := refused.Load(kind)
	if !ok {
		v, _ = refused.LoadOrStore(kind, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// Refused is how many connections of kind were refused in this process.
func Refused(kind string) int64 {
	if v, ok := refused.Load(kind); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

var refusedDesc = prometheus.NewDesc("bolide_tls_refused_connections_total",
	"Connections refused by the TLS mode (plain text in enforcing mode, TLS in off mode) or by a failed TLS handshake, by kind.",
	[]string{"kind"}, nil)

// RefusedCollector exports the process's refused connections.
func RefusedCollector() prometheus.Collector { return refusedCollector{} }

type refusedCollector struct{}

func (refusedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- refusedDesc }

func (refusedCollector) Collect(ch chan<- prometheus.Metric) {
	refused.Range(func(k, v any) bool {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(v.(*atomic.Int64).Load()), k.(string))
		return true
	})
}

// PortTLS is the TLS of a multiplexed port (internal/portmux) in mode with
// the certificates of s; refusals are counted in the refused-connection
// metric.
func (s *Source) PortTLS(mode Mode) portmux.TLS {
	return portmux.TLS{Mode: mode, Config: s.ServerConfig, Refused: CountRefused}
}
