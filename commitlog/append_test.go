package commitlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

var segmentNameRE = regexp.MustCompile(`^[0-9]{20}$`)

// TestSegmentRollBlanks drives the writer across segment ends at the exact
// edges: a record leaving exactly a blank's 8 bytes stays, one leaving 7
// rolls, a record of MaxRecordSize fills a fresh segment, one byte more is
// refused and changes nothing. Every segment is walked with View and
// PeekHeader: records, then one blank that fills it to its end.
func TestSegmentRollBlanks(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			seg := opts.SegmentSize
			l := openTestLog(t, opts, 0)
			var recs []appended
			add := func(size int, wantAt int64) appended {
				t.Helper()
				a := appendOne(t, l, sizedRecord(t, "T", 0, size, byte(len(recs))))
				if a.res.PhysicalOffset != wantAt || a.res.Size != int32(size) {
					t.Fatalf("record %d (%d bytes) at %d size %d, want at %d", len(recs), size, a.res.PhysicalOffset, a.res.Size, wantAt)
				}
				recs = append(recs, a)
				return a
			}
			add(1000, 0)
			// Leaves exactly 8 bytes: stays in segment 0.
			add(int(seg-1000-message.BlankSize), 1000)
			if l.MaxOffset() != seg-message.BlankSize {
				t.Fatalf("max offset %d, want %d", l.MaxOffset(), seg-message.BlankSize)
			}
			// Next record rolls behind an 8-byte blank.
			add(500, seg)
			// Leaves 7 bytes: does not fit, rolls to segment 2.
			add(int(seg-500-message.BlankSize+1), 2*seg)
			// The largest record fills segment 3 but for its blank.
			maxRec := opts.MaxRecordSize()
			if maxRec != int(seg)-message.BlankSize {
				t.Fatalf("MaxRecordSize %d", maxRec)
			}
			add(maxRec, 3*seg)
			add(200, 4*seg)

			// One byte more than the largest record: refused, nothing changes.
			before, qoff, nsegs := l.MaxOffset(), l.QueueOffset("T", 0), len(l.Segments())
			_, err := l.Append(context.Background(), sizedRecord(t, "T", 0, maxRec+1, 'z'))
			if !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("append of %d bytes: %v, want ErrRecordTooLarge", maxRec+1, err)
			}
			if l.MaxOffset() != before || l.QueueOffset("T", 0) != qoff || len(l.Segments()) != nsegs {
				t.Fatalf("refused append changed the log: max %d->%d, queue offset %d->%d, segments %d->%d",
					before, l.MaxOffset(), qoff, l.QueueOffset("T", 0), nsegs, len(l.Segments()))
			}
			// Fill a few more segments with ordinary records.
			recs = append(recs, fillLog(t, l, 600)...)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}

			wantBlanks := map[int64]int32{ // blank offset -> size, at the edges above
				seg - message.BlankSize:   message.BlankSize,
				seg + 500:                 int32(seg - 500),
				4*seg - message.BlankSize: message.BlankSize,
			}
			if end := checkContiguous(t, l, recs, 0); end != l.MaxOffset() {
				t.Fatalf("records end at %d, log at %d", end, l.MaxOffset())
			}
			segs := l.Segments()
			if len(segs) < 6 {
				t.Fatalf("%d segments, want at least 6", len(segs))
			}
			files := segmentFiles(t, dir)
			for i, s := range segs {
				if s.Start != int64(i)*seg || s.End != s.Start+seg {
					t.Fatalf("segment %d is [%d, %d)", i, s.Start, s.End)
				}
				name := filepath.Base(s.Path)
				if !segmentNameRE.MatchString(name) || name != SegmentName(s.Start) {
					t.Fatalf("segment %d file name %q, want 20 digits %q", i, name, SegmentName(s.Start))
				}
				if size, ok := files[s.Start]; !ok || size != seg {
					t.Fatalf("segment file %s: present %v, %d bytes, want %d", name, ok, size, seg)
				}
				if i == len(segs)-1 {
					break // the active segment has no blank yet
				}
				// Walk: records, then exactly one blank reaching the end.
				off := s.Start
				for {
					h := headerAt(t, l, off)
					if h.IsBlank() {
						if int64(h.TotalSize) != s.End-off || h.TotalSize < message.BlankSize {
							t.Fatalf("segment %d: blank at %d has size %d, %d bytes left", i, off, h.TotalSize, s.End-off)
						}
						if want, ok := wantBlanks[off]; ok && want != h.TotalSize {
							t.Fatalf("blank at %d: size %d, want %d", off, h.TotalSize, want)
						}
						delete(wantBlanks, off)
						break
					}
					if !h.IsRecord() || off+int64(h.TotalSize) > s.End-message.BlankSize {
						t.Fatalf("segment %d: bad header %+v at %d", i, h, off)
					}
					off += int64(h.TotalSize)
				}
			}
			if len(wantBlanks) != 0 {
				t.Fatalf("blanks not found: %v", wantBlanks)
			}
			// Files on disk: the log's segments, plus at most the one the
			// allocator prepared after the active segment.
			last := segs[len(segs)-1]
			for start := range files {
				if start > last.Start && start != last.End {
					t.Fatalf("unexpected segment file %s", SegmentName(start))
				}
			}
			checkRecords(t, l, recs)
			checkScan(t, l, 0, recs)

			// Reopen: the whole log verifies and the exact-fit records survive.
			end := l.MaxOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for start := range segmentFiles(t, dir) {
				if start > last.Start {
					t.Fatalf("prepared segment %s left behind by Close", SegmentName(start))
				}
			}
			l2 := openTestLog(t, opts, 0)
			if rec := l2.Recovery(); rec.Torn || rec.End != end || rec.Records != int64(len(recs)) || l2.MaxOffset() != end {
				t.Fatalf("reopen: %+v, max %d, want end %d and %d records", rec, l2.MaxOffset(), end, len(recs))
			}
			checkRecords(t, l2, recs)
		})
	}
}

// TestSyncAppendIsDurable: with sync flush an append returns only once the
// flushed offset covers it, and Readable never runs ahead of FlushedOffset
// (sampled concurrently while appending).
func TestSyncAppendIsDurable(t *testing.T) {
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		t.Run(write.String(), func(t *testing.T) {
			opts := testOptions(t.TempDir(), FlushSync, write)
			l := openTestLog(t, opts, 0)
			stop := make(chan struct{})
			sampled := make(chan int)
			go func() {
				n := 0
				defer func() { sampled <- n }()
				for {
					select {
					case <-stop:
						return
					default:
					}
					r := l.Readable()
					if f := l.FlushedOffset(); r > f {
						t.Errorf("readable %d > flushed %d", r, f)
						return
					}
					n++
				}
			}()
			for i := 0; i < 500; i++ {
				r, err := l.Append(context.Background(), record(t, "T", 0, make([]byte, 100+i*7%2000)))
				if err != nil {
					t.Fatal(err)
				}
				if f := l.FlushedOffset(); f < r.End() {
					t.Fatalf("append %d returned with flushed %d < end %d", i, f, r.End())
				}
				if rd := l.Readable(); rd < r.End() {
					t.Fatalf("append %d returned with readable %d < end %d", i, rd, r.End())
				}
			}
			close(stop)
			if n := <-sampled; n == 0 {
				t.Fatal("no samples")
			}
		})
	}
}

// TestAsyncFlush: an async append is readable before it is durable; the
// background flusher catches up within a deadline (down to the last
// FlushLeastPages pages, and completely at the thorough interval); Flush
// makes everything durable at once.
func TestAsyncFlush(t *testing.T) {
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		t.Run(write.String()+"/manual", func(t *testing.T) {
			opts := testOptions(t.TempDir(), FlushAsync, write)
			opts.FlushInterval = time.Hour
			opts.FlushThoroughInterval = time.Hour
			l := openTestLog(t, opts, 0)
			recs := fillLog(t, l, 100)
			testutil.Eventually(t, 10*time.Second, "async records to become readable", func() bool {
				return l.Readable() == l.MaxOffset()
			})
			if l.FlushedOffset() != 0 {
				t.Fatalf("flushed %d with the flusher idle", l.FlushedOffset())
			}
			checkRecords(t, l, recs)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if l.FlushedOffset() != l.MaxOffset() {
				t.Fatalf("after Flush: flushed %d, max %d", l.FlushedOffset(), l.MaxOffset())
			}
		})
		t.Run(write.String()+"/periodic", func(t *testing.T) {
			opts := testOptions(t.TempDir(), FlushAsync, write)
			opts.FlushThoroughInterval = time.Hour
			l := openTestLog(t, opts, 0)
			fillLog(t, l, 300)
			least := int64(opts.FlushLeastPages) * pageSize
			testutil.Eventually(t, 10*time.Second, "the periodic flush", func() bool {
				return l.FlushedOffset() > l.MaxOffset()-least
			})
		})
		t.Run(write.String()+"/thorough", func(t *testing.T) {
			opts := testOptions(t.TempDir(), FlushAsync, write)
			opts.FlushThoroughInterval = 50 * time.Millisecond
			l := openTestLog(t, opts, 0)
			fillLog(t, l, 300)
			// A few bytes: below FlushLeastPages, flushed only by the thorough pass.
			appendOne(t, l, record(t, "T", 0, []byte("tail")))
			testutil.Eventually(t, 10*time.Second, "the thorough flush", func() bool {
				return l.FlushedOffset() == l.MaxOffset()
			})
		})
	}
}

// TestCloseIdempotentAndClosedErrors: Close twice returns the same result,
// and every operation after it fails cleanly.
func TestCloseIdempotentAndClosedErrors(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			l, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs := fillLog(t, l, 300)
			end := l.MaxOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			ctx := context.Background()
			if _, err := l.Append(ctx, record(t, "T", 0, []byte("late"))); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after Close: %v", err)
			}
			if _, err := l.AppendBatch(ctx, []*Entry{record(t, "T", 0, []byte("late"))}, nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("AppendBatch after Close: %v", err)
			}
			if err := l.Flush(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Flush after Close: %v", err)
			}
			if _, err := l.DeleteExpired(time.Now(), DefaultRetention()); !errors.Is(err, ErrClosed) {
				t.Fatalf("DeleteExpired after Close: %v", err)
			}
			if err := l.WaitFlushed(ctx, end+1); !errors.Is(err, ErrClosed) {
				t.Fatalf("WaitFlushed after Close: %v", err)
			}
			// Reads fail without touching unmapped memory.
			if _, err := l.ReadRecord(recs[10].res.PhysicalOffset, nil); err == nil {
				t.Fatal("ReadRecord after Close succeeded")
			}
			if l.MaxOffset() != end {
				t.Fatalf("max offset %d after Close, was %d", l.MaxOffset(), end)
			}
			l2 := openTestLog(t, opts, 0)
			if l2.MaxOffset() != end || l2.Recovery().Torn {
				t.Fatalf("reopen: max %d want %d, %+v", l2.MaxOffset(), end, l2.Recovery())
			}
			checkRecords(t, l2, recs)
		})
	}
}

// TestCloseDuringAppends: Close races with appenders and readers. Every
// append either succeeds or fails with ErrClosed; nothing panics or hangs;
// after reopening, every acknowledged record is there (in sync mode an
// acknowledgement means durable, and Close flushes in both modes).
func TestCloseDuringAppends(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			l, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const writers = 8
			acked := make([][]appended, writers)
			var total atomic.Int64
			var running sync.WaitGroup
			done := make(chan struct{})
			for w := 0; w < writers; w++ {
				running.Add(1)
				go func() {
					defer running.Done()
					for i := 0; ; i++ {
						body := []byte{byte(w), byte(i), byte(i >> 8)}
						r, err := l.Append(ctx, record(t, "T", int32(w), body))
						if err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Errorf("writer %d: %v", w, err)
							}
							return
						}
						acked[w] = append(acked[w], appended{res: r, topic: "T", queue: int32(w), body: body})
						total.Add(1)
					}
				}()
			}
			running.Add(1)
			go func() {
				defer running.Done()
				var buf []byte
				for {
					select {
					case <-done:
						return
					default:
					}
					// Read near the end; errors are fine, faults are not.
					buf, _ = l.ReadRecord(max(l.Readable()-2000, 0), buf[:0])
					_, _ = l.Scan(l.MinOffset(), l.Readable(), func(int64, []byte) error { return errors.New("stop") })
				}
			}()
			testutil.Eventually(t, 30*time.Second, "400 acknowledged appends", func() bool { return total.Load() >= 400 || t.Failed() })
			closeErr := l.Close()
			close(done)
			running.Wait()
			if closeErr != nil {
				t.Fatalf("Close: %v", closeErr)
			}
			var all []appended
			for _, a := range acked {
				all = append(all, a...)
			}
			sortByOffset(all)
			l2 := openTestLog(t, opts, 0)
			if l2.Recovery().Torn {
				t.Fatalf("reopen after Close: %+v", l2.Recovery())
			}
			checkRecords(t, l2, all)
		})
	}
}

// TestOpenRejectsBadSegmentFiles: a hole in the segment sequence or a file
// longer than the segment size stops Open instead of being guessed around.
func TestOpenRejectsBadSegmentFiles(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, FlushAsync, WriteMmap)
	l := openTestLog(t, opts, 0)
	fillLog(t, l, 1500)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	starts, _ := listSegments(dir)
	if len(starts) < 3 {
		t.Fatalf("%d segments", len(starts))
	}
	// A file not named like a segment is ignored.
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, opts, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mid := filepath.Join(dir, SegmentName(starts[1]))
	if err := os.Rename(mid, mid+".moved"); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(opts, 0, nil); err == nil {
		l.Close()
		t.Fatal("Open accepted a missing middle segment")
	}
	if err := os.Rename(mid+".moved", mid); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(mid, opts.SegmentSize+4096); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(opts, 0, nil); err == nil {
		l.Close()
		t.Fatal("Open accepted a segment larger than the segment size")
	}
}
