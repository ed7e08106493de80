package ha

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// epochBox holds a replica's epoch entries as the broker's epoch file
// would.
type epochBox struct {
	mu      sync.Mutex
	entries []EpochEntry
}

func newEpochBox(e ...EpochEntry) *epochBox { return &epochBox{entries: e} }

func (b *epochBox) get() []EpochEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.entries)
}

func (b *epochBox) set(e []EpochEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = slices.Clone(e)
}

// truncateTo drops the entries starting above off.
func (b *epochBox) truncateTo(off int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = slices.DeleteFunc(b.entries, func(e EpochEntry) bool { return e.Start > off })
}

// forkedLogs builds a former master's log and its successor's: both hold
// the same common records written in epoch 1; then the former master
// wrote tail records nobody received, and the successor, master of epoch 2
// from the common end, wrote its own. It returns the logs, the common end
// and both entry lists.
func forkedLogs(common, tail, fresh int) (old, cur *memLog, p int64, oldE, curE []EpochEntry) {
	old = newMemLog(testSeg)
	for i := 0; i < common; i++ {
		old.append(1000+i*97%2500, byte(i))
	}
	cur = old.clone()
	p = old.MaxOffset()
	for i := 0; i < tail; i++ {
		old.append(2000+i*31%1000, 'o')
	}
	for i := 0; i < fresh; i++ {
		cur.append(1500+i*53%1200, 'n')
	}
	return old, cur, p, []EpochEntry{{1, 0}}, []EpochEntry{{1, 0}, {2, p}}
}

func epochsFn(e []EpochEntry) func() []EpochEntry {
	return func() []EpochEntry { return slices.Clone(e) }
}

func constEpoch(e int64) func() int64 { return func() int64 { return e } }

// TestHandshakeV2 checks the master's answer to version 1 and version 2
// HELLOs: the prefix check first, then the fork rule.
func TestHandshakeV2(t *testing.T) {
	old, cur, p, oldE, curE := forkedLogs(30, 10, 20)
	helloOf := func(l *memLog, v uint16, e []EpochEntry) Hello {
		h := Hello{Version: v, BrokerName: "b", BrokerID: 1, MaxOffset: l.MaxOffset(), LastStart: -1, Epochs: e}
		if r, ok, _ := l.LastRecord(); ok {
			h.LastStart, h.LastSize, h.LastChecksum = r.Offset, r.Size, r.Checksum
		}
		return h
	}
	prefix := cur.clone()
	if err := prefix.truncate(p); err != nil {
		t.Fatal(err)
	}
	// A slave of an earlier master that got more epoch-1 bytes than the
	// current master, which took over at p.
	ahead := cur.clone()
	if err := ahead.truncate(p); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		ahead.append(3000, 'x') // past the current master's end
	}
	// A slave with other bytes than the master's that its entries claim
	// are the master's: epoch 1 both, ending below the master's epoch 1.
	short := prefix.clone()
	if err := short.truncate(p - int64(prefix.last.Size)); err != nil {
		t.Fatal(err)
	}
	short.append(50, 's')
	if short.MaxOffset() >= p {
		t.Fatalf("short slave ends at %d, the fork is %d", short.MaxOffset(), p)
	}
	srv := &Server{opts: fastServerOptions("b"), src: cur}
	srv.opts.Epoch = constEpoch(2)
	srv.opts.Epochs = epochsFn(curE)
	cases := []struct {
		name     string
		h        Hello
		epochs   bool // the server has Epochs
		start    int64
		truncate *Truncate
		code     RefuseCode
	}{
		{"v2 prefix", helloOf(prefix, 2, oldE), true, p, nil, 0},
		{"v2 unreplicated tail", helloOf(old, 2, oldE), true, 0, &Truncate{Fork: p, Epoch: 2}, 0},
		{"v2 ahead of the master", helloOf(ahead, 2, oldE), true, 0, &Truncate{Fork: p, Epoch: 2}, 0},
		{"v1 unreplicated tail", helloOf(old, 1, nil), true, 0, nil, RefuseDiverged},
		{"v2 to a master without entries", helloOf(old, 2, oldE), false, 0, nil, RefuseDiverged},
		{"v2 without entries", helloOf(old, 2, nil), true, 0, nil, RefuseDiverged},
		{"v2 no shared epoch", helloOf(old, 2, []EpochEntry{{1, 5}}), true, 0, nil, RefuseDiverged},
		{"v2 entries agree up to the slave's end", helloOf(short, 2, oldE), true, 0, nil, RefuseDiverged},
		{"v2 slave knows a newer epoch", helloOf(prefix, 2, []EpochEntry{{1, 0}, {3, p}}), true, 0, nil, RefuseNotMaster},
		{"v2 empty slave", helloOf(newMemLog(testSeg), 2, nil), true, 0, nil, 0},
		{"v3", helloOf(prefix, 3, oldE), true, 0, nil, RefuseMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{opts: srv.opts, src: cur}
			if !c.epochs {
				s.opts.Epochs = nil
			}
			d := s.handshake(c.h)
			switch {
			case c.code != 0:
				if d.refuse == nil || d.refuse.Code != c.code {
					t.Fatalf("got %+v (refuse %v), want %s", d, d.refuse, c.code)
				}
			case c.truncate != nil:
				if d.refuse != nil || d.truncate == nil || *d.truncate != *c.truncate {
					t.Fatalf("got truncate %v refuse %v, want %+v", d.truncate, d.refuse, *c.truncate)
				}
			default:
				if d.refuse != nil || d.truncate != nil || d.start != c.start {
					t.Fatalf("got %+v (refuse %v truncate %v), want start %d", d, d.refuse, d.truncate, c.start)
				}
				if c.epochs && !reflect.DeepEqual(d.entries, curE) {
					t.Fatalf("entries %v", d.entries)
				}
			}
		})
	}
	// The fork point is in segments retention deleted: too old.
	for cur.MaxOffset() < p+4*testSeg {
		cur.append(3000, 'n')
	}
	longTail := cur.clone()
	if err := longTail.truncate(p); err != nil {
		t.Fatal(err)
	}
	for longTail.MaxOffset() < p+3*testSeg {
		longTail.append(2900, 'o')
	}
	cur.dropBefore(p + 2*testSeg)
	d := srv.handshake(helloOf(longTail, 2, oldE))
	if d.refuse == nil || d.refuse.Code != RefuseTooOld {
		t.Fatalf("fork below the master's minimum: %+v %v", d, d.refuse)
	}
}

// replica is a slave's log with its epoch entries and a counter of
// truncations.
type replica struct {
	log       *memLog
	epochs    *epochBox
	truncates atomic.Int32
	lastFork  atomic.Int64
	welcomes  chan Welcome
}

func newReplica(l *memLog, e []EpochEntry) *replica {
	return &replica{log: l, epochs: newEpochBox(e...), welcomes: make(chan Welcome, 16)}
}

// options makes a version 2 client that truncates its memLog as told.
func (r *replica) options(addr func() string, minEpoch func() int64) ClientOptions {
	o := fastClientOptions("b", 1, addr)
	o.Epochs = r.epochs.get
	o.MinEpoch = minEpoch
	o.OnWelcome = func(w Welcome) {
		r.epochs.set(w.Epochs)
		select {
		case r.welcomes <- w:
		default:
		}
	}
	o.OnTruncate = func(fork, epoch int64) error {
		r.truncates.Add(1)
		r.lastFork.Store(fork)
		if err := r.log.truncate(fork); err != nil {
			return err
		}
		r.epochs.truncateTo(fork)
		return nil
	}
	return o
}

func v2Server(t *testing.T, l *memLog, epoch *atomic.Int64, e []EpochEntry) *Server {
	o := fastServerOptions("b")
	o.Epoch = epoch.Load
	o.Epochs = epochsFn(e)
	return startServer(t, o, l)
}

// TestTruncateAtFork: a former master with an unreplicated tail rejoins
// the new master as a slave; it is told to truncate at the fork point,
// does, and ends byte-identical with the master's epoch entries.
func TestTruncateAtFork(t *testing.T) {
	for _, c := range []struct {
		name                string
		common, tail, fresh int
	}{
		{"tail shorter than the new bytes", 30, 10, 40},
		{"tail past the master's end", 30, 60, 5},
		{"tail across segments", 20, 80, 80},
	} {
		t.Run(c.name, func(t *testing.T) {
			old, cur, p, oldE, curE := forkedLogs(c.common, c.tail, c.fresh)
			var epoch atomic.Int64
			epoch.Store(2)
			srv := v2Server(t, cur, &epoch, curE)
			r := newReplica(old, oldE)
			cl := startClient(t, r.options(srv.Addr, constEpoch(2)), old)
			waitFor(t, 5*time.Second, "caught up", caughtUp(cur, old))
			cur.append(700, 'z') // and it keeps replicating
			waitFor(t, 5*time.Second, "caught up again", caughtUp(cur, old))
			if !bytes.Equal(cur.bytes(), old.bytes()) {
				t.Fatal("the former master's log differs from the master's")
			}
			if n, f := r.truncates.Load(), r.lastFork.Load(); n != 1 || f != p {
				t.Fatalf("%d truncations, last at %d; want 1 at %d", n, f, p)
			}
			if got := r.epochs.get(); !reflect.DeepEqual(got, curE) {
				t.Fatalf("slave's entries %v, want the master's %v", got, curE)
			}
			w := <-r.welcomes
			if w.Version != Version2 || w.Epoch != 2 || !reflect.DeepEqual(w.Epochs, curE) {
				t.Fatalf("welcome %+v", w)
			}
			if st := cl.Status(); st.State != StateReplicating || st.Epoch != 2 {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestTruncateRefused: a TRUNCATE is not obeyed without OnTruncate (the
// slave stops as diverged), from a master below MinEpoch, or from a master
// not newer than the slave's newest entry. Reconnect revives a stopped
// slave.
func TestTruncateRefused(t *testing.T) {
	t.Run("no OnTruncate", func(t *testing.T) {
		old, cur, _, oldE, curE := forkedLogs(20, 10, 10)
		var epoch atomic.Int64
		epoch.Store(2)
		srv := v2Server(t, cur, &epoch, curE)
		r := newReplica(old, oldE)
		o := r.options(srv.Addr, nil)
		o.OnTruncate = nil
		before := old.bytes()
		cl := startClient(t, o, old)
		waitFor(t, 5*time.Second, "diverged", func() error {
			if st := cl.Status(); st.State != StateDiverged || !strings.Contains(st.LastError, "does not truncate") {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		if !bytes.Equal(before, old.bytes()) {
			t.Fatal("the log changed")
		}
	})
	t.Run("below MinEpoch", func(t *testing.T) {
		old, cur, _, oldE, curE := forkedLogs(20, 10, 10)
		var epoch atomic.Int64
		epoch.Store(2)
		srv := v2Server(t, cur, &epoch, curE)
		r := newReplica(old, oldE)
		cl := startClient(t, r.options(srv.Addr, constEpoch(3)), old)
		waitFor(t, 5*time.Second, "refused", func() error {
			if st := cl.Status(); st.State != StateConnecting || !strings.Contains(st.LastError, "master epoch 2 below 3") {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		if n := r.truncates.Load(); n != 0 {
			t.Fatalf("%d truncations", n)
		}
	})
	t.Run("not above the slave's newest entry", func(t *testing.T) {
		// Both hold epoch 2 from the same start but different bytes
		// (which a correct cluster never makes): the fork is the
		// master's end, below the slave's.
		old, cur, p, _, curE := forkedLogs(20, 30, 5)
		var epoch atomic.Int64
		epoch.Store(2)
		srv := v2Server(t, cur, &epoch, curE)
		r := newReplica(old, []EpochEntry{{1, 0}, {2, p}})
		cl := startClient(t, r.options(srv.Addr, nil), old)
		waitFor(t, 5*time.Second, "refused", func() error {
			if st := cl.Status(); st.State != StateConnecting || !strings.Contains(st.LastError, "only a newer master may cut") {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		if n := r.truncates.Load(); n != 0 {
			t.Fatalf("%d truncations", n)
		}
	})
	t.Run("Reconnect after divergence", func(t *testing.T) {
		master, slave := newMemLog(testSeg), newMemLog(testSeg)
		for i := 0; i < 10; i++ {
			master.append(500, 'm')
			slave.append(500, 'm')
		}
		slave.append(500, 's')
		master.append(500, 'M')
		srv := startServer(t, fastServerOptions("b"), master)
		good := slave.clone() // a master whose log extends the slave's
		good.append(800, 'g')
		srv2 := startServer(t, fastServerOptions("b"), good)
		var addr atomic.Value
		addr.Store(srv.Addr())
		cl := startClient(t, fastClientOptions("b", 1, func() string { return addr.Load().(string) }), slave)
		waitFor(t, 5*time.Second, "diverged", func() error {
			if st := cl.Status(); st.State != StateDiverged {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		addr.Store(srv2.Addr())
		cl.Reconnect()
		waitFor(t, 5*time.Second, "caught up with the new master", caughtUp(good, slave))
		if !bytes.Equal(good.bytes(), slave.bytes()) {
			t.Fatal("bytes differ")
		}
	})
}

// TestMinEpochWelcome: a slave refuses a master whose WELCOME carries an
// epoch below MinEpoch, appends nothing from it, and replicates once the
// master's epoch is high enough.
func TestMinEpochWelcome(t *testing.T) {
	master, slave := newMemLog(testSeg), newMemLog(testSeg)
	for i := 0; i < 10; i++ {
		master.append(800, 'm')
	}
	var epoch atomic.Int64
	epoch.Store(3)
	srv := v2Server(t, master, &epoch, []EpochEntry{{1, 0}, {3, 0}})
	r := newReplica(slave, nil)
	cl := startClient(t, r.options(srv.Addr, constEpoch(5)), slave)
	waitFor(t, 5*time.Second, "refused", func() error {
		if st := cl.Status(); st.State != StateConnecting || !strings.Contains(st.LastError, "master epoch 3 below 5") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	slave.mu.Lock()
	appends := slave.appends
	slave.mu.Unlock()
	if appends != 0 || slave.MaxOffset() != 0 || len(r.welcomes) != 0 {
		t.Fatalf("replicated from a master below MinEpoch: %d appends, end %d", appends, slave.MaxOffset())
	}
	epoch.Store(5)
	waitFor(t, 5*time.Second, "caught up", caughtUp(master, slave))
	if w := <-r.welcomes; w.Epoch != 5 {
		t.Fatalf("welcome %+v", w)
	}
}

// TestV1SlaveOfV2Master: a slave speaking version 1 replicates from a
// master with epoch entries as before, and a raw version 1 HELLO of a
// diverged log is refused, never told to truncate.
func TestV1SlaveOfV2Master(t *testing.T) {
	old, cur, p, _, curE := forkedLogs(20, 10, 10)
	var epoch atomic.Int64
	epoch.Store(2)
	srv := v2Server(t, cur, &epoch, curE)
	slave := cur.clone()
	if err := slave.truncate(p); err != nil {
		t.Fatal(err)
	}
	welcomes := make(chan Welcome, 4)
	o := fastClientOptions("b", 1, srv.Addr)
	o.OnWelcome = func(w Welcome) { welcomes <- w }
	startClient(t, o, slave)
	waitFor(t, 5*time.Second, "caught up", caughtUp(cur, slave))
	if !bytes.Equal(cur.bytes(), slave.bytes()) {
		t.Fatal("bytes differ")
	}
	if w := <-welcomes; w.Version != Version1 || w.Epochs != nil || w.Epoch != 2 {
		t.Fatalf("welcome to a version 1 slave: %+v", w)
	}

	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, _, _ := old.LastRecord()
	h, _ := AppendHello(nil, Hello{Version: Version1, BrokerName: "b", BrokerID: 4, MaxOffset: old.MaxOffset(),
		LastStart: last.Offset, LastSize: last.Size, LastChecksum: last.Checksum})
	if _, err := conn.Write(h); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := ReadFrame(bufio.NewReader(conn), 0, nil)
	if err != nil || f.Kind != KindRefuse || f.Refuse.Code != RefuseDiverged {
		t.Fatalf("version 1 HELLO of a diverged log: %+v %v", f, err)
	}
}

// TestWaitReplicatedBy: a wait for a listed set of slaves follows the set
// as it changes, times out, and ends when the server closes.
func TestWaitReplicatedBy(t *testing.T) {
	master := newMemLog(testSeg)
	master.append(100, 'a')
	srv := startServer(t, fastServerOptions("b"), master)
	s1, s2 := newMemLog(testSeg), newMemLog(testSeg)
	block := make(chan struct{})
	s2.durable = block // slave 2 never makes bytes durable until block closes
	startClient(t, fastClientOptions("b", 1, srv.Addr), s1)
	startClient(t, fastClientOptions("b", 2, srv.Addr), s2)
	waitFor(t, 5*time.Second, "both connected", func() error {
		if a := srv.AckedBy([]int64{1, 2}); a < 0 {
			return fmt.Errorf("%+v", srv.Slaves())
		}
		return nil
	})
	ctx := context.Background()
	if err := srv.WaitReplicatedBy(ctx, 1<<40, func() []int64 { return nil }, time.Hour); err != nil {
		t.Fatalf("no slaves listed: %v", err)
	}
	if a := srv.AckedBy(nil); a != math.MaxInt64 {
		t.Fatalf("AckedBy(nil) = %d", a)
	}
	if a := srv.AckedBy([]int64{1, 99}); a != -1 {
		t.Fatalf("AckedBy with an unknown slave = %d", a)
	}

	end := master.append(200, 'b')
	var ids atomic.Value
	ids.Store([]int64{1, 2})
	done := make(chan error, 1)
	go func() {
		done <- srv.WaitReplicatedBy(ctx, end, func() []int64 { return ids.Load().([]int64) }, time.Minute)
	}()
	waitFor(t, 5*time.Second, "slave 1 acked", func() error {
		if a := srv.AckedBy([]int64{1}); a < end {
			return fmt.Errorf("slave 1 at %d", a)
		}
		return nil
	})
	if a := srv.AckedBy([]int64{1, 2}); a >= end {
		t.Fatalf("slave 2 acked %d without making it durable", a)
	}
	select {
	case err := <-done:
		t.Fatalf("returned while slave 2 had not acked: %v", err)
	default:
	}
	ids.Store([]int64{1}) // slave 2 left the set
	srv.Wake()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not follow the smaller set")
	}

	err := srv.WaitReplicatedBy(ctx, end, func() []int64 { return []int64{2} }, 50*time.Millisecond)
	if !errors.Is(err, ErrSlaveTimeout) {
		t.Fatalf("slave 2 cannot ack: %v", err)
	}
	err = srv.WaitReplicatedBy(ctx, end, func() []int64 { return []int64{1, 7} }, 50*time.Millisecond)
	if !errors.Is(err, ErrSlaveTimeout) || !strings.Contains(err.Error(), "[7]") {
		t.Fatalf("slave 7 is not connected: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := srv.WaitReplicatedBy(cctx, end, func() []int64 { return []int64{2} }, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	close(block)
	if err := srv.WaitReplicatedBy(ctx, end, func() []int64 { return []int64{1, 2} }, 10*time.Second); err != nil {
		t.Fatalf("both: %v", err)
	}

	go func() {
		done <- srv.WaitReplicatedBy(ctx, end, func() []int64 { return []int64{7} }, time.Minute)
	}()
	_ = srv.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait outlived Close")
	}
}

// TestReconnectCutsBackoff: a slave sleeping a long backoff after failed
// attempts re-attaches to a new master as soon as Reconnect is called.
func TestReconnectCutsBackoff(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	_ = lis.Close() // nothing listens there now
	master, slave := newMemLog(testSeg), newMemLog(testSeg)
	master.append(500, 'm')
	srv := startServer(t, fastServerOptions("b"), master)
	var addr atomic.Value
	addr.Store(dead)
	o := fastClientOptions("b", 1, func() string { return addr.Load().(string) })
	o.MinBackoff, o.MaxBackoff = time.Hour, time.Hour
	cl := startClient(t, o, slave)
	waitFor(t, 5*time.Second, "a failed attempt", func() error {
		if st := cl.Status(); st.State != StateConnecting || st.LastError == "" {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	addr.Store(srv.Addr())
	cl.Reconnect()
	// The bound only detects a hang: the backoff is an hour.
	waitFor(t, 10*time.Second, "re-attached", caughtUp(master, slave))
}

func TestBackoff(t *testing.T) {
	b := backoff{min: 10 * time.Millisecond, max: 50 * time.Millisecond}
	b.reset()
	var got []time.Duration
	for i := 0; i < 4; i++ {
		got = append(got, b.next(false))
	}
	want := []time.Duration{20, 40, 50, 50}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
	if d := b.next(true); d != 10*time.Millisecond {
		t.Fatalf("after progress %v", d)
	}
	b.next(false)
	b.reset()
	if b.cur != b.min {
		t.Fatalf("reset left %v", b.cur)
	}
}
