package acceptq

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readByte is a Prepare that reads the first byte: 'x' refuses, anything
// else is handed out.
func readByte(nc net.Conn) (net.Conn, error) {
	b := make([]byte, 1)
	if _, err := io.ReadFull(nc, b); err != nil {
		return nil, err
	}
	if b[0] == 'x' {
		return nil, errors.New("refused")
	}
	return nc, nil
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

func dial(t *testing.T, addr net.Addr, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if first != "" {
		if _, err := c.Write([]byte(first)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// accept is Accept bounded by a timeout.
func accept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.c
	case <-time.After(5 * time.Second):
		t.Fatal("Accept blocked")
		return nil
	}
}

func TestPreparedAndRefused(t *testing.T) {
	var refused atomic.Int32
	refusedc := make(chan struct{}, 1)
	l := New(listen(t), readByte, func(net.Conn, error) {
		refused.Add(1)
		refusedc <- struct{}{}
	})
	defer l.Close()

	bad := dial(t, l.Addr(), "x")
	<-refusedc
	_ = bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bad.Read(make([]byte, 1)); err == nil {
		t.Fatal("a refused connection stays open")
	}

	dial(t, l.Addr(), "a")
	c := accept(t, l)
	defer c.Close()
	if refused.Load() != 1 {
		t.Fatalf("refused %d, want 1", refused.Load())
	}
}

// A client that stays silent holds up no other.
func TestSilentClientDoesNotBlock(t *testing.T) {
	l := New(listen(t), readByte, nil)
	defer l.Close()
	dial(t, l.Addr(), "")
	dial(t, l.Addr(), "a")
	c := accept(t, l)
	_ = c.Close()
}

// Close cuts the preparations short (without calling Refused), stops
// every goroutine, and Accept returns net.ErrClosed from then on.
func TestCloseCutsPreparationsShort(t *testing.T) {
	started := make(chan struct{}, 1)
	var refused atomic.Int32
	l := New(listen(t), func(nc net.Conn) (net.Conn, error) {
		started <- struct{}{}
		return readByte(nc)
	}, func(net.Conn, error) { refused.Add(1) })
	dial(t, l.Addr(), "")
	<-started
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a silent client")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if refused.Load() != 0 {
		t.Fatal("Refused called for a connection Close cut short")
	}
}

// A prepared connection nobody accepts is closed by Close.
func TestCloseClosesQueued(t *testing.T) {
	prepared := make(chan struct{})
	l := New(listen(t), func(nc net.Conn) (net.Conn, error) {
		defer close(prepared)
		return readByte(nc)
	}, nil)
	c := dial(t, l.Addr(), "a")
	<-prepared
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a queued connection stays open after Close")
	}
}

// fakeListener fails its Accepts with errs, then blocks until closed.
type fakeListener struct {
	errs   chan error
	closed chan struct{}
}

type tempErr struct{}

func (tempErr) Error() string   { return "temporary" }
func (tempErr) Temporary() bool { return true }

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case err := <-f.errs:
		return nil, err
	case <-f.closed:
		return nil, net.ErrClosed
	}
}
func (f *fakeListener) Close() error   { close(f.closed); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// A temporary Accept error is retried; another ends the listener and
// Accept returns it.
func TestAcceptErrors(t *testing.T) {
	f := &fakeListener{errs: make(chan error, 2), closed: make(chan struct{})}
	failed := errors.New("listener failed")
	f.errs <- tempErr{}
	f.errs <- failed
	l := New(f, readByte, nil)
	defer l.Close()
	if _, err := l.Accept(); !errors.Is(err, failed) {
		t.Fatalf("Accept: %v, want %v", err, failed)
	}
}
