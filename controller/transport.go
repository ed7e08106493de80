package controller

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/acceptq"
	"github.com/bolide-mq/bolide/internal/ratelog"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// RaftSecurity is how the Raft transport protects its connections (doc.go,
// "Raft transport"): the hosting NameServer's TLS and credentials. The
// access control is Options.Guard. The zero value is permissive TLS with a
// self-signed certificate, plain-text dialing and no credentials.
type RaftSecurity struct {
	// TLS: Mode applies to the Raft listener (client certificates
	// included); the transport dials with TLS when Dial is set or Mode is
	// Enforcing, verifying against CAFile when set.
	TLS tlsconf.Config
	// Certs is the certificate source of the listener, and the one
	// presented when dialing; nil: opened from TLS (tlsconf.Open).
	Certs *tlsconf.Source
	// Credentials sign this controller's handshakes (the NameServer's
	// --access-key and --secret-key).
	Credentials auth.Credentials
}

// dialTLS tells whether the transport dials with TLS.
func (s *RaftSecurity) dialTLS() bool { return s.TLS.Dial || s.TLS.Mode == tlsconf.Enforcing }

// raftHandshakeTimeout bounds a connection's handshake, on both sides.
const raftHandshakeTimeout = 10 * time.Second

// raftWhat names the transport in the guard's checks and messages.
const raftWhat = "controller raft"

// The handshake (doc.go, "Raft transport"). The dialer sends a hello:
//
//	"BRF" version(1) | n uint16 | creds(n)
//
// and the acceptor answers:
//
//	status uint8 | n uint16 | body(n)
//
// with creds = alen uint16 | authorization(alen) | date (the rest), empty
// authorization for none; body is the acceptor's own creds when status is
// raftOK, else the refusal's text. Integers are big-endian; n is at most
// raftMaxBody.
const (
	raftHelloVersion = 1
	raftHelloHead    = 6
	raftAnswerHead   = 3
	raftMaxBody      = 1024
)

// raftMagic opens a hello; its first byte is neither a TLS record (0x16)
// nor a Raft RPC type.
var raftMagic = [3]byte{'B', 'R', 'F'}

// The answer's statuses.
const (
	raftOK      = 0
	raftRefused = 1
)

var errRaftHello = errors.New("controller raft: not a Bolide Raft handshake")

// appendCreds encodes creds.
func appendCreds(dst []byte, authorization, date string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(authorization)))
	dst = append(dst, authorization...)
	return append(dst, date...)
}

// parseCreds decodes creds.
func parseCreds(b []byte) (authorization, date string, err error) {
	if len(b) < 2 {
		return "", "", errors.New("controller raft: credentials too short")
	}
	n := int(binary.BigEndian.Uint16(b))
	if 2+n > len(b) {
		return "", "", errors.New("controller raft: authorization length beyond the credentials")
	}
	return string(b[2 : 2+n]), string(b[2+n:]), nil
}

// encodeHello is the dialer's hello; false when the credentials do not fit.
func encodeHello(authorization, date string) ([]byte, bool) {
	n := 2 + len(authorization) + len(date)
	if n > raftMaxBody {
		return nil, false
	}
	b := make([]byte, 0, raftHelloHead+n)
	b = append(b, raftMagic[:]...)
	b = append(b, raftHelloVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	return appendCreds(b, authorization, date), true
}

// parseHelloHead reads a hello's head: the length of its creds.
func parseHelloHead(h []byte) (int, error) {
	if len(h) < raftHelloHead || [3]byte(h[:3]) != raftMagic {
		return 0, errRaftHello
	}
	if h[3] != raftHelloVersion {
		return 0, fmt.Errorf("controller raft: handshake version %d (this controller speaks %d)", h[3], raftHelloVersion)
	}
	n := int(binary.BigEndian.Uint16(h[4:]))
	if n > raftMaxBody {
		return 0, fmt.Errorf("controller raft: handshake of %d bytes (at most %d)", n, raftMaxBody)
	}
	return n, nil
}

// decodeHello decodes a whole hello.
func decodeHello(b []byte) (authorization, date string, err error) {
	n, err := parseHelloHead(b)
	if err != nil {
		return "", "", err
	}
	if len(b) != raftHelloHead+n {
		return "", "", errors.New("controller raft: handshake length mismatch")
	}
	return parseCreds(b[raftHelloHead:])
}

// encodeAnswer is the acceptor's answer; a body too long is cut.
func encodeAnswer(status byte, body []byte) []byte {
	body = body[:min(len(body), raftMaxBody)]
	b := make([]byte, 0, raftAnswerHead+len(body))
	b = append(b, status)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// parseAnswerHead reads an answer's head: its status and body length.
func parseAnswerHead(h []byte) (status byte, n int, err error) {
	if len(h) < raftAnswerHead {
		return 0, 0, errors.New("controller raft: answer too short")
	}
	status, n = h[0], int(binary.BigEndian.Uint16(h[1:]))
	if status != raftOK && status != raftRefused {
		return 0, 0, fmt.Errorf("controller raft: answer status %d: not a Bolide Raft handshake", status)
	}
	if n > raftMaxBody {
		return 0, 0, fmt.Errorf("controller raft: answer of %d bytes (at most %d)", n, raftMaxBody)
	}
	return status, n, nil
}

// decodeAnswer decodes a whole answer.
func decodeAnswer(b []byte) (status byte, body []byte, err error) {
	status, n, err := parseAnswerHead(b)
	if err != nil {
		return 0, nil, err
	}
	if len(b) != raftAnswerHead+n {
		return 0, nil, errors.New("controller raft: answer length mismatch")
	}
	return status, b[raftAnswerHead:], nil
}

// signedCreds are fresh creds of c (empty when c is).
func signedCreds(c auth.Credentials) (authorization, date string) {
	if c.Empty() {
		return "", ""
	}
	return auth.NewHeader(c, time.Now())
}

// streamLayer is the Raft transport's raft.StreamLayer: a TCP listener
// under the TLS mode (tlsconf.Listen) whose connections are handed to
// Raft after a successful handshake, and a dialer doing TLS (when asked)
// and the handshake.
type streamLayer struct {
	sec   RaftSecurity
	guard *auth.Guard
	log   *zap.Logger
	addr  net.Addr     // advertised
	lis   net.Listener // acceptq's over tlsconf.Listen's: handshakes done
	dtls  *tls.Config  // nil: plain-text dialing

	warnIn, warnOut ratelog.Warner // refused connections, accepted and dialed
}

// newStreamLayer binds bind and starts accepting.
func newStreamLayer(bind string, sec RaftSecurity, guard *auth.Guard, log *zap.Logger) (*streamLayer, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if sec.Certs == nil && (sec.TLS.Mode != tlsconf.Off || sec.dialTLS()) {
		src, err := tlsconf.Open(sec.TLS, log.Named("tls"))
		if err != nil {
			return nil, fmt.Errorf("raft transport: %w", err)
		}
		sec.Certs = src
	}
	var dtls *tls.Config
	if sec.dialTLS() {
		cfg, err := tlsconf.ClientConfig(sec.TLS, sec.Certs)
		if err != nil {
			return nil, fmt.Errorf("raft transport: %w", err)
		}
		dtls = cfg
	}
	tcp, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	addr, ok := tcp.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		_ = tcp.Close()
		return nil, fmt.Errorf("local bind address %s is not advertisable", tcp.Addr())
	}
	s := &streamLayer{sec: sec, guard: guard, log: log, addr: addr, dtls: dtls}
	s.lis = acceptq.New(tlsconf.Listen(tcp, sec.TLS, sec.Certs, log), s.serverHandshake, s.refused)
	return s, nil
}

func (s *streamLayer) Addr() net.Addr { return s.addr }

// refused logs a connection whose handshake failed.
func (s *streamLayer) refused(nc net.Conn, err error) {
	s.warnIn.Warn(s.log, "controller raft: connection refused", zap.Stringer("remote", nc.RemoteAddr()), zap.Error(err))
}

// serverHandshake reads the hello, checks it with the guard and answers;
// it returns nc to hand to Raft. A hello failing the checks gets a
// refusal with the guard's message.
func (s *streamLayer) serverHandshake(nc net.Conn) (net.Conn, error) {
	_ = nc.SetDeadline(time.Now().Add(raftHandshakeTimeout))
	head := make([]byte, raftHelloHead)
	if _, err := io.ReadFull(nc, head); err != nil {
		return nil, fmt.Errorf("controller raft: reading the handshake: %w", err)
	}
	n, err := parseHelloHead(head)
	if err != nil {
		if !errors.Is(err, errRaftHello) {
			_, _ = nc.Write(encodeAnswer(raftRefused, []byte(err.Error())))
		}
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, fmt.Errorf("controller raft: reading the handshake: %w", err)
	}
	if err := s.check(nc.RemoteAddr().String(), body); err != nil {
		_, _ = nc.Write(encodeAnswer(raftRefused, []byte(err.Error())))
		return nil, err
	}
	a, d := signedCreds(s.sec.Credentials)
	own := appendCreds(nil, a, d)
	if len(own) > raftMaxBody {
		own = appendCreds(nil, "", "")
	}
	if _, err := nc.Write(encodeAnswer(raftOK, own)); err != nil {
		return nil, fmt.Errorf("controller raft: answering the handshake: %w", err)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return nc, nil
}

// check authenticates creds from peer: with ACL on, an admin user
// (Guard.Internal); with it off, anything.
func (s *streamLayer) check(peer string, creds []byte) error {
	authorization, date, err := parseCreds(creds)
	if err != nil {
		return err
	}
	p, err := s.guard.Header(peer, authorization, date)
	if err != nil {
		return err
	}
	return s.guard.Internal(p, peer, raftWhat)
}

func (s *streamLayer) Accept() (net.Conn, error) { return s.lis.Accept() }

// Close stops accepting, closes the connections still shaking hands and
// waits for them.
func (s *streamLayer) Close() error { return s.lis.Close() }

// Dial connects to a peer's Raft transport: TCP, TLS when asked, then the
// handshake; the peer's answer must be a success whose credentials pass
// this controller's guard (with ACL on: the authentication is mutual).
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	conn, err := s.clientHandshake(nc, string(address), timeout)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return conn, nil
}

func (s *streamLayer) clientHandshake(nc net.Conn, address string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > raftHandshakeTimeout {
		timeout = raftHandshakeTimeout
	}
	_ = nc.SetDeadline(time.Now().Add(timeout))
	conn := nc
	if s.dtls != nil {
		cfg := s.dtls
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			// Verify the peer's certificate for the host dialled (as
			// gRPC does), unless --tls-server-name says otherwise.
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return nil, fmt.Errorf("controller raft: %w", err)
			}
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("controller raft: TLS handshake with %s: %w", address, err)
		}
		conn = tc
	}
	hello, ok := encodeHello(signedCreds(s.sec.Credentials))
	if !ok {
		return nil, errors.New("controller raft: credentials too long for the handshake")
	}
	if _, err := conn.Write(hello); err != nil {
		return nil, fmt.Errorf("controller raft: handshake with %s: %w", address, err)
	}
	head := make([]byte, raftAnswerHead)
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, fmt.Errorf("controller raft: handshake with %s: no answer (does it accept this transport's TLS mode?): %w", address, err)
	}
	status, n, err := parseAnswerHead(head)
	if err != nil {
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, fmt.Errorf("controller raft: handshake with %s: %w", address, err)
	}
	if status != raftOK {
		return nil, fmt.Errorf("controller raft: %s refused this controller: %s", address, body)
	}
	if err := s.check(address, body); err != nil {
		s.warnOut.Warn(s.log, "controller raft: peer refused (its credentials)", zap.String("peer", address), zap.Error(err))
		return nil, fmt.Errorf("controller raft: %s is not a trusted controller: %w", address, err)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return conn, nil
}
