package rawconn_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/rawconn"
)

// pair returns the two ends of a loopback TCP connection, the dialed one
// wrapped.
func pair(t *testing.T) (wrapped net.Conn, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	wrapped = rawconn.Wrap(nc)
	t.Cleanup(func() { wrapped.Close(); peer.Close() })
	if got := fmt.Sprintf("%T", wrapped); got != wrappedType {
		t.Fatalf("Wrap gave %s, want %s", got, wrappedType)
	}
	return wrapped, peer
}

// TestConnCarriesBytesBothWays writes more than the sockets hold at once
// both ways (so writes wait for room and reads for data) and checks every
// byte arrives in order.
func TestConnCarriesBytesBothWays(t *testing.T) {
	c, peer := pair(t)
	const size = 8 << 20
	out := make([]byte, size)
	for i := range out {
		out[i] = byte(i * 7 / 3)
	}
	// The peer echoes everything back.
	go func() { _, _ = io.Copy(peer, peer) }()
	werr := make(chan error, 1)
	go func() {
		// Uneven pieces, some larger than a socket buffer.
		b := out
		for n := 1; len(b) > 0; n = n*3 + 1 {
			m := min(n%(3<<20)+1, len(b))
			if k, err := c.Write(b[:m]); err != nil || k != m {
				werr <- errors.Join(err, io.ErrShortWrite)
				return
			}
			b = b[m:]
		}
		werr <- nil
	}()
	// A failed write leaves the reads waiting: bound them.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, 0, size)
	buf := make([]byte, 100_000)
	for len(got) < size {
		n, err := c.Read(buf)
		if err != nil {
			select {
			case werr := <-werr:
				t.Fatalf("read after %d bytes: %v (the writes: %v)", len(got), err, werr)
			default:
				t.Fatalf("read after %d bytes: %v", len(got), err)
			}
		}
		got = append(got, buf[:n]...)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, out) {
		t.Fatal("the bytes read back differ from those written")
	}
}

// TestConnErrors checks the errors a net.Conn's callers look for: a read
// deadline, the peer's end of the stream, a write to a reset connection, a
// read on the closed connection, each naming its operation.
func TestConnErrors(t *testing.T) {
	c, peer := pair(t)

	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("a read of nothing: %d, %v", n, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, err := c.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v", err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Fatal("the read returned before its deadline")
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" || oe.Source.String() != c.LocalAddr().String() ||
		oe.Addr.String() != c.RemoteAddr().String() {
		t.Fatalf("read past its deadline: %#v, want a net.OpError of op read between the two ends", err)
	}
	_ = c.SetReadDeadline(time.Time{})

	if _, err := peer.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	_ = peer.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "last" {
		t.Fatalf("read to the end of the stream: %q, %v", b, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after the end: %d, %v; want io.EOF itself", n, err)
	}

	// The peer goes away with data unread: the connection is reset, and
	// writes fail (the first may still be taken by the socket).
	_ = peer.(*net.TCPConn).SetLinger(0)
	_ = peer.Close()
	var werr error
	deadline := time.Now().Add(5 * time.Second)
	for werr == nil && time.Now().Before(deadline) {
		_, werr = c.Write(make([]byte, 4096))
	}
	if !errors.Is(werr, syscall.ECONNRESET) && !errors.Is(werr, syscall.EPIPE) {
		t.Fatalf("write to a reset connection: %v", werr)
	}
	if !errors.As(werr, &oe) || oe.Op != "write" {
		t.Fatalf("write to a reset connection: %#v, want a net.OpError of op write", werr)
	}

	_ = c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on the closed connection: %v", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on the closed connection: %v", err)
	}
}

// TestConnCloseEndsAWaitingRead: Close from another goroutine ends a read
// waiting for data.
func TestConnCloseEndsAWaitingRead(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_ = c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read ended by Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting for data was not ended by Close")
	}
}

// TestWrapKeepsOtherConns: a connection without a TCP socket is returned
// as it is, and a wrapped one still offers its descriptor.
func TestWrapKeepsOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := rawconn.Wrap(a); got != a {
		t.Fatalf("Wrap of a pipe gave %T", got)
	}
	c, _ := pair(t)
	if rawconn.Of(c) == nil && runtime.GOOS != "windows" {
		t.Fatal("a wrapped connection offers no descriptor")
	}
}
