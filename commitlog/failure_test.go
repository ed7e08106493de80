package commitlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// breakActiveFile closes the active segment's file behind the log's back, so
// the next pwrite or fdatasync on it fails (a stand-in for an I/O error).
func breakActiveFile(t *testing.T, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active == nil {
		t.Fatal("no active segment")
	}
	if err := l.active.f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStickyWriteError: a failed pwrite makes the log refuse every later
// append with an error wrapping ErrWriteFailed; what was acknowledged before
// stays readable and survives a reopen.
func TestStickyWriteError(t *testing.T) {
	for _, flush := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(flush.String()+"-pwrite", func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, flush, WritePwrite)
			l, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			good := fillLog(t, l, 20)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			durable := l.MaxOffset()
			breakActiveFile(t, l)
			ctx := context.Background()
			_, err = l.Append(ctx, record(t, "T", 0, []byte("doomed")))
			if flush == FlushSync {
				// The append waited for a flush that could not write it.
				if !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("sync append over a failing file: %v, want ErrWriteFailed", err)
				}
			} else if err != nil && !errors.Is(err, ErrWriteFailed) {
				t.Fatalf("async append: %v", err)
			}
			// Async: the committer or the flusher hits the error; make sure
			// something tries to write.
			_ = l.Flush()
			testutil.Eventually(t, 10*time.Second, "the sticky error", func() bool { return l.Err() != nil })
			if !errors.Is(l.Err(), ErrWriteFailed) || !errors.Is(l.Err(), os.ErrClosed) {
				t.Fatalf("Err() = %v, want ErrWriteFailed wrapping the cause", l.Err())
			}
			before := l.MaxOffset()
			for i := 0; i < 3; i++ {
				if _, err := l.Append(ctx, record(t, "T", 0, []byte("refused"))); !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("append %d after the failure: %v, want ErrWriteFailed", i, err)
				}
				if _, err := l.AppendBatch(ctx, []*Entry{record(t, "T", 1, []byte("refused"))}, nil); !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("batch %d after the failure: %v, want ErrWriteFailed", i, err)
				}
			}
			if l.MaxOffset() != before {
				t.Fatalf("refused appends moved the log from %d to %d", before, l.MaxOffset())
			}
			if l.FlushedOffset() < durable {
				t.Fatalf("flushed offset fell to %d below %d", l.FlushedOffset(), durable)
			}
			checkRecords(t, l, good)
			_ = l.Close() // reports the file we closed; that is expected

			l2 := openTestLog(t, opts, 0)
			if l2.MaxOffset() != durable || l2.Recovery().Torn {
				t.Fatalf("reopen: max %d, want %d (the failed record never reached the file); %+v", l2.MaxOffset(), durable, l2.Recovery())
			}
			checkRecords(t, l2, good)
			if _, err := l2.Append(ctx, record(t, "T", 0, []byte("after reopen"))); err != nil {
				t.Fatalf("append after reopen: %v", err)
			}
		})
	}
}

// failWritesOnActiveFile makes writes to the active segment fail with EBADF
// by putting a read-only descriptor of the same file under the *os.File's
// descriptor number (dup2); the returned function puts the original back, so
// the failure is transient, like an I/O error that goes away. fdatasync on
// the read-only descriptor still works.
func failWritesOnActiveFile(t *testing.T, l *Log) (restore func()) {
	t.Helper()
	l.mu.Lock()
	seg := l.active
	l.mu.Unlock()
	if seg == nil {
		t.Fatal("no active segment")
	}
	fd := int(seg.f.Fd())
	saved, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := unix.Open(seg.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(ro, fd, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(ro)
	return func() {
		if err := unix.Dup3(saved, fd, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(saved)
	}
}

// TestTransientWriteFailureStaysFailed: after a pwrite failed, the log must
// stay failed even when the cause goes away: Flush reports the sticky error,
// and Readable/FlushedOffset never cover the bytes that were dropped (they
// are not in the file; a reader would find zeros there).
func TestTransientWriteFailureStaysFailed(t *testing.T) {
	for _, flush := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(flush.String()+"-pwrite", func(t *testing.T) {
			opts := testOptions(t.TempDir(), flush, WritePwrite)
			l := openTestLog(t, opts, 0)
			good := fillLog(t, l, 20)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			durable := l.MaxOffset()
			restore := failWritesOnActiveFile(t, l)
			_, err := l.Append(context.Background(), record(t, "T", 0, []byte("lost")))
			if flush == FlushSync && !errors.Is(err, ErrWriteFailed) {
				restore()
				t.Fatalf("sync append over a failing file: %v, want ErrWriteFailed", err)
			}
			_ = l.Flush()
			testutil.Eventually(t, 10*time.Second, "the sticky error", func() bool { return l.Err() != nil })
			if !errors.Is(l.Err(), unix.EBADF) {
				t.Fatalf("sticky error %v, want it to wrap EBADF", l.Err())
			}
			restore()

			ferr := l.Flush()
			readable, flushed, maxOff := l.Readable(), l.FlushedOffset(), l.MaxOffset()
			_, scanErr := l.Scan(0, readable, func(int64, []byte) error { return nil })
			if !errors.Is(ferr, ErrWriteFailed) || readable > durable || flushed > durable || scanErr != nil {
				t.Fatalf("after a failed write of [%d, %d): Flush() = %v; readable %d, flushed %d (want <= %d); scan of the readable log: %v",
					durable, maxOff, ferr, readable, flushed, durable, scanErr)
			}
			checkRecords(t, l, good)
		})
	}
}

// TestSyncFlushTimeout: while a flush cannot finish (the flush lock is held
// here, as a sync stuck in a hung disk would hold it), a sync append fails
// with ErrFlushTimeout after about SyncFlushTimeout; a context ending first
// wins. Once the flush goes through, the timed-out records are durable and
// appends are acknowledged again.
func TestSyncFlushTimeout(t *testing.T) {
	opts := testOptions(t.TempDir(), FlushSync, WritePwrite)
	opts.SyncFlushTimeout = 200 * time.Millisecond
	l := openTestLog(t, opts, 0)
	fillLog(t, l, 5)

	l.flushMu.Lock()
	begin := time.Now()
	type result struct {
		r   Result
		err error
	}
	got := make(chan result, 1)
	go func() {
		r, err := l.Append(context.Background(), record(t, "T", 0, []byte("stuck")))
		got <- result{r, err}
	}()
	var res result
	select {
	case res = <-got:
	case <-time.After(50 * opts.SyncFlushTimeout):
		l.flushMu.Unlock()
		t.Fatalf("a sync append still waits %v into a hung flush (SyncFlushTimeout %v)", time.Since(begin), opts.SyncFlushTimeout)
	}
	r, err, waited := res.r, res.err, time.Since(begin)
	if !errors.Is(err, ErrFlushTimeout) {
		l.flushMu.Unlock()
		t.Fatalf("append during a hung flush: %v, want ErrFlushTimeout", err)
	}
	// Four to five quarters of the timeout, plus scheduling slack.
	if waited < opts.SyncFlushTimeout || waited > 10*opts.SyncFlushTimeout {
		l.flushMu.Unlock()
		t.Fatalf("ErrFlushTimeout after %v, want about %v", waited, opts.SyncFlushTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, cerr := l.Append(ctx, record(t, "T", 0, []byte("cancelled")))
	cancel()
	l.flushMu.Unlock()
	if !errors.Is(cerr, context.DeadlineExceeded) {
		t.Fatalf("append with a 20 ms context during a hung flush: %v", cerr)
	}

	after, err := l.Append(context.Background(), record(t, "T", 0, []byte("after")))
	if err != nil {
		t.Fatalf("append once the flush can run: %v", err)
	}
	if l.FlushedOffset() < after.End() || after.PhysicalOffset <= r.PhysicalOffset {
		t.Fatalf("flushed %d, want at least %d (the timed-out record is at %d)", l.FlushedOffset(), after.End(), r.PhysicalOffset)
	}
	rec, err := l.ReadRecord(r.PhysicalOffset, nil)
	if err != nil || !bytes.Contains(rec, []byte("stuck")) {
		t.Fatalf("timed-out record at %d: %v", r.PhysicalOffset, err)
	}
}

// TestDiskFullRatio: above DiskFullRatio appends fail with ErrDiskFull and
// write nothing; reads keep working.
func TestDiskFullRatio(t *testing.T) {
	dir := t.TempDir()
	used, _, err := fsutil.Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if used <= 0.0002 {
		t.Skipf("the file system of %s reports %.5f used; cannot set a ratio below it", dir, used)
	}
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			opts.DiskCheckInterval = 10 * time.Millisecond
			// A log with data, written while the disk is "not full".
			l := openTestLog(t, opts, 0)
			recs := fillLog(t, l, 200)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			files := segmentFiles(t, dir)

			opts.DiskFullRatio = used / 2
			l = openTestLog(t, opts, 0)
			end := l.MaxOffset()
			if l.DiskUsage() < opts.DiskFullRatio {
				t.Fatalf("DiskUsage %v below the ratio %v", l.DiskUsage(), opts.DiskFullRatio)
			}
			ctx := context.Background()
			for i := 0; i < 3; i++ {
				_, err := l.Append(ctx, record(t, "T", 0, []byte("no room")))
				if !errors.Is(err, ErrDiskFull) {
					t.Fatalf("append on a full disk: %v, want ErrDiskFull", err)
				}
				if !strings.Contains(err.Error(), dir) {
					t.Fatalf("error %q does not name the directory", err)
				}
				res, err := l.AppendBatch(ctx, []*Entry{record(t, "T", 0, []byte("a")), record(t, "T", 0, []byte("b"))}, nil)
				if !errors.Is(err, ErrDiskFull) || len(res) != 0 {
					t.Fatalf("batch on a full disk: %d results, %v", len(res), err)
				}
			}
			if l.MaxOffset() != end || l.QueueOffset("T", 0) != 0 {
				t.Fatalf("refused appends changed the log: max %d->%d, queue offset %d", end, l.MaxOffset(), l.QueueOffset("T", 0))
			}
			if got := segmentFiles(t, dir); len(got) > len(files)+1 {
				t.Fatalf("segment files %v, before %v", got, files)
			}
			checkRecords(t, l, recs)
			checkScan(t, l, 0, recs)
		})
	}
	// An empty log on a full disk creates no segment at all.
	t.Run("empty", func(t *testing.T) {
		dir := t.TempDir()
		opts := testOptions(dir, FlushSync, WriteAuto)
		opts.DiskFullRatio = used / 2
		l := openTestLog(t, opts, 0)
		if _, err := l.Append(context.Background(), record(t, "T", 0, []byte("x"))); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("append: %v", err)
		}
		if l.MaxOffset() != 0 || len(l.Segments()) != 0 || len(segmentFiles(t, dir)) != 0 {
			t.Fatalf("max %d, %d segments, files %v", l.MaxOffset(), len(l.Segments()), segmentFiles(t, dir))
		}
	})
}

// TestRealDiskFull fills a 1 MiB tmpfs with 256 KiB segments: appends end
// with ErrDiskFull (a failed segment allocation or the usage check at 100 %),
// without a fault, and every acknowledged record is readable, also after
// reopening on the still-full file system.
func TestRealDiskFull(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := testutil.MountTmpfs(t, "1m")
			opts := testOptions(dir, m.flush, m.write)
			opts.DiskFullRatio = 1.0
			opts.DiskCheckInterval = 5 * time.Millisecond
			l, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			var acked []appended
			var lastErr error
			for i := 0; i < 10000; i++ {
				body := []byte(fmt.Sprintf("%05d-%0900d", i, 0))
				e := record(t, "T", int32(i%2), body)
				r, err := l.Append(ctx, e)
				if err != nil {
					lastErr = err
					break
				}
				acked = append(acked, appended{res: r, topic: "T", queue: int32(i % 2), body: body})
			}
			if lastErr == nil {
				t.Fatal("10000 KiB fit on a 1 MiB file system")
			}
			if !errors.Is(lastErr, ErrDiskFull) {
				t.Fatalf("append on a full tmpfs: %v, want ErrDiskFull", lastErr)
			}
			if len(acked) < 100 {
				t.Fatalf("only %d records before the disk was full", len(acked))
			}
			if _, err := l.Append(ctx, record(t, "T", 0, []byte("again"))); !errors.Is(err, ErrDiskFull) {
				t.Fatalf("second append on a full tmpfs: %v", err)
			}
			if l.Err() != nil {
				t.Fatalf("a full disk is not a write failure, got sticky %v", l.Err())
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			checkRecords(t, l, acked)
			if err := l.Close(); err != nil {
				t.Fatalf("close on a full disk: %v", err)
			}
			// A crash between making the next file and preallocating it
			// leaves it empty; that must not keep the log from opening.
			starts, err := listSegments(dir)
			if err != nil {
				t.Fatal(err)
			}
			empty := filepath.Join(dir, SegmentName(starts[len(starts)-1]+opts.SegmentSize))
			if err := os.WriteFile(empty, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			l2, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatalf("reopen on a full disk: %v", err)
			}
			defer l2.Close()
			if l2.Recovery().Torn || l2.Recovery().Records != int64(len(acked)) {
				t.Fatalf("reopen: %+v, %d acknowledged", l2.Recovery(), len(acked))
			}
			checkRecords(t, l2, acked)
		})
	}
}
