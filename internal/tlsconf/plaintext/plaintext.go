// Package plaintext answers a plain-text client of a port that accepts
// TLS only (--tls-mode enforcing) with a clear error in its own protocol,
// so that it reports "connect with TLS" rather than a reset connection:
// the broker's and the NameServer's protocols (internal/portmux hands them
// the connection through their RefusePlaintext). Each answer is bounded by
// the connection's deadline, which the caller sets, and the caller closes
// the connection.
package plaintext

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/remoting"
)

// Message is what a plain-text client is told.
const Message = "this server accepts TLS only (--tls-mode enforcing): connect with TLS"

// GRPCLinger is how long a refused gRPC connection stays open after its
// first call was answered, to answer the calls the client sent with it.
const GRPCLinger = 200 * time.Millisecond

// GRPC serves conn (an HTTP/2 connection, its preface replayed) with a
// gRPC server that answers every call with codes.FailedPrecondition and
// Message — not Unavailable, which clients retry — until the first call
// was answered (and GRPCLinger after), the client leaves, or conn's
// deadline passes.
func GRPC(conn net.Conn) {
	answered := make(chan struct{})
	var once sync.Once
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		once.Do(func() { close(answered) })
		return status.Error(codes.FailedPrecondition, Message)
	}))
	lis := newOneConn(conn)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	deadline := time.NewTimer(RefuseBound)
	defer deadline.Stop()
	select {
	case <-answered:
		select {
		case <-time.After(GRPCLinger):
		case <-lis.gone:
		}
	case <-lis.gone: // the client left (or the deadline cut the conn)
	case <-deadline.C:
	}
	srv.Stop()
	<-done
}

// RefuseBound bounds GRPC on its own, should conn have no deadline.
const RefuseBound = 5 * time.Second

// oneConn is a listener yielding one connection, then blocking until
// closed; gone is closed when the connection is.
type oneConn struct {
	conns chan net.Conn
	done  chan struct{}
	gone  chan struct{}
	close sync.Once
	addr  net.Addr
}

func newOneConn(c net.Conn) *oneConn {
	l := &oneConn{conns: make(chan net.Conn, 1), done: make(chan struct{}), gone: make(chan struct{}), addr: c.LocalAddr()}
	l.conns <- &watchedConn{Conn: c, gone: l.gone}
	return l
}

func (l *oneConn) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConn) Close() error {
	l.close.Do(func() { close(l.done) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.addr }

// watchedConn closes gone when a read fails (the client left, the
// deadline passed) or the server closes it.
type watchedConn struct {
	net.Conn
	gone chan struct{}
	once sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { close(c.gone) })
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.once.Do(func() { close(c.gone) })
	return c.Conn.Close()
}

// Remoting reads the first RocketMQ remoting request on conn and answers
// it with one response of the same opaque, code SYSTEM_ERROR (1) and
// Message as its remark. A oneway request or bytes that are no request
// get nothing.
func Remoting(conn net.Conn) {
	raw, err := remoting.ReadFrame(conn, 1<<20, nil)
	if err != nil {
		return
	}
	req, err := remoting.DecodeFrame(raw)
	if err != nil || req.IsResponse() || req.IsOneway() {
		return
	}
	_, _ = conn.Write(remoting.AppendFrame(nil, req.Reply(remoting.SystemError, Message)))
}

// FrameRequests bounds the requests Frame answers on one connection.
const FrameRequests = 16

// Frame answers the frame protocol's magic (so the client knows the
// server speaks it), then each request with an error frame carrying
// Message — the first only, usually: a client going on after an Auth
// refused with an error frame (as from a server without the method) gets
// it again on its next request — until the client leaves, FrameRequests
// were answered or conn's deadline passes.
func Frame(conn net.Conn) {
	magic := make([]byte, len(frame.Magic))
	if _, err := io.ReadFull(conn, magic); err != nil || string(magic) != frame.Magic {
		return
	}
	if _, err := io.WriteString(conn, frame.Magic); err != nil {
		return
	}
	hb := make([]byte, frame.HeaderSize)
	for range FrameRequests {
		if _, err := io.ReadFull(conn, hb); err != nil {
			return
		}
		h, err := frame.ParseHeader(hb, frame.DefaultMaxFrame)
		if err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, conn, int64(h.Size)); err != nil {
			return
		}
		if h.Kind != frame.KindRequest {
			continue
		}
		if _, err := conn.Write(frame.AppendFrame(nil, frame.Header{Kind: frame.KindError, Method: h.Method, ID: h.ID}, []byte(Message))); err != nil {
			return
		}
	}
}

// HTTP reads a plain HTTP request's head on conn (at most 8 KiB) and
// answers 400 Bad Request with Message, as Go's HTTPS servers answer
// plain HTTP; reading the head first lets the client see the answer
// rather than a reset.
func HTTP(conn net.Conn) {
	br := bufio.NewReaderSize(io.LimitReader(conn, 8<<10), 1024)
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" || line == "\n" {
			break
		}
	}
	body := Message + " (https://)\n"
	_, _ = io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}
