package ha

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSeg = 64 << 10

func fastServerOptions(name string) ServerOptions {
	o := DefaultServerOptions()
	o.ListenAddr = "127.0.0.1:0"
	o.BrokerName = name
	o.MasterAddr = "127.0.0.1:10911"
	o.HeartbeatInterval = 50 * time.Millisecond
	o.Timeout = 500 * time.Millisecond
	o.MaxFrameBytes = 8 << 10
	return o
}

func fastClientOptions(name string, id int64, addr func() string) ClientOptions {
	o := DefaultClientOptions()
	o.BrokerName = name
	o.BrokerID = id
	o.MasterAddr = addr
	o.HeartbeatInterval = 50 * time.Millisecond
	o.Timeout = 500 * time.Millisecond
	o.MinBackoff = 10 * time.Millisecond
	o.MaxBackoff = 100 * time.Millisecond
	return o
}

func startServer(t *testing.T, o ServerOptions, src Source) *Server {
	t.Helper()
	s, err := NewServer(o, src, zaptest.NewLogger(t).Named("master"))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func startClient(t *testing.T, o ClientOptions, rl ReplicaLog) *Client {
	t.Helper()
	c, err := NewClient(o, rl, zaptest.NewLogger(t).Named("slave"))
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond until it returns nil or d passes.
var waitFor = testutil.WaitFor

func caughtUp(master, slave *memLog) func() error {
	return func() error {
		if m, s := master.MaxOffset(), slave.MaxOffset(); m != s {
			return fmt.Errorf("slave at %d, master at %d", s, m)
		}
		return nil
	}
}

// TestReplicateWhileWriting streams a log with several segment ends to a
// slave while the master writes, and checks the copy is byte-identical and
// that WaitReplicated and the status agree.
func TestReplicateWhileWriting(t *testing.T) {
	master, slave := newMemLog(testSeg), newMemLog(testSeg)
	for i := 0; i < 50; i++ {
		master.append(100+i*37, byte(i))
	}
	srv := startServer(t, fastServerOptions("b"), master)
	cl := startClient(t, fastClientOptions("b", 1, srv.Addr), slave)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 500; i++ {
			master.append(i*13%3000, byte(i))
		}
	}()
	wg.Wait()
	end := master.MaxOffset()
	ctx := context.Background()
	waitFor(t, 5*time.Second, "in sync", func() error {
		if srv.InSync() != 1 {
			return fmt.Errorf("%+v", srv.Slaves())
		}
		return nil
	})
	if err := srv.WaitReplicated(ctx, end, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if slave.MaxOffset() < end {
		t.Fatalf("WaitReplicated returned with the slave at %d < %d", slave.MaxOffset(), end)
	}
	if !bytes.Equal(master.bytes(), slave.bytes()) {
		t.Fatal("slave's bytes differ from the master's")
	}
	if end < 4*testSeg {
		t.Fatalf("only %d bytes: want several segment ends", end)
	}
	// Awaited: on a loaded machine the session may time out and come back.
	waitFor(t, 5*time.Second, "master's view", func() error {
		st := srv.Slaves()
		if len(st) != 1 || !st[0].InSync || !st[0].Connected || st[0].AckOffset != end || st[0].LagBytes != 0 || st[0].BrokerID != 1 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	waitFor(t, 2*time.Second, "slave status", func() error {
		cs := cl.Status()
		if cs.State != StateReplicating || cs.Applied != end || cs.LagBytes != 0 || cs.MasterAddr != "127.0.0.1:10911" {
			return fmt.Errorf("%+v", cs)
		}
		return nil
	})
	// Two in-sync slaves are needed but there is one: refused at once.
	err := srv.WaitReplicated(ctx, end, 2, 5*time.Second)
	if !errors.Is(err, ErrNotEnoughInSync) {
		t.Fatalf("need 2: %v", err)
	}
}

// TestEmptySlaveCopiesRetainedLog: a new slave of a master whose oldest
// segments are gone starts its log at the master's minimum offset.
func TestEmptySlaveCopiesRetainedLog(t *testing.T) {
	master, slave := newMemLog(testSeg), newMemLog(testSeg)
	for master.MaxOffset() < 5*testSeg {
		master.append(2000, 'x')
	}
	master.dropBefore(2 * testSeg)
	srv := startServer(t, fastServerOptions("b"), master)
	startClient(t, fastClientOptions("b", 1, srv.Addr), slave)
	waitFor(t, 5*time.Second, "catch up", caughtUp(master, slave))
	if slave.MinOffset() != 2*testSeg {
		t.Fatalf("slave starts at %d", slave.MinOffset())
	}
	if !bytes.Equal(master.bytes(), slave.bytes()) {
		t.Fatal("bytes differ")
	}
}

// TestDivergedSlaveStops: a slave whose last record differs from the
// master's is refused; it stops for good, keeping its log.
func TestDivergedSlaveStops(t *testing.T) {
	master, slave := newMemLog(testSeg), newMemLog(testSeg)
	for i := 0; i < 20; i++ {
		master.append(500, 'm')
		slave.append(500, 'm')
	}
	slave.append(500, 's') // a record the master does not have
	master.append(500, 'M')
	srv := startServer(t, fastServerOptions("b"), master)
	cl := startClient(t, fastClientOptions("b", 1, srv.Addr), slave)
	waitFor(t, 5*time.Second, "diverged", func() error {
		if st := cl.Status(); st.State != StateDiverged {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	before := slave.MaxOffset()
	time.Sleep(200 * time.Millisecond) // would be several reconnects if it retried
	slave.mu.Lock()
	appends := slave.appends
	slave.mu.Unlock()
	if slave.MaxOffset() != before || appends != 0 {
		t.Fatalf("diverged slave changed its log: %d → %d, %d appends", before, slave.MaxOffset(), appends)
	}
	if len(srv.Slaves()) != 0 {
		t.Fatalf("master lists a refused slave: %+v", srv.Slaves())
	}
}

func TestCheck(t *testing.T) {
	m := newMemLog(testSeg)
	var ends []int64
	for m.MaxOffset() < 3*testSeg {
		ends = append(ends, m.append(3000, 'c'))
	}
	// Find a record ending right before a blank.
	var beforeBlank int64 = -1
	var blankStart RecordRef
	for i, e := range ends[:len(ends)-1] {
		if ends[i+1]-e > 3200 { // the next record went to the next segment
			beforeBlank = e
			r, _ := m.RecordAt(ends[i-1])
			blankStart = r
			break
		}
	}
	if beforeBlank < 0 {
		t.Fatal("no blank")
	}
	lastOf := func(end int64, i int) RecordRef {
		r, err := m.RecordAt(ends[i-1])
		if err != nil || ends[i-1]+int64(r.Size) != end {
			t.Fatalf("record before %d: %+v %v", end, r, err)
		}
		return r
	}
	r5 := lastOf(ends[5], 5)
	s := &Server{opts: fastServerOptions("b"), src: m}
	hello := func(maxOff int64, r RecordRef) Hello {
		h := Hello{Version: Version, BrokerName: "b", BrokerID: 1, MaxOffset: maxOff, LastStart: -1}
		if r.Size > 0 {
			h.LastStart, h.LastSize, h.LastChecksum = r.Offset, r.Size, r.Checksum
		}
		return h
	}
	segEnd := beforeBlank - beforeBlank%testSeg + testSeg
	cases := []struct {
		name  string
		h     Hello
		start int64
		code  RefuseCode
	}{
		{"empty slave", hello(0, RecordRef{}), 0, 0},
		{"at a record end", hello(ends[5], r5), ends[5], 0},
		{"at the master's end", hello(m.MaxOffset(), func() RecordRef { r, _, _ := m.LastRecord(); return r }()), m.MaxOffset(), 0},
		{"after a blank", hello(segEnd, blankStart), segEnd, 0},
		{"record end but claims the blank too early", hello(segEnd, r5), 0, RefuseDiverged},
		{"other checksum", hello(ends[5], RecordRef{Offset: r5.Offset, Size: r5.Size, Checksum: r5.Checksum + 1}), 0, RefuseDiverged},
		{"other size", hello(ends[5]+1, RecordRef{Offset: r5.Offset, Size: r5.Size + 1, Checksum: r5.Checksum}), 0, RefuseDiverged},
		{"not a record boundary", hello(ends[5]+10, RecordRef{Offset: r5.Offset + 10, Size: r5.Size, Checksum: r5.Checksum}), 0, RefuseDiverged},
		{"ahead of the master", hello(m.MaxOffset()+100, RecordRef{Offset: m.MaxOffset(), Size: 100, Checksum: 1}), 0, RefuseDiverged},
		{"segment start without records", hello(testSeg, RecordRef{}), testSeg, 0},
		{"no records, not a segment start", hello(100, RecordRef{}), 0, RefuseDiverged},
		{"other broker", Hello{Version: Version, BrokerName: "x", MaxOffset: 0, LastStart: -1}, 0, RefuseMismatch},
		{"other version", Hello{Version: 9, BrokerName: "b", LastStart: -1}, 0, RefuseMismatch},
		{"record past its end", Hello{Version: Version, BrokerName: "b", MaxOffset: 10, LastStart: 5, LastSize: 10}, 0, RefuseBadHello},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start, rf := s.check(c.h)
			switch {
			case c.code == 0 && rf != nil:
				t.Fatalf("refused: %v", rf)
			case c.code != 0 && (rf == nil || rf.Code != c.code):
				t.Fatalf("got start %d, refusal %v; want %s", start, rf, c.code)
			case c.code == 0 && start != c.start:
				t.Fatalf("start %d, want %d", start, c.start)
			}
		})
	}
	// Retention moved the master's start past the slave.
	m.dropBefore(2 * testSeg)
	if _, rf := s.check(hello(ends[5], r5)); rf == nil || rf.Code != RefuseTooOld {
		t.Fatalf("slave below the master's minimum: %v", rf)
	}
	if start, rf := s.check(hello(0, RecordRef{})); rf != nil || start != 2*testSeg {
		t.Fatalf("empty slave after retention: %d %v", start, rf)
	}
	s.opts.Serving = func() error { return errors.New("fenced") }
	if _, rf := s.check(hello(0, RecordRef{})); rf == nil || rf.Code != RefuseNotMaster {
		t.Fatalf("not serving: %v", rf)
	}
}

// TestSilentSlaveLeavesInSync: a slave that stops acking is dropped after
// the timeout; sync waits fail with ErrSlaveTimeout meanwhile and
// ErrNotEnoughInSync after.
func TestSilentSlaveLeavesInSync(t *testing.T) {
	master := newMemLog(testSeg)
	master.append(100, 'a')
	srv := startServer(t, fastServerOptions("b"), master)
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, _, _ := master.LastRecord()
	h, _ := AppendHello(nil, Hello{Version: Version, BrokerName: "b", BrokerID: 3, MaxOffset: master.MaxOffset(),
		LastStart: last.Offset, LastSize: last.Size, LastChecksum: last.Checksum})
	if _, err := conn.Write(h); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	f, err := ReadFrame(br, 0, nil)
	if err != nil || f.Kind != KindWelcome {
		t.Fatalf("welcome: %+v %v", f, err)
	}
	if _, err := conn.Write(AppendAck(nil, master.MaxOffset(), 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "in sync", func() error {
		if srv.InSync() != 1 {
			return fmt.Errorf("%+v", srv.Slaves())
		}
		return nil
	})
	// The slave goes silent; a write needs it.
	end := master.append(100, 'b')
	err = srv.WaitReplicated(context.Background(), end, 1, 100*time.Millisecond)
	if !errors.Is(err, ErrSlaveTimeout) {
		t.Fatalf("silent slave: %v", err)
	}
	start := time.Now()
	waitFor(t, 3*time.Second, "dropped", func() error {
		if srv.InSync() != 0 {
			return fmt.Errorf("%+v", srv.Slaves())
		}
		return nil
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("dropped after %v", d)
	}
	err = srv.WaitReplicated(context.Background(), end, 1, time.Second)
	if !errors.Is(err, ErrNotEnoughInSync) {
		t.Fatalf("after the drop: %v", err)
	}
	if st := srv.Slaves(); len(st) != 1 || st[0].Connected || st[0].InSync || st[0].LagBytes == 0 {
		t.Fatalf("status after the drop: %+v", st)
	}
}

// TestSilentMasterDropped: a master that accepts and then says nothing is
// dropped by the slave after the timeout, and the slave reconnects.
func TestSilentMasterDropped(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				br := bufio.NewReader(conn)
				if _, err := ReadFrame(br, 0, nil); err != nil {
					return
				}
				w, _ := AppendWelcome(nil, Welcome{Version: Version1, SegmentSize: testSeg})
				_, _ = conn.Write(w)
				for { // read acks, never answer
					if _, err := ReadFrame(br, 0, nil); err != nil {
						return
					}
				}
			}()
		}
	}()
	defer func() { lis.Close(); wg.Wait() }()
	startClient(t, fastClientOptions("b", 1, func() string { return lis.Addr().String() }), newMemLog(testSeg))
	waitFor(t, 5*time.Second, "a reconnect", func() error {
		if n := accepted.Load(); n < 2 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})
}

// TestSlowSlaveTimesOut: a slave that cannot make bytes durable makes sync
// waits time out rather than succeed.
func TestSlowSlaveTimesOut(t *testing.T) {
	master, slave := newMemLog(testSeg), newMemLog(testSeg)
	// The slave's log needs a wait for durability (sync flush); at first
	// the wait returns at once.
	open := make(chan struct{})
	close(open)
	slave.durable = open
	master.append(100, 'a')
	srv := startServer(t, fastServerOptions("b"), master)
	startClient(t, fastClientOptions("b", 1, srv.Addr), slave)
	waitFor(t, 2*time.Second, "in sync", func() error {
		if srv.InSync() != 1 {
			return errors.New("not in sync")
		}
		return nil
	})
	waitFor(t, 2*time.Second, "caught up", caughtUp(master, slave))
	block := make(chan struct{})
	slave.mu.Lock()
	slave.durable = block
	slave.mu.Unlock()
	end := master.append(100, 'b')
	err := srv.WaitReplicated(context.Background(), end, 1, 200*time.Millisecond)
	if !errors.Is(err, ErrSlaveTimeout) {
		t.Fatalf("slow slave: %v", err)
	}
	close(block)
	if err := srv.WaitReplicated(context.Background(), end, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestMasterMoves: when MasterAddr changes the client follows it.
func TestMasterMoves(t *testing.T) {
	m1, slave := newMemLog(testSeg), newMemLog(testSeg)
	for i := 0; i < 10; i++ {
		m1.append(300, 'a')
	}
	m2 := m1.clone() // the same log, as a promoted slave of m1 would hold
	s1 := startServer(t, fastServerOptions("b"), m1)
	s2 := startServer(t, fastServerOptions("b"), m2)
	var addr atomic.Value
	addr.Store(s1.Addr())
	startClient(t, fastClientOptions("b", 1, func() string { return addr.Load().(string) }), slave)
	waitFor(t, 5*time.Second, "catch up with m1", caughtUp(m1, slave))
	addr.Store(s2.Addr())
	m2.append(300, 'z')
	waitFor(t, 5*time.Second, "catch up with m2", caughtUp(m2, slave))
	if !bytes.Equal(m2.bytes(), slave.bytes()) {
		t.Fatal("bytes differ")
	}
}
