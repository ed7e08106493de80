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

	"github.com/bolide-mq/bolide/internal/freeport"
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
	o.OnWelcome = func(w Welcome) {
		select {
		case welcomes <- w:
		default: // reconnects under load
		}
	}
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
	if !errors.Is(err, ErrSlaveTimeout) || !strings.Contains(err.Error(), "7]") {
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
	dead, err := freeport.Addr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
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
	want := []time.Duration{10, 20, 40, 50}
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
	for err, want := range map[error]bool{
		Refuse{Code: RefuseNotMaster}:                   true,
		fmt.Errorf("x: %w", errEpoch{epoch: 1, min: 2}): true,
		Refuse{Code: RefuseInternal}:                    false,
		errors.New("connection refused"):                false,
	} {
		if transient(err) != want {
			t.Errorf("transient(%v) = %v", err, !want)
		}
	}
}

// FuzzHandshake: whatever HELLO arrives, the master either refuses it,
// streams from a point inside its log where the slave's log ends, or (to a
// version 2 slave only) tells it to truncate below its end at a point the
// master still holds.
func FuzzHandshake(f *testing.F) {
	old, cur, p, oldE, curE := forkedLogs(40, 30, 25)
	cur.dropBefore(testSeg) // a minimum offset above 0, below the fork
	if cur.MinOffset() == 0 || cur.MinOffset() >= p {
		f.Fatalf("minimum %d, fork %d", cur.MinOffset(), p)
	}
	if d := (&Server{opts: srv0(curE), src: cur}).handshake(func() Hello {
		fr, _ := ReadFrame(bytes.NewReader(helloBytes(f, old, 2, oldE)), 1, nil)
		return fr.Hello
	}()); d.truncate == nil || d.truncate.Fork != p {
		f.Fatalf("the seed of a slave with a tail gets %+v", d)
	}
	srv := &Server{opts: srv0(curE), src: cur}
	helloOf := func(l *memLog, v uint16, e []EpochEntry) []byte { return helloBytes(f, l, v, e) }
	prefix := cur.clone()
	if err := prefix.truncate(p); err != nil {
		f.Fatal(err)
	}
	f.Add(helloOf(old, 2, oldE))
	f.Add(helloOf(old, 1, nil))
	f.Add(helloOf(prefix, 2, oldE))
	f.Add(helloOf(cur, 2, curE))
	f.Add(helloOf(newMemLog(testSeg), 2, nil))
	f.Add(helloOf(old, 2, []EpochEntry{{1, 0}, {2, p}, {3, p + 10}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ReadFrame(bytes.NewReader(b), 1, nil)
		if err != nil || fr.Kind != KindHello {
			return
		}
		h := fr.Hello
		d := srv.handshake(h)
		minOff, committed := cur.MinOffset(), cur.CommittedOffset()
		switch {
		case d.refuse != nil:
			if d.truncate != nil {
				t.Fatalf("refused and truncated: %+v", d)
			}
		case d.truncate != nil:
			tr := *d.truncate
			if h.Version < Version2 || tr.Fork < minOff || tr.Fork >= h.MaxOffset || tr.Fork > committed || tr.Epoch != 2 {
				t.Fatalf("TRUNCATE %+v for %+v (master %d..%d)", tr, h, minOff, committed)
			}
		default:
			if d.start < minOff || d.start > committed || (h.MaxOffset != 0 && d.start != h.MaxOffset) {
				t.Fatalf("start %d for %+v (master %d..%d)", d.start, h, minOff, committed)
			}
		}
	})
}

// srv0 is a master's options with epoch 2 and entries e.
func srv0(e []EpochEntry) ServerOptions {
	o := fastServerOptions("b")
	o.Epoch = constEpoch(2)
	o.Epochs = epochsFn(e)
	return o
}

// helloBytes encodes the HELLO of a slave holding l.
func helloBytes(t testing.TB, l *memLog, v uint16, e []EpochEntry) []byte {
	h := Hello{Version: v, BrokerName: "b", BrokerID: 1, MaxOffset: l.MaxOffset(), LastStart: -1, Epochs: e}
	if r, ok, _ := l.LastRecord(); ok {
		h.LastStart, h.LastSize, h.LastChecksum = r.Offset, r.Size, r.Checksum
	}
	return mustHello(t, h)
}

// TestFailoverCycle plays a failover with three replicas through the ha
// package alone: A is master of epoch 1 with slaves B and C; B stops
// first, C later, and A writes a tail neither has. B becomes master of
// epoch 2 at its end; C (ahead of B) re-attaches to it with Reconnect and
// is told to truncate, and A rejoins as B's slave and is too. All three
// end byte-identical, with B's epoch entries, and B's sync waits follow
// the slaves it lists.
func TestFailoverCycle(t *testing.T) {
	a := newReplica(newMemLog(testSeg), []EpochEntry{{1, 0}})
	b := newReplica(newMemLog(testSeg), nil)
	c := newReplica(newMemLog(testSeg), nil)
	var epochA atomic.Int64
	epochA.Store(1)
	oa := fastServerOptions("b")
	oa.Epoch, oa.Epochs = epochA.Load, a.epochs.get
	sa := startServer(t, oa, a.log)

	var addrB, addrC atomic.Value
	addrB.Store(sa.Addr())
	addrC.Store(sa.Addr())
	var minEpoch atomic.Int64
	minEpoch.Store(1)
	ob := b.options(func() string { return addrB.Load().(string) }, minEpoch.Load)
	ob.BrokerID = 2
	oc := c.options(func() string { return addrC.Load().(string) }, minEpoch.Load)
	oc.BrokerID = 3
	clB := startClient(t, ob, b.log)
	clC := startClient(t, oc, c.log)
	for i := 0; i < 30; i++ {
		a.log.append(1500+i*71%1500, byte(i))
	}
	end := a.log.MaxOffset()
	if err := sa.WaitReplicatedBy(context.Background(), end, func() []int64 { return []int64{2, 3} }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	detach := func(cl *Client, addr *atomic.Value) {
		addr.Store("")
		cl.Reconnect()
		waitFor(t, 5*time.Second, "idle", func() error {
			if st := cl.Status(); st.State != StateIdle {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
	}
	detach(clB, &addrB)
	for i := 0; i < 5; i++ {
		a.log.append(2000, 'c') // C gets these, B does not
	}
	waitFor(t, 5*time.Second, "C caught up", caughtUp(a.log, c.log))
	detach(clC, &addrC)
	for i := 0; i < 5; i++ {
		a.log.append(2500, 'a') // nobody gets these
	}
	_ = sa.Close()
	if !(b.log.MaxOffset() < c.log.MaxOffset() && c.log.MaxOffset() < a.log.MaxOffset()) {
		t.Fatalf("ends: A %d, B %d, C %d", a.log.MaxOffset(), b.log.MaxOffset(), c.log.MaxOffset())
	}

	// B becomes master of epoch 2 at its end.
	if err := clB.Close(); err != nil {
		t.Fatal(err)
	}
	forkAt := b.log.MaxOffset()
	b.epochs.set(append(b.epochs.get(), EpochEntry{Epoch: 2, Start: forkAt}))
	var epochB atomic.Int64
	epochB.Store(2)
	minEpoch.Store(2)
	obs := fastServerOptions("b")
	obs.Epoch, obs.Epochs = epochB.Load, b.epochs.get
	sb := startServer(t, obs, b.log)
	for i := 0; i < 10; i++ {
		b.log.append(1800, 'B')
	}
	// C re-attaches at once.
	addrC.Store(sb.Addr())
	clC.Reconnect()
	// A rejoins as a slave of B.
	oa2 := a.options(sb.Addr, minEpoch.Load)
	oa2.BrokerID = 1
	startClient(t, oa2, a.log)

	end = b.log.MaxOffset()
	if err := sb.WaitReplicatedBy(context.Background(), end, func() []int64 { return []int64{1, 3} }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*replica{"A": a, "C": c} {
		if !bytes.Equal(b.log.bytes(), r.log.bytes()) {
			t.Fatalf("%s's log differs from the new master's", name)
		}
		if n, f := r.truncates.Load(), r.lastFork.Load(); n != 1 || f != forkAt {
			t.Fatalf("%s: %d truncations, last at %d; want 1 at %d", name, n, f, forkAt)
		}
		if got, want := r.epochs.get(), b.epochs.get(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s's entries %v, want %v", name, got, want)
		}
	}
	waitFor(t, 5*time.Second, "AckedBy at the end", func() error {
		if got := sb.AckedBy([]int64{1, 3}); got != end {
			return fmt.Errorf("AckedBy = %d, want %d", got, end)
		}
		return nil
	})
}

// fakeMaster answers every HELLO with what answer returns and closes.
type fakeMaster struct {
	lis    net.Listener
	wg     sync.WaitGroup
	hellos chan Hello
}

func startFakeMaster(t *testing.T, answer func(Hello) []byte) *fakeMaster {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMaster{lis: lis, hellos: make(chan Hello, 64)}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if f, err := ReadFrame(bufio.NewReader(conn), 1, nil); err == nil && f.Kind == KindHello {
				select {
				case m.hellos <- f.Hello:
				default:
				}
				_, _ = conn.Write(answer(f.Hello))
			}
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = lis.Close(); m.wg.Wait() })
	return m
}

func (m *fakeMaster) Addr() string { return m.lis.Addr().String() }

// TestTruncateChecks: the slave obeys only a TRUNCATE it can carry out,
// retries a failed OnTruncate, and treats a TRUNCATE to a version 1 HELLO
// as a protocol error.
func TestTruncateChecks(t *testing.T) {
	mk := func(n int) *memLog {
		l := newMemLog(testSeg)
		for i := 0; i < n; i++ {
			l.append(900, 'x')
		}
		return l
	}
	t.Run("fork at the slave's end", func(t *testing.T) {
		l := mk(5)
		m := startFakeMaster(t, func(h Hello) []byte { return AppendTruncate(nil, Truncate{Fork: h.MaxOffset, Epoch: 9}) })
		r := newReplica(l, []EpochEntry{{1, 0}})
		cl := startClient(t, r.options(m.Addr, nil), l)
		waitFor(t, 5*time.Second, "refused", func() error {
			if st := cl.Status(); !strings.Contains(st.LastError, "TRUNCATE at") {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		if n := r.truncates.Load(); n != 0 {
			t.Fatalf("%d truncations", n)
		}
	})
	t.Run("to a version 1 slave", func(t *testing.T) {
		l := mk(5)
		m := startFakeMaster(t, func(h Hello) []byte { return AppendTruncate(nil, Truncate{Fork: 0, Epoch: 9}) })
		cl := startClient(t, fastClientOptions("b", 1, m.Addr), l)
		waitFor(t, 5*time.Second, "refused", func() error {
			if st := cl.Status(); !strings.Contains(st.LastError, "TRUNCATE to a version 1 slave") {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		if h := <-m.hellos; h.Version != Version1 || h.Epochs != nil {
			t.Fatalf("HELLO %+v", h)
		}
	})
	t.Run("OnTruncate fails once", func(t *testing.T) {
		l := mk(10)
		fork := l.MaxOffset()
		for i := 0; i < 3; i++ {
			l.append(900, 'y')
		}
		m := startFakeMaster(t, func(h Hello) []byte {
			if h.MaxOffset > fork {
				return AppendTruncate(nil, Truncate{Fork: fork, Epoch: 4})
			}
			return AppendRefuse(nil, Refuse{Code: RefuseNotMaster, Reason: "fake"})
		})
		r := newReplica(l, []EpochEntry{{1, 0}, {3, 100}})
		o := r.options(m.Addr, constEpoch(4))
		var calls atomic.Int32
		next := o.OnTruncate
		o.OnTruncate = func(f, e int64) error {
			if calls.Add(1) == 1 {
				return errors.New("disk on fire")
			}
			return next(f, e)
		}
		cl := startClient(t, o, l)
		waitFor(t, 5*time.Second, "truncated", func() error {
			if l.MaxOffset() != fork {
				return fmt.Errorf("log at %d, status %+v", l.MaxOffset(), cl.Status())
			}
			return nil
		})
		if got := r.epochs.get(); !reflect.DeepEqual(got, []EpochEntry{{1, 0}, {3, 100}}) {
			t.Fatalf("entries %v", got)
		}
		// The next HELLO is at the fork.
		waitFor(t, 5*time.Second, "a HELLO at the fork", func() error {
			for {
				select {
				case h := <-m.hellos:
					if h.MaxOffset == fork && h.Version == Version2 {
						return nil
					}
				default:
					return errors.New("none yet")
				}
			}
		})
		if n := calls.Load(); n != 2 {
			t.Fatalf("OnTruncate called %d times", n)
		}
	})
}
