package frame

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rawServer is a frame server the test drives by hand: each connection's
// requests come out of reqs, and the test writes whatever bytes it likes
// back on the connection.
type rawServer struct {
	addr  string
	lis   net.Listener
	conns chan *rawConn
	wg    sync.WaitGroup
}

type rawConn struct {
	nc   net.Conn
	reqs chan Header // with the request's value in val
	vals chan string
}

func startRawServer(t *testing.T) *rawServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := &rawServer{addr: lis.Addr().String(), lis: lis, conns: make(chan *rawConn, 8)}
	var mu sync.Mutex
	var open []net.Conn
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, nc)
			mu.Unlock()
			rc := &rawConn{nc: nc, reqs: make(chan Header, 64), vals: make(chan string, 64)}
			rs.wg.Add(1)
			go func() {
				defer rs.wg.Done()
				defer close(rc.reqs)
				br := bufio.NewReader(nc)
				head := make([]byte, len(Magic))
				if _, err := io.ReadFull(br, head); err != nil {
					return
				}
				if _, err := nc.Write([]byte(Magic)); err != nil {
					return
				}
				rs.conns <- rc
				for {
					h, payload, err := readFrame(br, nil, DefaultMaxFrame)
					if err != nil {
						return
					}
					if h.Kind != KindRequest && h.Kind != KindOneway {
						continue
					}
					var v wrapperspb.StringValue
					_ = proto.Unmarshal(payload, &v)
					rc.vals <- v.Value
					rc.reqs <- h
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for _, nc := range open {
			_ = nc.Close()
		}
		mu.Unlock()
		rs.wg.Wait()
	})
	return rs
}

// next returns the connection's next request and its value.
func (rc *rawConn) next(t *testing.T) (Header, string) {
	t.Helper()
	select {
	case h, ok := <-rc.reqs:
		if !ok {
			t.Fatal("the connection closed")
		}
		return h, <-rc.vals
	case <-time.After(10 * time.Second):
		t.Fatal("no request")
	}
	return Header{}, ""
}

// echoNext answers the connection's next request with its own value.
func (rc *rawConn) echoNext(t *testing.T) {
	t.Helper()
	h, v := rc.next(t)
	if _, err := rc.nc.Write(answerFrame(t, h, v)); err != nil {
		t.Fatal(err)
	}
}

// answerFrame is the response frame to request h carrying v.
func answerFrame(t *testing.T, h Header, v string) []byte {
	t.Helper()
	b, err := AppendMessage(nil, Header{Kind: KindResponse, Method: h.Method, ID: h.ID}, wrapperspb.String(v), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (rs *rawServer) accept(t *testing.T) *rawConn {
	t.Helper()
	select {
	case rc := <-rs.conns:
		return rc
	case <-time.After(10 * time.Second):
		t.Fatal("no connection")
	}
	return nil
}

// A caller reading the connection for itself (the first of two in flight)
// gives up in the middle of another request's answer: the other caller
// still gets its answer whole, and the connection goes on.
func TestLeaderCancelledMidFrame(t *testing.T) {
	rs := startRawServer(t)
	c := newClient(t, rs.addr, Options{})
	lctx, cancel := context.WithCancel(context.Background())
	lerr := make(chan error, 1)
	go func() {
		_, err := call(lctx, c, mEcho, "leader")
		lerr <- err
	}()
	rc := rs.accept(t)
	lh, _ := rc.next(t)
	ferr := make(chan error, 1)
	fgot := make(chan string, 1)
	go func() {
		v, err := call(context.Background(), c, mEcho, "follower "+string(make([]byte, 5000)))
		fgot <- v
		ferr <- err
	}()
	fh, fv := rc.next(t)
	ans := answerFrame(t, fh, fv)
	half := len(ans) / 2
	if _, err := rc.nc.Write(ans[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the leader reads the half
	cancel()
	if err := <-lerr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled leader: %v", err)
	}
	// The cancel frame of the leader's request.
	if _, err := rc.nc.Write(ans[half:]); err != nil {
		t.Fatal(err)
	}
	if err := <-ferr; err != nil {
		t.Fatalf("follower: %v", err)
	}
	if v := <-fgot; v != fv {
		t.Fatalf("follower got %.20q, want %.20q", v, fv)
	}
	// A late answer to the cancelled request is dropped; the next call
	// leads and gets its own.
	if _, err := rc.nc.Write(answerFrame(t, lh, "late")); err != nil {
		t.Fatal(err)
	}
	got := callAsync(0, c, mEcho, "again")
	rc.echoNext(t)
	if v := <-got; v != "again" {
		t.Fatalf("after the cancelled leader: %q", v)
	}
}

// A lone caller whose context ends while it reads for itself returns at
// once, and the connection stays usable.
func TestLeaderDeadline(t *testing.T) {
	rs := startRawServer(t)
	c := newClient(t, rs.addr, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, c, mEcho, "slow")
		errc <- err
	}()
	rc := rs.accept(t)
	h, _ := rc.next(t)
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call past its deadline: %v", err)
	}
	// Half of the dropped answer, then the rest: the next caller reads
	// through it.
	late := answerFrame(t, h, "late")
	if _, err := rc.nc.Write(late[:5]); err != nil {
		t.Fatal(err)
	}
	got := callAsync(0, c, mEcho, "next")
	h2, v2 := rc.next(t)
	if _, err := rc.nc.Write(append(late[5:], answerFrame(t, h2, v2)...)); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != "next" {
		t.Fatalf("after the deadline: %q", v)
	}
}

// A connection watches the leader's context with one registration kept
// across calls: a long-lived context that served answered calls still
// interrupts a later leader when it ends; another context replaces the
// registration; a context that ended while no leader read interrupts the
// next leader of it at once; and no stale interrupt reaches a caller of
// another context.
func TestLeaderContextWatchAcrossCalls(t *testing.T) {
	rs := startRawServer(t)
	c := newClient(t, rs.addr, Options{})
	callIn := func(ctx context.Context, v string) <-chan error {
		errc := make(chan error, 1)
		go func() {
			got, err := call(ctx, c, mEcho, v)
			if err == nil && got != v {
				err = fmt.Errorf("got %q, want %q", got, v)
			}
			errc <- err
		}()
		return errc
	}
	app, cancelApp := context.WithCancel(context.Background())
	defer cancelApp()
	errc := callIn(app, "first")
	rc := rs.accept(t)
	rc.echoNext(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		errc := callIn(app, fmt.Sprint(i))
		rc.echoNext(t)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	// A leader whose request is never answered ends with its context.
	cancelledLeader := func(ctx context.Context, cancel context.CancelFunc, who string) {
		t.Helper()
		errc := callIn(ctx, who)
		rc.next(t)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v", who, err)
		}
	}
	cancelledLeader(app, cancelApp, "leader of the long-lived context")
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	cancelledLeader(other, cancelOther, "leader of a second context")

	// The registration of a context that ended while nobody read ran with
	// no leader to interrupt; a leader of it must not wait for its answer.
	ended, cancelEnded := context.WithCancel(context.Background())
	cc, err := c.conn(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cc.watch(ended, ended.Done())
	cc.unwatch()
	cancelEnded()
	time.Sleep(20 * time.Millisecond) // the registration runs, with no leader
	cc.watch(ended, ended.Done())
	if !cc.unwatch() {
		t.Fatal("a leader of a context that had ended was not interrupted")
	}
	_ = cc.nc.SetReadDeadline(time.Time{})

	got := callAsync(0, c, mEcho, "plain")
	time.Sleep(20 * time.Millisecond) // a stale interrupt would hit now
	rc.echoNext(t)
	if v := <-got; v != "plain" {
		t.Fatalf("a call without a context's end after the others: %q", v)
	}
}

// A call's own timeout (CallWithin) ends a lone caller reading for
// itself and a caller waiting behind another's read alike, with
// context.DeadlineExceeded; the connection stays usable, and a later call
// without a timeout is not cut short by the earlier one's deadline.
func TestCallWithinTimeout(t *testing.T) {
	rs := startRawServer(t)
	c := newClient(t, rs.addr, Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := callWithin(context.Background(), 30*time.Millisecond, c, mEcho, "lone")
		errc <- err
	}()
	rc := rs.accept(t)
	lone, _ := rc.next(t)
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lone call past its timeout: %v", err)
	}

	// A leader without a timeout, and a follower with one behind it.
	lgot := callAsync(0, c, mEcho, "leader")
	lh, lv := rc.next(t)
	start := time.Now()
	go func() {
		_, err := callWithin(context.Background(), 30*time.Millisecond, c, mEcho, "follower")
		errc <- err
	}()
	fh, _ := rc.next(t)
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("follower past its timeout: %v", err)
	}
	// The leader outlives the follower's and the lone call's timeouts:
	// neither deadline stayed on the connection.
	time.Sleep(time.Until(start.Add(100 * time.Millisecond)))
	// Late answers to both timed-out calls are dropped on the way.
	late := append(answerFrame(t, lone, "late"), answerFrame(t, fh, "late")...)
	if _, err := rc.nc.Write(append(late, answerFrame(t, lh, lv)...)); err != nil {
		t.Fatal(err)
	}
	if v := <-lgot; v != "leader" {
		t.Fatalf("leader after the follower's timeout: %q", v)
	}

	// A timeout longer than the answer takes changes nothing.
	got := callAsync(10*time.Second, c, mEcho, "in time")
	h, v := rc.next(t)
	time.Sleep(40 * time.Millisecond)
	if _, err := rc.nc.Write(answerFrame(t, h, v)); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != "in time" {
		t.Fatalf("call within its timeout: %q", v)
	}

	// A context that ends before the timeout ends the call with its own
	// error.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := callWithin(ctx, 10*time.Second, c, mEcho, "cancelled")
		errc <- err
	}()
	rc.next(t)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call with a timeout: %v", err)
	}
}

// A connection the server closed while no request was in flight is not
// used for the next request: it goes on a new connection, and succeeds.
func TestIdleConnectionClosedByServer(t *testing.T) {
	rs := startRawServer(t)
	c := newClient(t, rs.addr, Options{})
	got := callAsync(0, c, mEcho, "one")
	rc := rs.accept(t)
	rc.echoNext(t)
	if r := <-got; r != "one" {
		t.Fatalf("first call: %q", r)
	}
	_ = rc.nc.Close()
	time.Sleep(10 * idleProbeAfter)
	got = callAsync(0, c, mEcho, "two")
	rc2 := rs.accept(t)
	rc2.echoNext(t)
	if r := <-got; r != "two" {
		t.Fatalf("call after the server closed the idle connection: %q", r)
	}
}

// Many callers, some giving up at random moments, over plain TCP and TLS:
// every caller that does not give up gets its own answer, and the
// connection stays one.
func TestCallsWithCancellations(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) {
			ts := startServer(t, Options{}, nil)
			addr, copts := ts.addr, Options{}
			if withTLS {
				addr, copts = tlsRelay(t, ts.addr)
			}
			c := newClient(t, addr, copts)
			// Connect first: a dial that outlives a caller's deadline of
			// microseconds may fail as a dial, not as the deadline.
			if _, err := call(context.Background(), c, mEcho, "first"); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var cancelled, answered atomic.Int64
			errs := make(chan error, 16)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewPCG(uint64(g), 7))
					for i := range 150 {
						m := mEcho
						if rnd.IntN(3) == 0 {
							m = mEchoAsync
						}
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						var timeout time.Duration
						switch rnd.IntN(8) {
						case 0, 1:
							ctx, cancel = context.WithTimeout(ctx, time.Duration(rnd.IntN(200))*time.Microsecond)
						case 2:
							timeout = time.Duration(1+rnd.IntN(200)) * time.Microsecond
						case 3: // both: the earlier ends the call
							ctx, cancel = context.WithTimeout(ctx, time.Duration(rnd.IntN(200))*time.Microsecond)
							timeout = time.Duration(1+rnd.IntN(200)) * time.Microsecond
						}
						want := fmt.Sprintf("%d-%d-%s", g, i, string(make([]byte, rnd.IntN(20000))))
						got, err := callWithin(ctx, timeout, c, m, want)
						cancel()
						switch {
						case err == nil && got != want:
							errs <- fmt.Errorf("asked %.12q, got %.12q", want, got)
							return
						case err == nil:
							answered.Add(1)
						case errors.Is(err, context.DeadlineExceeded):
							cancelled.Add(1)
						default:
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("%d answered, %d gave up", answered.Load(), cancelled.Load())
			if got, err := call(context.Background(), c, mEcho, "last"); err != nil || got != "last" {
				t.Fatalf("last call: %q, %v", got, err)
			}
		})
	}
}

// callAsync makes a call without a context of its own on a goroutine of
// its own; its answer, or its error's text, comes on the channel returned.
func callAsync(timeout time.Duration, c *Client, m Method, v string) <-chan string {
	got := make(chan string, 1)
	go func() {
		r, err := callWithin(context.Background(), timeout, c, m, v)
		if err != nil {
			r = err.Error()
		}
		got <- r
	}()
	return got
}

// tlsRelay puts a TLS terminator in front of the server at addr, as the
// broker's port mux is, and returns its address and the client options
// that trust it.
func tlsRelay(t *testing.T, addr string) (string, Options) {
	t.Helper()
	ca := newTestCA(t)
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.server}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				_ = nc.Close()
				continue
			}
			mu.Lock()
			open = append(open, nc, up)
			mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(up, nc)
				_ = up.(*net.TCPConn).CloseWrite()
			}()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(nc, up)
				_ = nc.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for _, nc := range open {
			_ = nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return lis.Addr().String(), Options{TLS: &tls.Config{RootCAs: ca.pool}}
}

// A oneway request on a connection the server closed while it was idle
// goes on a new connection: it is not lost in the closed one.
func TestOnewayAfterIdleClose(t *testing.T) {
	rs := startRawServer(t)
	c := newClient(t, rs.addr, Options{})
	got := callAsync(0, c, mEcho, "one")
	rc := rs.accept(t)
	rc.echoNext(t)
	if r := <-got; r != "one" {
		t.Fatalf("first call: %q", r)
	}
	_ = rc.nc.Close()
	time.Sleep(10 * idleProbeAfter)
	if err := c.Oneway(context.Background(), mCount, wrapperspb.String("oneway")); err != nil {
		t.Fatal(err)
	}
	rc2 := rs.accept(t)
	if h, v := rc2.next(t); h.Method != mCount || v != "oneway" {
		t.Fatalf("the new connection got %s %q", h.Method, v)
	}
}
