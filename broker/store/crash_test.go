package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// The crash tests run the writer in a child process (this test binary,
// re-executed into TestCrashChild) so that an unclean stop is a real
// SIGKILL: no deferred code, no final flush, no checkpoint.

const (
	envChild = "BOLIDE_CRASH_CHILD"
	envDir   = "BOLIDE_CRASH_DIR"
	envFlush = "BOLIDE_CRASH_FLUSH"
	envCount = "BOLIDE_CRASH_COUNT"
	envStop  = "BOLIDE_CRASH_STOP" // clean | kill | forever
	// envWrite: the CommitLog write mode (auto when unset).
	envWrite = "BOLIDE_CRASH_WRITE"
	// envUntilFull: writers stop at their first Put refused with
	// commitlog.ErrDiskFull instead of failing.
	envUntilFull = "BOLIDE_CRASH_UNTIL_FULL"
	// envLight: the writer paces its puts and never flushes every queue
	// on its own (lightOptions), so its checkpoints journal staged units.
	envLight   = "BOLIDE_CRASH_LIGHT"
	crashQueue = 4
)

func crashOptions(dir string, flush commitlog.FlushMode) Options {
	o := testOptions(dir, flush)
	o.CheckpointInterval = 50 * time.Millisecond
	// Queue files grow 8, 8, 16, 32, 36 units, then 100: the crashes
	// land in files of every size.
	o.ConsumeQueue.FirstFileUnits = 8
	// Four queues count as many: checkpoints flush them with one syncfs
	// and leave the units of lightly written ones staged.
	o.ConsumeQueue.SyncFSAbove = 2
	return o
}

// lightOptions are crashOptions for a writer whose queues stay light:
// full-size queue files from the first (no new file in a run), and no
// periodic full flush, so that every periodic checkpoint after the first
// leaves the units staged and journaled.
func lightOptions(dir string, flush commitlog.FlushMode) Options {
	o := crashOptions(dir, flush)
	o.ConsumeQueue.UnitsPerFile = 1000
	o.ConsumeQueue.FirstFileUnits = 1000
	o.QueueFlushEvery = 1 << 30
	return o
}

// crashBody is the deterministic body of message i: mixed sizes from a few
// bytes to several KiB.
func crashBody(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	n := 1 + r.IntN(4000)
	if i%17 == 0 {
		n = 9000 + r.IntN(3000)
	}
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(r.UintN(256))
	}
	return b
}

func crashMsg(i int) *message.Ext {
	m := &message.Ext{Message: message.Message{Topic: "crash", Body: crashBody(i)}, QueueID: int32(i % crashQueue)}
	m.SetProperty(message.PropertyKeys, fmt.Sprintf("ck-%d", i))
	m.SetProperty(message.PropertyTags, fmt.Sprintf("t%d", i%3))
	return m
}

// TestCrashChild is the writer side; it does nothing unless run as a child.
func TestCrashChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("crash test child process only")
	}
	flush, _ := commitlog.ParseFlushMode(os.Getenv(envFlush))
	count, _ := strconv.Atoi(os.Getenv(envCount))
	untilFull := os.Getenv(envUntilFull) == "1"
	opts := crashOptions(os.Getenv(envDir), flush)
	light := os.Getenv(envLight) == "1"
	if light {
		opts = lightOptions(os.Getenv(envDir), flush)
	}
	if w := os.Getenv(envWrite); w != "" {
		var err error
		if opts.CommitLog.WriteMode, err = commitlog.ParseWriteMode(w); err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			os.Exit(3)
		}
	}
	s, err := Open(opts, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := os.Stdout
	next := 0
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if count > 0 && i >= count {
					return
				}
				if light {
					time.Sleep(time.Millisecond)
				}
				r, err := s.Put(context.Background(), crashMsg(i))
				if err != nil && untilFull && errors.Is(err, commitlog.ErrDiskFull) {
					return
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "put:", err)
					os.Exit(4)
				}
				// The ack line is written only after Put returned: every
				// line the parent reads is an acknowledged message.
				line := fmt.Sprintf("ack %d %d %d %d %d\n", i, r.PhysicalOffset, r.Size, r.QueueOffset, s.CommitLog().FlushedOffset())
				mu.Lock()
				_, _ = io.WriteString(out, line)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	switch os.Getenv(envStop) {
	case "clean":
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			os.Exit(5)
		}
		fmt.Fprintln(out, "closed")
	default:
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}

type ack struct {
	i, qid           int
	phys, size, qoff int64
	flushedAfterAck  int64
}

func (a ack) end() int64 { return a.phys + a.size }

// runChild runs the writer and returns its acknowledged messages sorted by
// physical offset. killAfter > 0 kills it after that many acks.
func runChild(t *testing.T, dir string, flush commitlog.FlushMode, count int, stop string, killAfter int) []ack {
	t.Helper()
	return runChildEnv(t, dir, flush, count, stop, killAfter, nil)
}

// runChildEnv is runChild with extra environment variables for the writer.
func runChildEnv(t *testing.T, dir string, flush commitlog.FlushMode, count int, stop string, killAfter int, env []string) []ack {
	t.Helper()
	return runWriter(t, dir, flush, count, stop, env, func(acks []ack, p *os.Process) bool {
		if killAfter > 0 && len(acks) == killAfter {
			_ = p.Kill()
			return true
		}
		return false
	})
}

// runWriter runs the writer with extra environment variables and calls
// onAck after every ack with the acks so far, in the order they came;
// onAck returns true once it has killed the writer.
func runWriter(t *testing.T, dir string, flush commitlog.FlushMode, count int, stop string, env []string,
	onAck func(acks []ack, p *os.Process) bool) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envDir+"="+dir, envFlush+"="+flush.String(),
		envCount+"="+strconv.Itoa(count), envStop+"="+stop)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acks []ack
	killed := false
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[0] != "ack" {
			continue
		}
		var v [5]int64
		for k := range v {
			v[k], _ = strconv.ParseInt(f[k+1], 10, 64)
		}
		acks = append(acks, ack{i: int(v[0]), qid: int(v[0]) % crashQueue, phys: v[1], size: v[2], qoff: v[3], flushedAfterAck: v[4]})
		if !killed && onAck(acks, cmd.Process) {
			killed = true
		}
	}
	err = cmd.Wait()
	if stop == "clean" && !killed && err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	if !killed && stop != "clean" {
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child should have died of SIGKILL: %v\n%s", err, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "put:") || strings.Contains(stderr.String(), "open:") {
		t.Fatalf("child failed: %s", stderr.String())
	}
	slices.SortFunc(acks, func(a, b ack) int { return int(a.phys - b.phys) })
	return acks
}

func segmentPath(dir string, segSize, off int64) (string, int64) {
	start := off / segSize * segSize
	return filepath.Join(dir, "commitlog", commitlog.SegmentName(start)), off - start
}

// damage applies one kind of tail damage to the last acknowledged record and
// returns how many acknowledged records (a prefix by physical offset) must
// survive, and whether the damaged log reads, to a scan of its records, as
// one that simply ends there: a zeroed page that starts at a record, or
// within the bytes of its length field that are zero anyway, leaves a
// length of zero, which is how the zero-filled end of the data reads.
func damage(t *testing.T, dir string, segSize int64, acks []ack, kind string) (keep int, endsCleanly bool) {
	t.Helper()
	last := acks[len(acks)-1]
	path, rel := segmentPath(dir, segSize, last.phys)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch kind {
	case "truncate":
		if err := f.Truncate(rel + last.size/2); err != nil {
			t.Fatal(err)
		}
		return len(acks) - 1, false
	case "zeropage":
		lastByte := rel + last.size - 1
		page := lastByte &^ 4095
		if _, err := f.WriteAt(make([]byte, 4096), page); err != nil {
			t.Fatal(err)
		}
		segStart := last.phys - rel
		for _, a := range acks {
			if a.end() <= segStart+page {
				keep++
			}
			if kept := segStart + page - a.phys; kept >= 0 && kept < 4 && a.size>>(8*(4-kept)) == 0 {
				endsCleanly = true
			}
		}
		return keep, endsCleanly
	case "flip":
		b := make([]byte, 1)
		pos := rel + last.size/2
		f.ReadAt(b, pos)
		b[0] ^= 0x5A
		if _, err := f.WriteAt(b, pos); err != nil {
			t.Fatal(err)
		}
		return len(acks) - 1, false
	}
	t.Fatalf("unknown damage %q", kind)
	return 0, false
}

// powerLoss cuts the CommitLog back to the last offset known durable: the
// highest flushed offset the writer reported or the checkpoint recorded.
// Every later byte, and every later segment, is lost.
func powerLoss(t *testing.T, dir string, segSize int64, acks []ack) int64 {
	t.Helper()
	durable := int64(0)
	for _, a := range acks {
		durable = max(durable, a.flushedAfterAck)
	}
	if cf, cp, ok, err := openCheckpoint(filepath.Join(dir, checkpointName)); err == nil {
		if ok {
			durable = max(durable, cp.FlushedOffset)
			// The staging journal is durable up to what the checkpoint
			// relied on (the syncfs before it); lose the rest.
			jp := filepath.Join(dir, "consumequeue", "staged.journal")
			if fi, err := os.Stat(jp); err == nil && fi.Size() > 20+cp.Journal.End {
				if err := os.Truncate(jp, 20+cp.Journal.End); err != nil {
					t.Fatal(err)
				}
			}
		}
		cf.close()
	}
	entries, err := os.ReadDir(filepath.Join(dir, "commitlog"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		start, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		p := filepath.Join(dir, "commitlog", e.Name())
		switch {
		case start >= durable:
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		case start+segSize > durable:
			if err := os.Truncate(p, durable-start); err != nil {
				t.Fatal(err)
			}
		}
	}
	return durable
}

// checkStoreHolds is verifyStore without the final append: it returns
// the records of each queue (CommitLog offsets) and the time bound it
// queried the index with.
func checkStoreHolds(t *testing.T, s *Store, want []ack, exact bool) (map[int32][]int64, int64) {
	t.Helper()
	// Every wanted record is in the log, intact, where it was acknowledged.
	for _, a := range want {
		m, err := s.ReadMessage(a.phys)
		if err != nil {
			t.Fatalf("acknowledged message %d at %d lost: %v", a.i, a.phys, err)
		}
		if !bytes.Equal(m.Body, crashBody(a.i)) || m.QueueOffset != a.qoff {
			t.Fatalf("message %d at %d differs", a.i, a.phys)
		}
	}
	// The queues agree with the log exactly: walk the log and rebuild them.
	perQueue := make(map[int32][]int64)
	keys := make(map[string]int64)
	_, err := s.CommitLog().Scan(s.CommitLog().MinOffset(), s.CommitLog().MaxOffset(), func(off int64, rec []byte) error {
		d, err := message.DecodeDispatch(rec)
		if err != nil {
			return err
		}
		if int64(len(perQueue[d.QueueID])) != d.QueueOffset {
			return fmt.Errorf("record at %d has queue offset %d, expected %d", off, d.QueueOffset, len(perQueue[d.QueueID]))
		}
		perQueue[d.QueueID] = append(perQueue[d.QueueID], off)
		keys[d.Keys] = off
		return nil
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if exact {
		var n int
		for _, offs := range perQueue {
			n += len(offs)
		}
		if n != len(want) {
			t.Fatalf("log holds %d records, want exactly %d", n, len(want))
		}
		if len(want) > 0 && s.CommitLog().MaxOffset() != want[len(want)-1].end() {
			t.Fatalf("log ends at %d, want %d", s.CommitLog().MaxOffset(), want[len(want)-1].end())
		}
	}
	for q := int32(0); q < crashQueue; q++ {
		minOff, maxOff := s.QueueOffsets("crash", q)
		if minOff != 0 || maxOff != int64(len(perQueue[q])) {
			t.Fatalf("queue %d: [%d, %d), log has %d records", q, minOff, maxOff, len(perQueue[q]))
		}
		for qo := int64(0); qo < maxOff; qo += 32 {
			res, err := s.GetMessages("crash", q, qo, 32, 1<<30, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, rec := range res.Records {
				d, _ := message.DecodeDispatch(rec)
				if d.PhysicalOffset != perQueue[q][qo+int64(k)] {
					t.Fatalf("queue %d offset %d points at %d, log says %d", q, qo+int64(k), d.PhysicalOffset, perQueue[q][qo+int64(k)])
				}
			}
		}
		if _, maxOff := s.QueueOffsets("crash", q); maxOff > 0 {
			if res, _ := s.GetMessages("crash", q, maxOff, 1, 1<<20, nil); res.Status != OffsetOverflowOne {
				t.Fatalf("queue %d: a unit past the log's records remains (%v)", q, res.Status)
			}
		}
	}
	// The index finds every record the log has and nothing it lost.
	now := time.Now().UnixMilli() + 1000
	for k, off := range keys {
		got, err := s.QueryByKey("crash", k, 0, now, 4)
		if err != nil || len(got) != 1 || got[0].PhysicalOffset != off {
			t.Fatalf("index lookup %q: %v %v, want offset %d", k, got, err, off)
		}
	}
	return perQueue, now
}

// verifyStore checks that the store holds exactly the acknowledged records
// want (and, when exact, nothing else), that ConsumeQueues and IndexFiles
// agree with the log, and that appends continue at the right offsets.
func verifyStore(t *testing.T, s *Store, want []ack, exact bool) {
	t.Helper()
	ctx := context.Background()
	rec := s.Recovery()
	t.Logf("recovered: journal %+v, dispatched again from %d: %d records", rec.Journal, rec.DispatchFrom, rec.Redispatched)
	perQueue, now := checkStoreHolds(t, s, want, exact)
	// New appends continue at the log's end with the next queue offsets.
	end := s.CommitLog().MaxOffset()
	r, err := s.Put(ctx, crashMsg(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	if r.PhysicalOffset < end || r.PhysicalOffset > end+s.opts.CommitLog.SegmentSize {
		t.Fatalf("append went to %d, log ended at %d", r.PhysicalOffset, end)
	}
	q := int32(1_000_000 % crashQueue)
	if r.QueueOffset != int64(len(perQueue[q])) {
		t.Fatalf("append got queue offset %d, want %d", r.QueueOffset, len(perQueue[q]))
	}
	if err := s.WaitDispatched(ctx, r.End()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.QueryByKey("crash", "ck-1000000", 0, now, 2); len(got) != 1 {
		t.Fatalf("new message not indexed")
	}
}

func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("crash matrix starts child processes")
	}
	for _, flush := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		for _, stop := range []string{"clean", "kill"} {
			for _, kind := range []string{"truncate", "zeropage", "flip"} {
				t.Run(fmt.Sprintf("%s/%s/%s", flush, stop, kind), func(t *testing.T) {
					dir := t.TempDir()
					opts := crashOptions(dir, flush)
					acks := runChild(t, dir, flush, 400, stop, 0)
					if len(acks) != 400 {
						t.Fatalf("%d acks", len(acks))
					}
					if segs := acks[len(acks)-1].end() / opts.CommitLog.SegmentSize; segs < 2 {
						t.Fatalf("log spans %d segments, want at least 3", segs+1)
					}
					keep, endsCleanly := damage(t, dir, opts.CommitLog.SegmentSize, acks, kind)
					s, err := Open(opts, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					if s.Recovery().CleanShutdown != (stop == "clean") {
						t.Fatalf("clean shutdown reported %v", s.Recovery().CleanShutdown)
					}
					// After a clean shutdown the checkpoint says where the
					// log ended, so even damage that reads as a clean end
					// is found. After a kill the last checkpoint may be
					// older than the damaged page, and such damage is then
					// a log that ends early: the records before it must
					// still all be there.
					if !s.Recovery().Log.Torn && (stop == "clean" || !endsCleanly) {
						t.Fatalf("damage not detected: %+v", s.Recovery())
					}
					verifyStore(t, s, acks[:keep], true)
				})
			}
		}
	}
}

// TestZeroedRecordStartFoundAfterCleanShutdown lays records out so that the
// last one starts at a page boundary or one or two bytes before it, shuts
// down cleanly and zeroes that page. A scan of the log then reads a length
// of zero, as at the end of the data; the checkpoint of the shutdown still
// says the record was durable, so recovery reports the log torn and keeps
// every record before the page.
func TestZeroedRecordStartFoundAfterCleanShutdown(t *testing.T) {
	for _, lead := range []int64{0, 1, 2} {
		t.Run(fmt.Sprintf("lead%d", lead), func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, commitlog.FlushSync)
			s, err := Open(opts, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			put := func(bodyLen int) PutResult {
				t.Helper()
				m := &message.Ext{Message: message.Message{Topic: "edge", Body: bytes.Repeat([]byte{'x'}, bodyLen)}}
				r, err := s.Put(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			first := put(100)
			overhead := int64(first.Size) - 100
			page := int64(2 * 4096)
			pad := put(int(page - lead - first.End() - overhead))
			last := put(100)
			if pad.End() != page-lead || last.PhysicalOffset != page-lead {
				t.Fatalf("records at %d..%d and %d, want the last at %d", pad.PhysicalOffset, pad.End(), last.PhysicalOffset, page-lead)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path, rel := segmentPath(dir, opts.CommitLog.SegmentSize, page)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(make([]byte, 4096), rel)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}

			s, err = Open(opts, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			rec := s.Recovery()
			if !rec.CleanShutdown || !rec.Log.Torn || rec.Log.End != page-lead {
				s.Close()
				t.Fatalf("recovery %+v: want a clean shutdown and a torn log ending at %d", rec, page-lead)
			}
			t.Logf("torn: %s", rec.Log.TornReason)
			for _, r := range []PutResult{first, pad} {
				if m, err := s.ReadMessage(r.PhysicalOffset); err != nil || len(m.Body) != int(r.Size-int32(overhead)) {
					s.Close()
					t.Fatalf("record at %d lost: %v", r.PhysicalOffset, err)
				}
			}
			// The loss is reported once: the checkpoint written by the
			// recovery says where the log ends now.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(opts, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if rec := s.Recovery(); rec.Log.Torn || rec.Log.End != page-lead {
				t.Fatalf("second recovery %+v: want an untorn log ending at %d", rec, page-lead)
			}
		})
	}
}

// TestPowerLossSyncKeepsAcknowledged kills the writer at random moments and
// then cuts the files back to the last durable offset: in sync mode every
// acknowledged message survives.
func TestPowerLossSyncKeepsAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for round := 0; round < 4; round++ {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			dir := t.TempDir()
			opts := crashOptions(dir, commitlog.FlushSync)
			killAfter := 100 + rand.IntN(400)
			acks := runChild(t, dir, commitlog.FlushSync, 0, "forever", killAfter)
			if len(acks) < killAfter {
				t.Fatalf("only %d acks", len(acks))
			}
			durable := powerLoss(t, dir, opts.CommitLog.SegmentSize, acks)
			for _, a := range acks {
				if a.end() > durable {
					t.Fatalf("message %d acknowledged at %d..%d beyond durable %d", a.i, a.phys, a.end(), durable)
				}
			}
			s, err := Open(opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			verifyStore(t, s, acks, false)
		})
	}
}

// asyncWriteModes are the CommitLog write paths of async mode: the
// mapping (its default) and pwrite.
var asyncWriteModes = []string{"mmap", "pwrite"}

// TestKillAsyncKeepsWritten: a process kill (not a power loss) in async mode
// loses nothing that was acknowledged, since the page cache survives, with
// either write path.
func TestKillAsyncKeepsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, write := range asyncWriteModes {
		t.Run(write, func(t *testing.T) {
			dir := t.TempDir()
			opts := crashOptions(dir, commitlog.FlushAsync)
			acks := runChildEnv(t, dir, commitlog.FlushAsync, 0, "forever", 300+rand.IntN(300), []string{envWrite + "=" + write})
			s, err := Open(opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			verifyStore(t, s, acks, false)
		})
	}
}

// TestPowerLossAsyncKeepsFlushed kills the async writer at a random moment
// and cuts the files back to the last offset reported durable: every
// acknowledged message below it survives, with either write path, and the
// queues and the index forget what was cut.
func TestPowerLossAsyncKeepsFlushed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, write := range asyncWriteModes {
		for round := 0; round < 2; round++ {
			t.Run(fmt.Sprintf("%s/%d", write, round), func(t *testing.T) {
				dir := t.TempDir()
				opts := crashOptions(dir, commitlog.FlushAsync)
				// Killed a random number of acks after the first one that
				// reports a flush, so that the cut keeps something.
				more, flushedAt := 100+rand.IntN(400), 0
				acks := runWriter(t, dir, commitlog.FlushAsync, 0, "forever", []string{envWrite + "=" + write},
					func(acks []ack, p *os.Process) bool {
						if flushedAt == 0 && acks[len(acks)-1].flushedAfterAck > 0 {
							flushedAt = len(acks)
						}
						if flushedAt > 0 && len(acks) == flushedAt+more {
							_ = p.Kill()
							return true
						}
						return false
					})
				durable := powerLoss(t, dir, opts.CommitLog.SegmentSize, acks)
				var kept []ack
				for _, a := range acks {
					if a.end() <= durable {
						kept = append(kept, a)
					}
				}
				if len(kept) == 0 {
					t.Fatalf("nothing of %d acks was durable (durable offset %d)", len(acks), durable)
				}
				s, err := Open(opts, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if got := s.CommitLog().MaxOffset(); got < durable {
					t.Fatalf("log ends at %d after the cut, durable was %d", got, durable)
				}
				verifyStore(t, s, kept, false)
			})
		}
	}
}

// TestJournalAfterKillAndPowerLoss: a writer whose queues stay light is
// killed after several checkpoints that journaled staged units; with
// either flush mode, and after a power loss that also cuts the journal
// back to what the last checkpoint relied on, the reopened store holds
// every message it must. After a kill alone it must have put the
// journaled units back; after the power loss a refused journal is logged.
func TestJournalAfterKillAndPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		for _, loss := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/powerloss=%v", flush, loss), func(t *testing.T) {
				dir := t.TempDir()
				opts := lightOptions(dir, flush)
				acks := runChildEnv(t, dir, flush, 0, "forever", 1500+rand.IntN(1000), []string{envLight + "=1"})
				want := acks
				if loss {
					durable := powerLoss(t, dir, opts.CommitLog.SegmentSize, acks)
					want = nil
					for _, a := range acks {
						if a.end() <= durable {
							want = append(want, a)
						}
					}
				}
				cf, cp, ok, err := openCheckpoint(filepath.Join(dir, checkpointName))
				if err != nil || !ok {
					t.Fatalf("checkpoint: %v %v", ok, err)
				}
				cf.close()
				s, err := Open(opts, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				// A kill right after a full flush leaves an empty journal that
				// the checkpoint relied on for nothing (End 0): nothing to put
				// back then.
				rec := s.Recovery()
				if !rec.Journal.Covers(cp.Journal) || (cp.Journal.End > 0 && rec.Journal.Units == 0) {
					if !loss {
						t.Fatalf("recovery did not use the journal: %+v, checkpoint %+v", rec, cp)
					}
					// Seen once in CI (sync flush), before replay replaced a
					// unit torn by the kill (consumequeue's dropTorn): the
					// journal was refused and recovery dispatched again
					// from StagedFrom, as designed. Should it happen again,
					// the logger above says what replay refused. What must
					// hold is below: every acknowledged message, in its
					// queue.
					t.Logf("recovery did not use the journal after the power loss: %+v, checkpoint %+v", rec, cp)
				}
				verifyStore(t, s, want, false)
			})
		}
	}
}
