package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// putCrashMsgs puts messages first..first+n-1 (crashMsg) in batches and
// returns their acks, sorted by offset.
func putCrashMsgs(t *testing.T, s *Store, first, n int) []ack {
	t.Helper()
	var acks []ack
	for i := first; i < first+n; i += 20 {
		var msgs []*message.Ext
		for j := i; j < min(first+n, i+20); j++ {
			msgs = append(msgs, crashMsg(j))
		}
		res, err := s.PutBatch(context.Background(), msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			j := i + k
			acks = append(acks, ack{i: j, qid: j % crashQueue, phys: r.PhysicalOffset, size: int64(r.Size), qoff: r.QueueOffset})
		}
	}
	return acks
}

// abandon stops s as a crash of the process would: no final dispatch,
// flush of the queues or checkpoint, and the abort marker stays. (What
// was written to the files stays in the page cache, as after a crash.)
func abandon(t *testing.T, s *Store) {
	t.Helper()
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.wg.Wait()
		_ = s.clog.Close()
		_ = s.cqs.Close()
		if s.index != nil {
			_ = s.index.Close()
		}
		_ = s.cpFile.close()
		_ = s.lockFile.Close()
		s.closeErr = errors.New("abandoned")
	})
}

func intentExists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, intentName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// checkCut checks that s holds exactly keep (sorted by offset), ends at
// cut, finds no key of the records cut, and continues correctly.
func checkCut(t *testing.T, s *Store, keep, cutAway []ack, cut int64) {
	t.Helper()
	if end := s.CommitLog().MaxOffset(); end != cut {
		t.Fatalf("log ends at %d, want %d", end, cut)
	}
	if err := waitDispatched(s, cut, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli() + 1000
	for _, a := range cutAway {
		if got, err := s.QueryByKey("crash", "ck-"+strconv.Itoa(a.i), 0, now, 4); err != nil || len(got) != 0 {
			t.Fatalf("key of cut message %d found: %v %v", a.i, got, err)
		}
	}
	if intentExists(t, s.opts.Dir) {
		t.Fatal("the intent file outlived the truncation")
	}
	if n := countRecords(t, s); n != len(keep) {
		t.Fatalf("the log holds %d records, want %d", n, len(keep))
	}
	verifyStore(t, s, keep, false)
}

// countRecords counts the records in s's CommitLog.
func countRecords(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	l := s.CommitLog()
	if _, err := l.Scan(l.MinOffset(), l.MaxOffset(), func(int64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func splitAt(acks []ack, cut int64) (keep, away []ack) {
	for i, a := range acks {
		if a.phys >= cut {
			return acks[:i], acks[i:]
		}
	}
	return acks, nil
}

func TestTruncateTo(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		for _, where := range []string{"middle", "segment-start"} {
			t.Run(flush.String()+"/"+where, func(t *testing.T) {
				dir := t.TempDir()
				o := testOptions(dir, flush)
				s, err := Open(o, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				acks := putCrashMsgs(t, s, 0, 400) // about 3 segments
				seg := o.CommitLog.SegmentSize
				if err := waitDispatched(s, s.CommitLog().MaxOffset(), 10*time.Second); err != nil {
					t.Fatal(err)
				}
				var cut int64
				switch where {
				case "middle":
					keep, _ := splitAt(acks, seg+seg/3)
					cut = acks[len(keep)].phys
				case "segment-start":
					cut = 2 * seg
					if _, away := splitAt(acks, cut); away[0].phys != cut {
						t.Fatalf("no record at the segment start %d", cut)
					}
				}
				keep, away := splitAt(acks, cut)
				before := map[int32]int64{}
				for q := int32(0); q < crashQueue; q++ {
					_, before[q] = s.QueueOffsets("crash", q)
				}
				if err := s.TruncateTo(context.Background(), cut); err != nil {
					t.Fatal(err)
				}
				for q := int32(0); q < crashQueue; q++ {
					if _, max := s.QueueOffsets("crash", q); max >= before[q] {
						t.Fatalf("queue %d max offset %d did not move back from %d", q, max, before[q])
					}
				}
				if s.DispatchedOffset() != cut {
					t.Fatalf("dispatched %d after the cut at %d", s.DispatchedOffset(), cut)
				}
				checkCut(t, s, keep, away, cut)
				// verifyStore appended message 1_000_000 after the cut;
				// append more, reopen, and all is there.
				more := putCrashMsgs(t, s, 2000, 100)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, err = Open(o, nil); err != nil {
					t.Fatal(err)
				}
				all := append(append([]ack(nil), keep...), more...)
				checkStoreHolds(t, s, all, false)
				if n := countRecords(t, s); n != len(all)+1 { // and verifyStore's
					t.Fatalf("reopened log holds %d records, want %d", n, len(all)+1)
				}
			})
		}
	}
}

func TestTruncateToRefuses(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir, commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	acks := putCrashMsgs(t, s, 0, 100)
	end := s.CommitLog().MaxOffset()
	ctx := context.Background()
	for _, c := range []struct {
		off  int64
		want error
	}{
		{acks[50].phys + 1, ErrNotBoundary},
		{acks[50].phys + acks[50].size/2, ErrNotBoundary},
		{end + 1, commitlog.ErrOffset},
		{-5, commitlog.ErrOffset},
	} {
		if err := s.TruncateTo(ctx, c.off); !errors.Is(err, c.want) {
			t.Fatalf("TruncateTo(%d) = %v, want %v", c.off, err, c.want)
		}
		if intentExists(t, dir) {
			t.Fatal("a refused truncation left an intent")
		}
	}
	if s.CommitLog().MaxOffset() != end {
		t.Fatal("a refused truncation changed the log")
	}
	// At the end it is a no-op.
	if err := s.TruncateTo(ctx, end); err != nil {
		t.Fatal(err)
	}
	if err := waitDispatched(s, end, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	verifyStore(t, s, acks, true)
}

// TestTruncateToCrash stops the truncation after each of its steps, as a
// crash there would, and reopens: the store always ends exactly at the
// cut, with no stale tail in the log, queues or index.
func TestTruncateToCrash(t *testing.T) {
	steps := []truncateStep{stepIntent, stepCommitLog, stepConsumeQueue, stepIndex, stepCheckpoint}
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		for _, step := range steps {
			t.Run(flush.String()+"/"+strconv.Itoa(int(step)), func(t *testing.T) {
				dir := t.TempDir()
				o := testOptions(dir, flush)
				o.CheckpointInterval = 5 * time.Millisecond // checkpoints race the truncation
				s, err := Open(o, nil)
				if err != nil {
					t.Fatal(err)
				}
				acks := putCrashMsgs(t, s, 0, 300)
				if err := waitDispatched(s, s.CommitLog().MaxOffset(), 10*time.Second); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // let a checkpoint name the old end
				cut := acks[len(acks)/3].phys
				keep, away := splitAt(acks, cut)
				s.truncateHook = func(st truncateStep) error {
					if st == step {
						return errTruncateStopped
					}
					return nil
				}
				if err := s.TruncateTo(context.Background(), cut); !errors.Is(err, errTruncateStopped) {
					t.Fatalf("truncation stopped at step %d: %v", step, err)
				}
				if !intentExists(t, dir) {
					t.Fatal("no intent while the truncation is unfinished")
				}
				abandon(t, s)
				if s, err = Open(o, nil); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				checkCut(t, s, keep, away, cut)
			})
		}
	}
}

// TestTruncateToPowerLoss: a power loss after a finished truncation and
// more appends (cutting the CommitLog to what was durable) recovers a
// store holding the kept records and no record of the old tail.
func TestTruncateToPowerLoss(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir, flush)
			o.CommitLog.FlushInterval = time.Hour // only explicit flushes (async)
			o.CommitLog.FlushThoroughInterval = time.Hour
			s, err := Open(o, nil)
			if err != nil {
				t.Fatal(err)
			}
			acks := putCrashMsgs(t, s, 0, 300)
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			cut := acks[len(acks)/2].phys
			keep, _ := splitAt(acks, cut)
			if err := s.TruncateTo(context.Background(), cut); err != nil {
				t.Fatal(err)
			}
			more := putCrashMsgs(t, s, 5000, 40)
			durable := s.CommitLog().FlushedOffset()
			for i := range more {
				more[i].flushedAfterAck = durable
			}
			abandon(t, s)
			powerLoss(t, dir, o.CommitLog.SegmentSize, append(append([]ack(nil), keep...), more...))
			if s, err = Open(o, nil); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			want := keep
			for _, a := range more {
				if a.end() <= durable {
					want = append(want, a)
				}
			}
			if flush == commitlog.FlushSync && len(want) != len(keep)+len(more) {
				t.Fatalf("sync mode lost acknowledged messages: %d durable of %d", len(want)-len(keep), len(more))
			}
			verifyStore(t, s, want, true)
		})
	}
}

// dispatchPass runs one full dispatch pass (the dispatcher runs too; the
// pause lock serialises them), so what the test checks afterwards reflects
// everything the dispatcher could do.
func dispatchPass(s *Store) {
	for {
		again, _, _ := s.dispatchStep()
		if !again {
			return
		}
	}
}

func TestDispatchLimit(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			s, err := Open(testOptions(t.TempDir(), flush), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ctx := context.Background()
			if s.DispatchLimit() != math.MaxInt64 {
				t.Fatalf("default limit %d", s.DispatchLimit())
			}
			first := putCrashMsgs(t, s, 0, 40)
			if err := waitDispatched(s, s.CommitLog().MaxOffset(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			limit := s.CommitLog().MaxOffset()
			s.SetDispatchLimit(limit)
			acks := putCrashMsgs(t, s, 40, 60)
			all := append(append([]ack(nil), first...), acks...)
			if err := s.CommitLog().Flush(); err != nil {
				t.Fatal(err)
			}
			visible := func() int64 {
				var n int64
				for q := int32(0); q < crashQueue; q++ {
					_, m := s.QueueOffsets("crash", q)
					n += m
				}
				return n
			}
			dispatchPass(s)
			if d := s.DispatchedOffset(); d != limit || visible() != 40 {
				t.Fatalf("with the limit at %d: dispatched %d, %d messages visible", limit, d, visible())
			}
			// A limit inside a record holds that record back.
			s.SetDispatchLimit(acks[10].end() - 1)
			if err := waitDispatched(s, acks[9].end(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			dispatchPass(s)
			if d := s.DispatchedOffset(); d < acks[9].end() || d > acks[10].phys || visible() != 50 {
				t.Fatalf("limit inside record 50: dispatched %d (want %d), %d visible", d, acks[9].end(), visible())
			}
			res, err := s.GetMessages("crash", int32(acks[10].qid), acks[10].qoff, 1, 1<<20, nil)
			if err != nil || res.Status == Found {
				t.Fatalf("a message past the limit is visible: %v %v", res.Status, err)
			}
			// Lowering it takes nothing back.
			s.SetDispatchLimit(0)
			dispatchPass(s)
			if visible() != 50 {
				t.Fatalf("lowering the limit hid messages: %d visible", visible())
			}
			// Queue offsets for a new master count what is held back.
			if err := s.AdoptQueueOffsets(ctx); err != nil {
				t.Fatal(err)
			}
			for q := int32(0); q < crashQueue; q++ {
				var n int64
				for _, a := range all {
					if a.qid == int(q) {
						n++
					}
				}
				if got := s.CommitLog().QueueOffset("crash", q); got != n {
					t.Fatalf("queue %d: next offset %d, the log holds %d", q, got, n)
				}
			}
			// Raising it releases the rest (the waiter wakes without
			// any new append).
			s.SetDispatchLimit(math.MaxInt64)
			if err := waitDispatched(s, s.CommitLog().MaxOffset(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			verifyStore(t, s, all, true)
		})
	}
}

// TestTruncateBelowDispatchLimit: records past the dispatch limit are
// undispatched when the store is cut; the next queue offsets still follow
// the log, and the records below the cut become visible once the limit
// rises.
func TestTruncateBelowDispatchLimit(t *testing.T) {
	s, err := Open(testOptions(t.TempDir(), commitlog.FlushSync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	s.SetDispatchLimit(0)
	acks := putCrashMsgs(t, s, 0, 120)
	cut := acks[80].phys
	keep, _ := splitAt(acks, cut)
	if err := s.TruncateTo(context.Background(), cut); err != nil {
		t.Fatal(err)
	}
	if d := s.DispatchedOffset(); d != 0 {
		t.Fatalf("dispatched %d under a zero limit", d)
	}
	for q := int32(0); q < crashQueue; q++ {
		var n int64
		for _, a := range keep {
			if a.qid == int(q) {
				n++
			}
		}
		if got := s.CommitLog().QueueOffset("crash", q); got != n {
			t.Fatalf("queue %d: next offset %d after the cut, want %d", q, got, n)
		}
	}
	s.SetDispatchLimit(math.MaxInt64)
	checkCut(t, s, keep, acks[80:], cut)
}

const (
	envTruncChild = "BOLIDE_TRUNC_CHILD"
	envTruncStep  = "BOLIDE_TRUNC_STEP"
)

// TestTruncateCrashChild is the child of TestTruncateToKilled: it fills a
// store, prints its acks and the cut, and truncates, killing itself with
// SIGKILL right after the step named in the environment.
func TestTruncateCrashChild(t *testing.T) {
	if os.Getenv(envTruncChild) != "1" {
		t.Skip("truncation crash child process only")
	}
	flush, _ := commitlog.ParseFlushMode(os.Getenv(envFlush))
	step, _ := strconv.Atoi(os.Getenv(envTruncStep))
	o := crashOptions(os.Getenv(envDir), flush)
	o.CheckpointInterval = 5 * time.Millisecond
	s, err := Open(o, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	acks := putCrashMsgs(t, s, 0, 300)
	for _, a := range acks {
		fmt.Printf("ack %d %d %d %d %d\n", a.i, a.phys, a.size, a.qoff, 0)
	}
	if err := waitDispatched(s, s.CommitLog().MaxOffset(), 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(2)
	}
	time.Sleep(20 * time.Millisecond) // a checkpoint names the old end
	cut := acks[len(acks)/3].phys
	fmt.Printf("cut %d\n", cut)
	s.truncateHook = func(st truncateStep) error {
		if int(st) == step {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}
	if err := s.TruncateTo(context.Background(), cut); err != nil {
		fmt.Fprintln(os.Stderr, "truncate:", err)
		os.Exit(2)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // after the last step
	select {}
}

// TestTruncateToKilled kills a process in the middle of TruncateTo, after
// each step and after the end, then reopens the store: it ends exactly at
// the cut, with no stale tail in the log, queues or index.
func TestTruncateToKilled(t *testing.T) {
	steps := []truncateStep{stepIntent, stepCommitLog, stepConsumeQueue, stepIndex, stepCheckpoint, stepCheckpoint + 1}
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		for _, step := range steps {
			t.Run(flush.String()+"/"+strconv.Itoa(int(step)), func(t *testing.T) {
				dir := t.TempDir()
				cmd := exec.Command(os.Args[0], "-test.run=^TestTruncateCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), envTruncChild+"=1", envDir+"="+dir, envFlush+"="+flush.String(),
					envTruncStep+"="+strconv.Itoa(int(step)))
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("child should have died of SIGKILL: %v\n%s", err, stderr.String())
				}
				var acks []ack
				cut := int64(-1)
				for _, line := range strings.Split(string(out), "\n") {
					f := strings.Fields(line)
					switch {
					case len(f) == 6 && f[0] == "ack":
						var v [5]int64
						for k := range v {
							v[k], _ = strconv.ParseInt(f[k+1], 10, 64)
						}
						acks = append(acks, ack{i: int(v[0]), qid: int(v[0]) % crashQueue, phys: v[1], size: v[2], qoff: v[3]})
					case len(f) == 2 && f[0] == "cut":
						cut, _ = strconv.ParseInt(f[1], 10, 64)
					}
				}
				if len(acks) != 300 || cut < 0 {
					t.Fatalf("child printed %d acks, cut %d\n%s", len(acks), cut, stderr.String())
				}
				slices.SortFunc(acks, func(a, b ack) int { return int(a.phys - b.phys) })
				if pending := intentExists(t, dir); pending != (step <= stepCheckpoint) {
					t.Fatalf("intent present %v after a kill at step %d", pending, step)
				}
				keep, away := splitAt(acks, cut)
				s, err := Open(crashOptions(dir, flush), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				checkCut(t, s, keep, away, cut)
			})
		}
	}
}

// TestTruncateToWithReaders truncates while consumers read queues, look
// keys up and read by offset: nothing crashes or races, and afterwards the
// reads see only what was kept.
func TestTruncateToWithReaders(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir, commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	acks := putCrashMsgs(t, s, 0, 300)
	if err := waitDispatched(s, s.CommitLog().MaxOffset(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i = (i + 13) % len(acks) {
				select {
				case <-stop:
					return
				default:
				}
				a := acks[i]
				switch i % 3 {
				case 0:
					_, _ = s.GetMessages("crash", int32(a.qid), a.qoff, 8, 1<<20, nil)
				case 1:
					_, _ = s.QueryByKey("crash", "ck-"+strconv.Itoa(a.i), 0, time.Now().UnixMilli()+1000, 2)
				case 2:
					_, _ = s.ReadMessage(a.phys)
				}
				reads.Add(1)
			}
		}()
	}
	for reads.Load() < 500 {
		runtime.Gosched()
	}
	cut := acks[100].phys
	if err := s.TruncateTo(context.Background(), cut); err != nil {
		t.Fatal(err)
	}
	n := reads.Load()
	for reads.Load() < n+500 {
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	keep, away := splitAt(acks, cut)
	checkCut(t, s, keep, away, cut)
}

// TestOpenWithIntent: Open finishes a pending truncation written by hand,
// ignores one past the log's end, and refuses a corrupt one or one that
// does not name a record boundary, naming the file.
func TestOpenWithIntent(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, commitlog.FlushAsync)
	s, err := Open(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	acks := putCrashMsgs(t, s, 0, 120)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	end := acks[len(acks)-1].end()
	path := filepath.Join(dir, intentName)
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"{", `{"version":2,"offset":0}`, `{"version":1,"offset":` + strconv.FormatInt(acks[5].phys+3, 10) + `}`} {
		write(bad)
		if s, err := Open(o, nil); err == nil {
			_ = s.Close()
			t.Fatalf("opened with intent %s", bad)
		} else if !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name %s: %v", path, err)
		}
	}
	// Past the end: nothing to cut.
	write(`{"version":1,"offset":` + strconv.FormatInt(end+4096, 10) + `}`)
	if s, err = Open(o, nil); err != nil {
		t.Fatal(err)
	}
	if intentExists(t, dir) || s.CommitLog().MaxOffset() != end {
		t.Fatalf("intent past the end: log ends at %d (want %d), intent left %v", s.CommitLog().MaxOffset(), end, intentExists(t, dir))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A boundary: cut there.
	cut := acks[70].phys
	write(`{"version":1,"offset":` + strconv.FormatInt(cut, 10) + `}`)
	if s, err = Open(o, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	keep, away := splitAt(acks, cut)
	checkCut(t, s, keep, away, cut)
}
