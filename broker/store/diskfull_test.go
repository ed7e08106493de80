package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// waitDispatched waits until everything below off is dispatched, at most d.
func waitDispatched(s *Store, off int64, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.WaitDispatched(ctx, off); err != nil {
		return fmt.Errorf("dispatched up to %d, waiting for %d: %w", s.DispatchedOffset(), off, err)
	}
	return nil
}

// ackedMsg is a message Put acknowledged.
type ackedMsg struct {
	PutResult
	queue int32
	body  []byte
}

// closeWithin closes s, failing the test if Close does not return in time.
func closeWithin(t *testing.T, s *Store, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Close did not return within %v", d)
		return nil
	}
}

// fillDisk writes a ballast file under dir until the file system has no
// free block left, as another process filling the disk would. The store may
// free space meanwhile (the log gives back what a failed preallocation of
// its next segment took), so it tops the ballast up until none is left.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		path := addBallast(t, dir)
		_, avail, err := fsutil.Usage(dir)
		if err == nil && avail == 0 {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the ballast %d bytes are still free (%v)", avail, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addBallast grows the ballast file under dir until a write fails with
// ENOSPC and returns its path.
func addBallast(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4096} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("ballast: %v", err)
				}
				break
			}
		}
	}
	return path
}

// TestDiskFull fills a real 12 MiB tmpfs through the store: Put must end
// with an error wrapping commitlog.ErrDiskFull (not a panic or a SIGBUS)
// and keep failing cleanly; every acknowledged message must be visible to
// consumers (by offset, by queue, by key) while the disk is full, and again
// after the store is closed and reopened on the same, still full, file
// system.
//
//   - enospc: only a real ENOSPC stops the log (a new segment cannot be
//     allocated), or the store when it has to take a file from its reserve;
//     then a ballast file takes the last free blocks, so the queues, the
//     index and the checkpoint cannot grow either.
//   - ballast: the disk is filled by someone else while the log still has
//     preallocated room: the index needs a new file for the 250th message,
//     takes it from the reserve, and the store refuses puts.
//   - ratio: DiskFullRatio 0.5 refuses appends at half usage, before the
//     disk is really full; everything else still has room.
//
// The log's periodic disk check runs only in the ratio cases (elsewhere it
// is as if it never got the CPU in time): nothing the test asserts depends
// on when it runs.
func TestDiskFull(t *testing.T) {
	const topic = "DiskFull"
	const queues = 4
	for _, tc := range []struct {
		name    string
		ratio   float64
		flush   commitlog.FlushMode
		ballast string // "", "after" the log is full, "before" it is
	}{
		{"enospc-sync", 1.0, commitlog.FlushSync, "after"},
		{"enospc-async", 1.0, commitlog.FlushAsync, "after"},
		{"ballast-sync", 1.0, commitlog.FlushSync, "before"},
		{"ballast-async", 1.0, commitlog.FlushAsync, "before"},
		{"ratio-sync", 0.5, commitlog.FlushSync, ""},
		{"ratio-async", 0.5, commitlog.FlushAsync, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := testutil.MountTmpfs(t, "12m")
			dir := filepath.Join(root, "store")
			opts := testOptions(dir, tc.flush)
			opts.CommitLog.SegmentSize = 2 << 20
			opts.CommitLog.DiskFullRatio = tc.ratio
			opts.CommitLog.DiskCheckInterval = time.Hour
			if tc.ratio < 1 {
				opts.CommitLog.DiskCheckInterval = 10 * time.Millisecond
			}
			opts.ConsumeQueue.UnitsPerFile = 1000
			s, err := Open(opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var acked []ackedMsg
			var putErr error
			ballast := ""
			for i := 0; i < 100_000; i++ {
				if i == 100 && tc.ballast == "before" {
					ballast = fillDisk(t, root)
				}
				q := int32(i % queues)
				m := newMsg(topic, q, i)
				m.Body = fmt.Appendf(nil, "msg-%06d-%03000d", i, i)
				body := bytes.Clone(m.Body)
				r, err := s.Put(ctx, m)
				if err != nil {
					putErr = err
					break
				}
				acked = append(acked, ackedMsg{PutResult: r, queue: q, body: body})
			}
			if putErr == nil {
				t.Fatal("100 000 3-KiB messages fit on a 12 MiB file system")
			}
			t.Logf("%d messages acknowledged; Put then failed with: %v", len(acked), putErr)
			if !errors.Is(putErr, commitlog.ErrDiskFull) {
				t.Fatalf("Put on a full disk: %v, want an error wrapping commitlog.ErrDiskFull", putErr)
			}
			if len(acked) < 100 {
				t.Fatalf("only %d messages before the disk was full", len(acked))
			}
			// Two index entries a message, 499 a file: message 249 is the
			// first to need a new index file, and the reserve has one.
			if tc.ballast == "before" && len(acked) < 250 {
				t.Fatalf("only %d messages acknowledged: the index never needed a new file on the full disk", len(acked))
			}
			if tc.ballast == "after" {
				ballast = fillDisk(t, root)
			}
			for i := 0; i < 3; i++ {
				if _, err := s.Put(ctx, newMsg(topic, 0, -1)); !errors.Is(err, commitlog.ErrDiskFull) {
					t.Fatalf("Put %d after the disk filled: %v, want ErrDiskFull", i, err)
				}
			}
			if err := s.CommitLog().Err(); err != nil {
				t.Fatalf("a full disk turned into a sticky write error: %v", err)
			}
			last := acked[len(acked)-1].End()
			// The store kept room for the queue and index entries of every
			// message it acknowledged: consumers see all of them now, on
			// the full disk.
			if err := waitDispatched(s, last, 30*time.Second); err != nil {
				t.Fatalf("on the full disk: %v", err)
			}
			if n := s.DispatchErrors(); n > 0 {
				t.Fatalf("%d dispatch errors while the disk was full: acknowledged messages skipped by the queues or the index", n)
			}
			checkAcked(t, s, topic, queues, acked, "on the full disk")

			if err := closeWithin(t, s, 30*time.Second); err != nil {
				t.Fatalf("Close on the full disk: %v", err)
			}
			if ballast != "" {
				// Close deletes the log's prepared next segment: take
				// that room too, so the store restarts on a full disk.
				fillDisk(t, root)
			}
			s, err = Open(opts, nil)
			if err != nil {
				t.Fatalf("reopen on the full disk: %v", err)
			}
			defer s.Close()
			t.Logf("reopened: %+v", s.Recovery())
			if max := s.CommitLog().MaxOffset(); max < last {
				t.Fatalf("log ends at %d after reopen, last acknowledged message ends at %d", max, last)
			}
			if err := waitDispatched(s, last, 30*time.Second); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
			checkAcked(t, s, topic, queues, acked, "after reopen")
			if ballast != "" {
				if _, err := s.Put(ctx, newMsg(topic, 0, -1)); !errors.Is(err, commitlog.ErrDiskFull) {
					t.Fatalf("Put after reopening on the full disk: %v, want ErrDiskFull", err)
				}
			}
		})
	}
}

// checkAcked reads every acknowledged message by offset and pulls every
// queue from 0: each must be there, intact, at its queue offset.
func checkAcked(t *testing.T, s *Store, topic string, queues int32, acked []ackedMsg, when string) {
	t.Helper()
	byQueue := make([][]ackedMsg, queues)
	for i, a := range acked {
		m, err := s.ReadMessage(a.PhysicalOffset)
		if err != nil {
			t.Fatalf("%s: message %d at %d: %v", when, i, a.PhysicalOffset, err)
		}
		if !bytes.Equal(m.Body, a.body) || m.QueueID != a.queue || m.QueueOffset != a.QueueOffset || m.Topic != topic {
			t.Fatalf("%s: message %d at %d differs", when, i, a.PhysicalOffset)
		}
		if got, err := s.LookupByMsgID(a.MsgID); err != nil || !bytes.Equal(got.Body, a.body) {
			t.Fatalf("%s: lookup of %s: %v", when, a.MsgID, err)
		}
		if a.QueueOffset != int64(len(byQueue[a.queue])) {
			t.Fatalf("%s: message %d has queue offset %d, want %d", when, i, a.QueueOffset, len(byQueue[a.queue]))
		}
		byQueue[a.queue] = append(byQueue[a.queue], a)
	}
	for q := int32(0); q < queues; q++ {
		want := byQueue[q]
		var off int64
		for off < int64(len(want)) {
			res, err := s.GetMessages(topic, q, off, 32, 1<<20, nil)
			if err != nil {
				t.Fatalf("%s: pull %s/%d at %d: %v", when, topic, q, off, err)
			}
			if res.Status != Found {
				minOff, maxOff := s.QueueOffsets(topic, q)
				t.Fatalf("%s: pull %s/%d at %d: %v (queue holds [%d, %d), %d acknowledged; %d dispatch errors)",
					when, topic, q, off, res.Status, minOff, maxOff, len(want), s.DispatchErrors())
			}
			for i, rec := range res.Records {
				qo := res.QueueOffsets[i]
				if qo != off+int64(i) {
					t.Fatalf("%s: pull %s/%d: queue offset %d at position %d from %d", when, topic, q, qo, i, off)
				}
				if qo >= int64(len(want)) {
					break
				}
				m, err := message.Decode(rec)
				if err != nil {
					t.Fatalf("%s: pull %s/%d@%d: %v", when, topic, q, qo, err)
				}
				if !bytes.Equal(m.Body, want[qo].body) || m.PhysicalOffset != want[qo].PhysicalOffset {
					t.Fatalf("%s: pull %s/%d@%d returned another message (at %d, want %d)", when, topic, q, qo, m.PhysicalOffset, want[qo].PhysicalOffset)
				}
			}
			off = res.NextOffset
		}
	}
}

// TestDiskFullTransientQueueFile: the disk fills up (another process) just
// as the queues need new ConsumeQueue files, then space is freed again. The
// messages acknowledged in between take their files from the reserve: they
// are pullable at once, on the full disk; once there is room puts are
// accepted again, and everything survives a clean restart.
func TestDiskFullTransientQueueFile(t *testing.T) {
	const topic = "DiskFull"
	const queues = 4
	const units = 250 // per ConsumeQueue file
	root := testutil.MountTmpfs(t, "24m")
	opts := testOptions(filepath.Join(root, "store"), commitlog.FlushSync)
	opts.CommitLog.SegmentSize = 4 << 20
	// Only a real ENOSPC stops the log: it keeps filling its preallocated
	// segments while the queues and the index cannot grow.
	opts.CommitLog.DiskFullRatio = 1.0
	opts.CommitLog.DiskCheckInterval = time.Hour
	opts.ConsumeQueue.UnitsPerFile = units
	opts.Index.MaxEntries = 20_000 // no new index file in this test
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	var acked []ackedMsg
	i := 0
	put := func() error {
		q := int32(i % queues)
		m := newMsg(topic, q, i)
		m.Body = fmt.Appendf(nil, "msg-%06d-%0490d", i, i)
		body := bytes.Clone(m.Body)
		r, err := s.Put(ctx, m)
		if err == nil {
			acked = append(acked, ackedMsg{PutResult: r, queue: q, body: body})
			i++
		}
		return err
	}
	// Every queue's first ConsumeQueue file is nearly full.
	for i < queues*units-8 {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	ballast := fillDisk(t, root)
	var err2 error
	for err2 == nil {
		err2 = put()
	}
	if !errors.Is(err2, commitlog.ErrDiskFull) {
		t.Fatalf("Put on the full disk: %v", err2)
	}
	// The first message past the queues' first files always has a spare
	// file; the refusal comes once one has been used.
	if len(acked) <= queues*units {
		t.Fatalf("only %d messages acknowledged: the queues never needed a new file on the full disk", len(acked))
	}
	t.Logf("%d messages acknowledged when Put failed with: %v", len(acked), err2)
	if err := waitDispatched(s, acked[len(acked)-1].End(), 30*time.Second); err != nil {
		t.Fatalf("on the full disk: %v", err)
	}
	checkAcked(t, s, topic, queues, acked, "on the full disk")
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for put() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Put still fails 10 s after the disk was freed")
		}
		time.Sleep(time.Millisecond)
	}
	for n := 0; n < 200; n++ {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	last := acked[len(acked)-1].End()
	if err := waitDispatched(s, last, 30*time.Second); err != nil {
		t.Fatalf("after the disk was freed: %v", err)
	}
	t.Logf("%d messages acknowledged before the disk filled, %d in total; %d dispatch errors",
		queues*units-8, len(acked), s.DispatchErrors())
	if n := s.DispatchErrors(); n > 0 {
		t.Errorf("%d dispatch errors: acknowledged messages are missing from the queues", n)
	}
	checkAcked(t, s, topic, queues, acked, "after the disk was freed")
	// Let a checkpoint be taken now that there is room, then restart cleanly.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := closeWithin(t, s, 30*time.Second); err != nil {
		t.Fatalf("Close with room on the disk: %v", err)
	}
	s, err = Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reopened: %+v", s.Recovery())
	if err := waitDispatched(s, last, 30*time.Second); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	checkAcked(t, s, topic, queues, acked, "after a clean restart")
}

// TestDiskFullRestart: a writer (a child process, as in the crash tests)
// takes messages until the disk, filled by another process meanwhile,
// makes the store refuse them; it then stops cleanly or is killed (SIGKILL:
// no final dispatch, flush or checkpoint). The store must restart on the
// still full disk, recover, and serve every acknowledged message by
// offset, queue and key while refusing puts; once space is freed it takes
// messages again and the queues and index agree with the log.
func TestDiskFullRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, flush := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		for _, stop := range []string{"clean", "kill"} {
			t.Run(flush.String()+"/"+stop, func(t *testing.T) {
				root := testutil.MountTmpfs(t, "8m")
				dir := filepath.Join(root, "store")
				acks := runWriter(t, dir, flush, 0, stop, []string{envUntilFull + "=1"}, func(acks []ack, _ *os.Process) bool {
					if len(acks) == 200 {
						addBallast(t, root)
					}
					return false
				})
				if len(acks) < 200 {
					t.Fatalf("only %d messages acknowledged", len(acks))
				}
				ballast := fillDisk(t, root) // whatever the writer freed when it stopped
				opts := crashOptions(dir, flush)
				opts.CommitLog.DiskCheckInterval = 10 * time.Millisecond
				s, err := Open(opts, nil)
				if err != nil {
					t.Fatalf("restart on the full disk: %v", err)
				}
				defer s.Close()
				t.Logf("%d messages acknowledged; reopened: %+v", len(acks), s.Recovery())
				if s.Recovery().CleanShutdown != (stop == "clean") {
					t.Fatalf("clean shutdown reported %v", s.Recovery().CleanShutdown)
				}
				if err := waitDispatched(s, acks[len(acks)-1].end(), 30*time.Second); err != nil {
					t.Fatalf("on the full disk: %v", err)
				}
				checkCrashAcks(t, s, acks)
				ctx := context.Background()
				if _, err := s.Put(ctx, crashMsg(3_000_000)); !errors.Is(err, commitlog.ErrDiskFull) {
					t.Fatalf("Put on the full disk: %v, want ErrDiskFull", err)
				}

				if err := os.Remove(ballast); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Second)
				for i := 3_000_001; ; i++ {
					_, err := s.Put(ctx, crashMsg(i))
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("Put still fails 10 s after the disk was freed: %v", err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err := waitDispatched(s, s.CommitLog().MaxOffset(), 30*time.Second); err != nil {
					t.Fatal(err)
				}
				verifyStore(t, s, acks, false)
			})
		}
	}
}

// checkCrashAcks checks that every acknowledged message of the crash
// writer is readable by offset, at its queue offset and by its key.
func checkCrashAcks(t *testing.T, s *Store, acks []ack) {
	t.Helper()
	now := time.Now().UnixMilli() + 1000
	for _, a := range acks {
		m, err := s.ReadMessage(a.phys)
		if err != nil || !bytes.Equal(m.Body, crashBody(a.i)) {
			t.Fatalf("message %d at %d: %v", a.i, a.phys, err)
		}
		res, err := s.GetMessages("crash", int32(a.qid), a.qoff, 1, 1<<20, nil)
		if err != nil || res.Status != Found || len(res.Records) != 1 {
			t.Fatalf("pull crash/%d at %d (message %d): %v %v", a.qid, a.qoff, a.i, res.Status, err)
		}
		if d, _ := message.DecodeDispatch(res.Records[0]); d.PhysicalOffset != a.phys {
			t.Fatalf("pull crash/%d at %d: record at %d, want %d", a.qid, a.qoff, d.PhysicalOffset, a.phys)
		}
		got, err := s.QueryByKey("crash", fmt.Sprintf("ck-%d", a.i), 0, now, 4)
		if err != nil || len(got) != 1 || got[0].PhysicalOffset != a.phys {
			t.Fatalf("index lookup of message %d: %v %v, want offset %d", a.i, got, err, a.phys)
		}
	}
}

// TestReserveTrimmedAfterBurst: a put that starts many queues at once makes
// the planner add a spare queue file for each new file; once the files
// exist, the keeper gives the surplus back down to the target.
func TestReserveTrimmedAfterBurst(t *testing.T) {
	opts := testOptions(t.TempDir(), commitlog.FlushAsync)
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	target := int64(opts.ReserveQueueFiles)
	const n = 30
	var msgs []*message.Ext
	for i := range n {
		msgs = append(msgs, newMsg(fmt.Sprintf("burst-%d", i), 0, i))
	}
	res, err := s.PutBatch(context.Background(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Spares made so far (the keeper may be trimming already). Planning
	// runs ahead of the dispatcher, which may create the files of records
	// already planned while the rest are planned, so the put need not hold
	// spares for all n files at once; but it must have grown the reserve
	// past its target, or the trim below is not tested.
	s.res.mu.Lock()
	made := s.res.seq
	s.res.mu.Unlock()
	if made <= int(target)+opts.ReserveIndexFiles {
		t.Fatalf("%d spare files made for %d new queue files: the reserve (%d queue and %d index files) did not grow",
			made, n, target, opts.ReserveIndexFiles)
	}
	if err := waitDispatched(s, res[len(res)-1].End(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The count drops first, then the files are removed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		files, err := filepath.Glob(filepath.Join(opts.Dir, "reserve", spareNames[spareQueue]+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		ready := s.res.ready(spareQueue)
		if ready == target && int64(len(files)) == target {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spare queue files counted, %d in the reserve directory, %s after the burst; want %d",
				ready, len(files), 10*time.Second, target)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range n {
		if _, maxOff := s.QueueOffsets(fmt.Sprintf("burst-%d", i), 0); maxOff != 1 {
			t.Fatalf("burst-%d holds %d messages", i, maxOff)
		}
	}
}

// TestDiskFullNewQueues: with growing queue files, new queues (each needs
// a small first file) keep coming while the disk fills: the first one that
// finds no room takes a first-file spare from the reserve, and puts are
// refused from then on. Every acknowledged message is pullable on the full
// disk, puts are accepted again once there is room, and all of it survives
// a restart.
func TestDiskFullNewQueues(t *testing.T) {
	root := testutil.MountTmpfs(t, "16m")
	opts := testOptions(filepath.Join(root, "store"), commitlog.FlushSync)
	opts.CommitLog.SegmentSize = 2 << 20
	opts.CommitLog.DiskFullRatio = 1.0
	opts.CommitLog.DiskCheckInterval = time.Hour
	opts.ConsumeQueue.UnitsPerFile = 1000
	opts.ConsumeQueue.FirstFileUnits = 16
	opts.ReserveQueueFiles = 2
	opts.ReserveFirstQueueFiles = 3
	opts.Index.MaxEntries = 20_000
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	type sent struct {
		topic string
		r     PutResult
		body  []byte
	}
	var acked []sent
	n := 0
	put := func() error {
		topic := fmt.Sprintf("new-%d", n)
		m := newMsg(topic, 0, n)
		m.Body = fmt.Appendf(nil, "msg-%06d", n)
		r, err := s.Put(context.Background(), m)
		if err == nil {
			acked = append(acked, sent{topic, r, bytes.Clone(m.Body)})
			n++
		}
		return err
	}
	for range 20 {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	ballast := fillDisk(t, root)
	before := len(acked)
	var perr error
	for perr == nil && len(acked) < before+100 {
		perr = put()
	}
	if !errors.Is(perr, commitlog.ErrDiskFull) {
		t.Fatalf("Put of new queues on the full disk: %v after %d", perr, len(acked)-before)
	}
	if len(acked) == before {
		t.Fatal("no new queue took a spare first file on the full disk")
	}
	t.Logf("%d new queues acknowledged on the full disk, then: %v", len(acked)-before, perr)
	check := func(when string) {
		t.Helper()
		if err := waitDispatched(s, acked[len(acked)-1].r.End(), 30*time.Second); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if d := s.DispatchErrors(); d > 0 {
			t.Fatalf("%s: %d dispatch errors", when, d)
		}
		for _, a := range acked {
			res, err := s.GetMessages(a.topic, 0, a.r.QueueOffset, 1, 1<<20, nil)
			if err != nil || res.Status != Found || len(res.Records) != 1 {
				t.Fatalf("%s: pull %s: %v %v", when, a.topic, res.Status, err)
			}
			m, err := message.Decode(res.Records[0])
			if err != nil || !bytes.Equal(m.Body, a.body) {
				t.Fatalf("%s: pull %s returned another message: %v", when, a.topic, err)
			}
		}
	}
	check("on the full disk")
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for put() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Put still fails 10 s after the disk was freed")
		}
		time.Sleep(time.Millisecond)
	}
	for range 50 {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	check("after the disk was freed")
	if err := closeWithin(t, s, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(opts, nil); err != nil {
		t.Fatal(err)
	}
	check("after a restart")
}
