package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer is the target in every test: it echoes what it reads, keeps a
// copy of everything it received, and counts connections.
type echoServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	accepted atomic.Int64
	active   atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	recv  bytes.Buffer
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.active.Add(1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(s.close)
	return s
}

func (s *echoServer) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
		s.active.Add(-1)
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.recv.Write(buf[:n])
			s.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func (s *echoServer) received() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.recv.Bytes())
}

func (s *echoServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(":0", target, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes msg and reads the echo back within timeout.
func roundTrip(c net.Conn, msg []byte, timeout time.Duration) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo mismatch")
	}
	return nil
}

func mustRoundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if err := roundTrip(c, []byte(msg), 5*time.Second); err != nil {
		t.Fatalf("round trip %q: %v", msg, err)
	}
}

// expectSilence asserts that nothing arrives on c for d.
func expectSilence(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var b [1]byte
	n, err := c.Read(b[:])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during fault: n=%d err=%v, want a timeout", n, err)
	}
}

// expectClosed asserts that c sees EOF or a reset within 2 s.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("connection still open after 2s")
		}
		return // io.EOF or connection reset
	}
}

// expectRejected asserts that a connection to addr is refused, reset or
// closed promptly: depending on timing the client sees the reset while
// connecting or on its first read.
func expectRejected(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("dial timed out: %v", err)
		}
		return
	}
	defer c.Close()
	expectClosed(t, c)
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// echoAll sends data, half-closes, and returns everything read until EOF.
func echoAll(c *net.TCPConn, data []byte) ([]byte, error) {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, rerr := io.ReadAll(c)
	if err := <-werr; err != nil {
		return got, err
	}
	return got, rerr
}

func TestNewListensOnLoopbackForEmptyHost(t *testing.T) {
	p, err := New(":0", "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	host, _, err := net.SplitHostPort(p.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", p.Addr())
	}
	if p.Target() != "127.0.0.1:1" {
		t.Fatalf("Target() = %q", p.Target())
	}
	if _, err := New("no-port", "x", nil); err == nil {
		t.Fatal("New with a bad address succeeded")
	}
}

func TestPassThrough(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	const size = 4 << 20
	data := randomBytes(t, size)

	c := dial(t, p.Addr())
	got, err := echoAll(c, data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo through proxy differs: got %d bytes, want %d", len(got), len(data))
	}
	if !bytes.Equal(srv.received(), data) {
		t.Fatal("target received different bytes")
	}
	// The half-close crossed the proxy both ways, so the link ends by itself.
	testutil.Eventually(t, 5*time.Second, "link to finish", func() bool { return p.Stats().Active == 0 })
	st := p.Stats()
	if st.ClientToTarget.Bytes != size || st.TargetToClient.Bytes != size {
		t.Fatalf("stats bytes = %d/%d, want %d each way", st.ClientToTarget.Bytes, st.TargetToClient.Bytes, size)
	}
	if st.Accepted != 1 || st.ChunksDropped() != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPassThroughConcurrent(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	const conns, size = 8, 512 << 10
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		data := randomBytes(t, size)
		c := dial(t, p.Addr())
		wg.Go(func() {
			got, err := echoAll(c, data)
			if err == nil && !bytes.Equal(got, data) {
				err = errors.New("echo mismatch")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, "links to finish", func() bool { return p.Stats().Active == 0 })
	if st := p.Stats(); st.ClientToTarget.Bytes != conns*size || st.TargetToClient.Bytes != conns*size {
		t.Fatalf("stats = %+v", st)
	}
}

func TestDelay(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	c := dial(t, p.Addr())
	mustRoundTrip(t, c, "warm-up")

	const d = 100 * time.Millisecond
	p.SetDelay(d)
	for i := range 3 {
		start := time.Now()
		mustRoundTrip(t, c, "ping")
		// Each direction adds d; assert the lower bound only.
		if rtt := time.Since(start); rtt < 2*d {
			t.Fatalf("round trip %d took %v, want at least %v", i, rtt, 2*d)
		}
	}
	if p.Stats().ClientToTarget.DelayedChunks == 0 {
		t.Fatal("no chunk counted as delayed")
	}

	// Order is kept across many small writes.
	var want bytes.Buffer
	for i := range 50 {
		msg := []byte{byte(i), byte(i), byte(i)}
		want.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, want.Len())
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("delayed chunks were reordered")
	}
}

func TestDelayChangeReachesWaitingChunk(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	c := dial(t, p.Addr())
	mustRoundTrip(t, c, "warm-up")

	p.SetDelay(time.Hour)
	if _, err := c.Write([]byte("slow")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "chunk to be waiting", func() bool { return p.Stats().ClientToTarget.DelayedChunks > 0 })
	p.SetDelay(0)
	got := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "slow" {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestBlackhole(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	c := dial(t, p.Addr())
	mustRoundTrip(t, c, "before")

	p.Blackhole(true)
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c, 200*time.Millisecond)

	// A connection made during the blackhole is accepted but never reaches
	// the target, like a SYN that vanished.
	c2 := dial(t, p.Addr())
	if _, err := c2.Write([]byte("lost too")); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c2, 200*time.Millisecond)
	if n := srv.accepted.Load(); n != 1 {
		t.Fatalf("target saw %d connections during the blackhole, want 1", n)
	}
	testutil.Eventually(t, 5*time.Second, "blackholed bytes to be counted", func() bool {
		return p.Stats().ClientToTarget.BlackholedBytes == uint64(len("lost")+len("lost too"))
	})

	p.Blackhole(false)
	mustRoundTrip(t, c, "after")
	mustRoundTrip(t, c2, "after too")
	if got := string(srv.received()); got != "beforeafterafter too" && got != "beforeafter tooafter" {
		t.Fatalf("target received %q: blackholed bytes leaked", got)
	}
	testutil.Eventually(t, 5*time.Second, "forwarded bytes to be counted", func() bool {
		return p.Stats().ClientToTarget.Bytes == uint64(len("beforeafterafter too"))
	})
}

func TestBlackholeHoldsClose(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	c := dial(t, p.Addr())
	mustRoundTrip(t, c, "hello")

	p.Blackhole(true)
	_ = c.Close()
	// The FIN does not cross the partition: the target keeps its connection.
	time.Sleep(100 * time.Millisecond)
	if n := srv.active.Load(); n != 1 {
		t.Fatalf("target has %d connections during the blackhole, want 1", n)
	}
	p.Blackhole(false)
	testutil.Eventually(t, 5*time.Second, "target to see the close", func() bool { return srv.active.Load() == 0 })
	testutil.Eventually(t, 5*time.Second, "link to finish", func() bool { return p.Stats().Active == 0 })
}

func TestCut(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	c1 := dial(t, p.Addr())
	c2 := dial(t, p.Addr())
	mustRoundTrip(t, c1, "one")
	mustRoundTrip(t, c2, "two")

	start := time.Now()
	p.Cut()
	expectClosed(t, c1)
	expectClosed(t, c2)
	t.Logf("clients saw the cut after %v", time.Since(start))
	testutil.Eventually(t, 5*time.Second, "target side to close", func() bool { return srv.active.Load() == 0 })
	testutil.Eventually(t, 5*time.Second, "links to finish", func() bool { return p.Stats().Active == 0 })
	if st := p.Stats(); st.Cut != 2 {
		t.Fatalf("Cut = %d, want 2", st.Cut)
	}

	c3 := dial(t, p.Addr())
	mustRoundTrip(t, c3, "reconnected")
}

func TestRefuse(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	existing := dial(t, p.Addr())
	mustRoundTrip(t, existing, "x")

	p.Refuse(true)
	expectRejected(t, p.Addr())
	if st := p.Stats(); st.Refused != 1 || st.Accepted != 2 {
		t.Fatalf("stats = %+v", st)
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Fatalf("target saw %d connections, want 1", n)
	}
	mustRoundTrip(t, existing, "existing connections are untouched")

	p.Refuse(false)
	mustRoundTrip(t, dial(t, p.Addr()), "accepted again")
}

func TestDropRate(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	c := dial(t, p.Addr())

	p.SetDropRate(1)
	if _, err := c.Write(randomBytes(t, 100<<10)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "all bytes to be dropped", func() bool { return p.Stats().ClientToTarget.DroppedBytes == 100<<10 })
	expectSilence(t, c, 200*time.Millisecond)
	st := p.Stats()
	if st.ClientToTarget.Bytes != 0 || st.ChunksDropped() == 0 || st.ClientToTarget.DroppedBytes != 100<<10 {
		t.Fatalf("with drop rate 1: %+v", st)
	}
	if len(srv.received()) != 0 {
		t.Fatal("target received bytes with drop rate 1")
	}

	p.SetDropRate(0)
	data := randomBytes(t, 1<<20)
	got, err := echoAll(c, data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("with drop rate 0: got %d bytes back, want %d", len(got), len(data))
	}
}

// dropPattern sends 200 one-byte chunks at drop rate 0.5 and returns the bytes
// that reached the target.
func dropPattern(t *testing.T, seed uint64) []byte {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	p.SetSeed(seed)
	p.SetDropRate(0.5)
	c := dial(t, p.Addr())
	const n = 200
	for i := range n {
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		// One chunk at a time, so the n-th decision is the n-th byte's.
		testutil.Eventually(t, 5*time.Second, "chunk to be handled", func() bool {
			s := p.Stats().ClientToTarget
			return s.Chunks+s.DroppedChunks == uint64(i+1)
		})
	}
	fwd := p.Stats().ClientToTarget.Chunks
	if fwd < n/5 || fwd > n-n/5 {
		t.Fatalf("%d of %d chunks forwarded at drop rate 0.5", fwd, n)
	}
	testutil.Eventually(t, 5*time.Second, "target to receive", func() bool { return uint64(len(srv.received())) == fwd })
	return srv.received()
}

func TestDropRateIsSeeded(t *testing.T) {
	a := dropPattern(t, 42)
	b := dropPattern(t, 42)
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different drops:\n%v\n%v", a, b)
	}
	if c := dropPattern(t, 43); bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same 200 decisions")
	}
	if !slices.IsSorted(a) {
		t.Fatal("surviving bytes out of order")
	}
}

func TestSetTarget(t *testing.T) {
	a := startEcho(t)
	b := startEcho(t)
	p := startProxy(t, a.addr())
	ca := dial(t, p.Addr())
	mustRoundTrip(t, ca, "to a")

	p.SetTarget(b.addr())
	if p.Target() != b.addr() {
		t.Fatalf("Target() = %q", p.Target())
	}
	cb := dial(t, p.Addr())
	mustRoundTrip(t, cb, "to b")
	mustRoundTrip(t, ca, "still a")
	if string(a.received()) != "to astill a" || string(b.received()) != "to b" {
		t.Fatalf("a got %q, b got %q", a.received(), b.received())
	}

	// A target that is down: the client is reset and the error is counted.
	down, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p.SetTarget(down)
	expectRejected(t, p.Addr())
	if st := p.Stats(); st.DialErrors != 1 {
		t.Fatalf("DialErrors = %d, want 1", st.DialErrors)
	}
}

func TestCloseWithActiveConnections(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startEcho(t)
	defer srv.close()

	p, err := New("127.0.0.1:0", srv.addr(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	p.Start() // no-op

	// An idle connection.
	idle := dial(t, p.Addr())
	mustRoundTrip(t, idle, "idle")

	// A connection streaming when Close comes.
	busy := dial(t, p.Addr())
	mustRoundTrip(t, busy, "busy")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		chunk := make([]byte, 16<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := busy.Write(chunk); err != nil {
				return
			}
		}
	})
	wg.Go(func() { _, _ = io.Copy(io.Discard, busy) })

	// A chunk waiting out a long delay.
	p.SetDelay(time.Hour)
	slow := dial(t, p.Addr())
	if _, err := slow.Write([]byte("slow")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "chunk to be delayed", func() bool { return p.Stats().ClientToTarget.DelayedChunks > 0 })

	// A connection accepted during a blackhole, not yet dialed.
	p.Blackhole(true)
	pending := dial(t, p.Addr())
	testutil.Eventually(t, 5*time.Second, "4 links", func() bool { return p.Stats().Active == 4 })

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v", took)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if st := p.Stats(); st.Active != 0 {
		t.Fatalf("Active = %d after Close", st.Active)
	}
	for _, c := range []net.Conn{idle, slow, pending} {
		expectClosed(t, c)
	}
	close(stop)
	wg.Wait()
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepting after Close")
	}
	// Setters and Cut after Close are harmless.
	p.Blackhole(false)
	p.Cut()
	p.Start()
	for _, c := range []net.Conn{idle, busy, slow, pending} {
		_ = c.Close()
	}
	srv.close()
}

func TestCloseWithoutStart(t *testing.T) {
	p, err := New(":0", "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p.Start()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
