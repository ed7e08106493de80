package commitlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// fillBatches appends n records like fillLog, in batches of 50 (sync-mode
// tests stay fast: one flush per batch).
func fillBatches(t *testing.T, l *Log, n int) []appended {
	t.Helper()
	var out []appended
	for i := 0; i < n; i += 50 {
		var entries []*Entry
		var meta []appended
		for j := i; j < min(n, i+50); j++ {
			body := bytes.Repeat([]byte{byte(j)}, 100+(j*37)%1000)
			entries = append(entries, record(t, "T", int32(j%3), body))
			meta = append(meta, appended{topic: "T", queue: int32(j % 3), body: body})
		}
		res, err := l.AppendBatch(t.Context(), entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			meta[k].res = r
		}
		out = append(out, meta...)
	}
	return out
}

// firstFrom returns the first record that starts at or after off.
func firstFrom(recs []appended, off int64) int {
	for i, a := range recs {
		if a.res.PhysicalOffset >= off {
			return i
		}
	}
	return len(recs)
}

// checkTruncated checks the log ends exactly at end and holds exactly keep.
func checkTruncated(t *testing.T, l *Log, keep []appended, end int64) {
	t.Helper()
	if l.MaxOffset() != end || l.CommittedOffset() != end || l.FlushedOffset() != end || l.Readable() != end {
		t.Fatalf("offsets written %d committed %d flushed %d readable %d, want all %d",
			l.MaxOffset(), l.CommittedOffset(), l.FlushedOffset(), l.Readable(), end)
	}
	checkRecords(t, l, keep)
	checkScan(t, l, l.MinOffset(), keep)
	if _, err := l.ReadRecord(end, nil); !errors.Is(err, ErrOffset) {
		t.Fatalf("read at the new end %d: %v", end, err)
	}
	last, ok, err := l.LastRecord()
	switch {
	case err != nil:
		t.Fatal(err)
	case len(keep) == 0:
		if ok {
			t.Fatalf("LastRecord of an empty log: %+v", last)
		}
	case !ok || last.Offset != keep[len(keep)-1].res.PhysicalOffset:
		t.Fatalf("LastRecord %+v (%v), want the record at %d", last, ok, keep[len(keep)-1].res.PhysicalOffset)
	}
}

func TestTruncate(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			seg := int64(256 << 10)
			for _, where := range []string{"middle", "segment-start", "blank", "first-segment-start", "end"} {
				t.Run(where, func(t *testing.T) {
					dir := t.TempDir()
					opts := testOptions(dir, m.flush, m.write)
					l := openTestLog(t, opts, 0)
					recs := fillBatches(t, l, 1200) // about 3.5 segments
					sortByOffset(recs)
					oldEnd := l.MaxOffset()
					if oldEnd < 3*seg {
						t.Fatalf("log ends at %d, want more than 3 segments", oldEnd)
					}
					var off int64
					switch where {
					case "middle":
						off = recs[firstFrom(recs, seg+seg/2)].res.PhysicalOffset
					case "segment-start":
						off = 2 * seg
						if recs[firstFrom(recs, off)].res.PhysicalOffset != off {
							t.Fatal("no record at the segment start")
						}
					case "blank": // where segment 0's blank starts
						i := firstFrom(recs, seg)
						off = recs[i-1].res.End()
						if off == seg {
							t.Skip("segment 0 ends without a blank")
						}
						if h := headerAt(t, l, off); !h.IsBlank() {
							t.Fatalf("no blank at %d: %+v", off, h)
						}
					case "first-segment-start":
						off = 0
					case "end":
						off = oldEnd
					}
					keep := recs[:firstFrom(recs, off)]
					if err := l.Truncate(off); err != nil {
						t.Fatal(err)
					}
					checkTruncated(t, l, keep, off)
					prepared := (off/seg + 1) * seg // the allocator's next segment
					for s := range segmentFiles(t, dir) {
						if s > off && s != prepared {
							t.Fatalf("segment %d above the cut %d still exists", s, off)
						}
					}
					if q := l.QueueOffset("T", 0); q != 0 && off != oldEnd {
						t.Fatalf("queue offset %d kept after the cut", q)
					}
					// Appends continue at the cut, with the queue offsets
					// the caller sets.
					next := int64(len(keep)/3 + 1)
					l.SetQueueOffset("T", 1, next)
					more := make([]appended, 0, 300)
					for i := 0; i < 300; i += 30 {
						var entries []*Entry
						for j := i; j < i+30; j++ {
							body := bytes.Repeat([]byte{0xA0 ^ byte(j)}, 200+j%700)
							entries = append(entries, record(t, "T", 1, body))
							more = append(more, appended{topic: "T", queue: 1, body: body})
						}
						res, err := l.AppendBatch(t.Context(), entries, nil)
						if err != nil {
							t.Fatal(err)
						}
						for k, r := range res {
							more[i+k].res = r
						}
					}
					if more[0].res.PhysicalOffset != off && !(where == "blank" && more[0].res.PhysicalOffset == seg) {
						t.Fatalf("first append after the cut at %d went to %d", off, more[0].res.PhysicalOffset)
					}
					if more[0].res.QueueOffset != next {
						t.Fatalf("queue offset %d after SetQueueOffset(%d)", more[0].res.QueueOffset, next)
					}
					all := append(append([]appended(nil), keep...), more...)
					end := l.MaxOffset()
					checkContiguous(t, l, all, 0)
					checkRecords(t, l, all)
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					// Reopen from the start and from the first kept record:
					// recovery finds exactly the new end.
					for _, from := range []int64{0, min(off, more[0].res.PhysicalOffset)} {
						r := openTestLog(t, opts, from)
						if rec := r.Recovery(); rec.End != end || rec.Torn || rec.RemovedSegments != 0 {
							t.Fatalf("reopen from %d: %+v, want end %d untorn", from, rec, end)
						}
						checkRecords(t, r, all)
						checkScan(t, r, 0, all)
						if err := r.Close(); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}

func TestTruncateReopenEndsAtCut(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			l := openTestLog(t, opts, 0)
			recs := fillBatches(t, l, 800)
			sortByOffset(recs)
			i := len(recs) / 3
			off := recs[i].res.PhysicalOffset
			if err := l.Truncate(off); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// A reopen verifying from a point past the cut (a checkpoint
			// taken before it) must not invent a log up to there: the
			// store never does that, but from a boundary at or below the
			// cut the end is exact.
			r := openTestLog(t, opts, recs[i-1].res.PhysicalOffset)
			if rec := r.Recovery(); rec.End != off || rec.Torn {
				t.Fatalf("reopen: %+v, want end %d", rec, off)
			}
			checkRecords(t, r, recs[:i])
		})
	}
}

func TestTruncateRefusesNonBoundary(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, testOptions(dir, FlushAsync, WritePwrite), 0)
	recs := fillBatches(t, l, 400)
	sortByOffset(recs)
	end := l.MaxOffset()
	mid := recs[100].res
	for _, c := range []struct {
		off  int64
		want error
	}{
		{mid.PhysicalOffset + 1, ErrNotBoundary},
		{mid.PhysicalOffset + int64(mid.Size)/2, ErrNotBoundary},
		{mid.End() - 4, ErrNotBoundary},
		{end + 1, ErrOffset},
		{-1, ErrOffset},
	} {
		if err := l.CheckBoundary(c.off); !errors.Is(err, c.want) {
			t.Fatalf("CheckBoundary(%d) = %v, want %v", c.off, err, c.want)
		}
		if err := l.Truncate(c.off); !errors.Is(err, c.want) {
			t.Fatalf("Truncate(%d) = %v, want %v", c.off, err, c.want)
		}
	}
	if l.MaxOffset() != end || l.Err() != nil {
		t.Fatalf("refused truncations changed the log: end %d (was %d), err %v", l.MaxOffset(), end, l.Err())
	}
	checkRecords(t, l, recs)
	for _, a := range recs[:50] {
		if err := l.CheckBoundary(a.res.PhysicalOffset); err != nil {
			t.Fatalf("record start %d: %v", a.res.PhysicalOffset, err)
		}
	}
}

// TestTruncateWithReaders truncates while readers hammer the log: none
// crashes, and each read either succeeds on an intact record or fails.
func TestTruncateWithReaders(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			l := openTestLog(t, testOptions(t.TempDir(), m.flush, m.write), 0)
			recs := fillBatches(t, l, 1200)
			sortByOffset(recs)
			var stop atomic.Bool
			var wg sync.WaitGroup
			var reads atomic.Int64
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var buf []byte
					for i := g; !stop.Load(); i = (i + 7) % len(recs) {
						a := recs[i].res
						var err error
						switch i % 4 {
						case 0:
							buf, err = l.ReadRecord(a.PhysicalOffset, buf[:0])
							if err == nil {
								err = message.Verify(buf)
							}
						case 1:
							buf, err = l.PreadRecord(a.PhysicalOffset, buf[:0])
						case 2:
							buf, _, err = l.ReadChunk(a.PhysicalOffset, 64<<10, buf[:0])
						case 3:
							_, err = l.Scan(a.PhysicalOffset, a.PhysicalOffset+64<<10, func(int64, []byte) error { return nil })
						}
						_ = err
						reads.Add(1)
					}
				}()
			}
			for reads.Load() < 1000 {
				runtime.Gosched()
			}
			off := recs[len(recs)/4].res.PhysicalOffset
			if err := l.Truncate(off); err != nil {
				t.Fatal(err)
			}
			n := reads.Load()
			for reads.Load() < n+1000 {
				runtime.Gosched()
			}
			stop.Store(true)
			wg.Wait()
			checkTruncated(t, l, recs[:len(recs)/4], off)
		})
	}
}

// TestTruncatePowerLoss: after a truncation the cut is durable; a power
// loss that drops everything not flushed later finds no record of the old
// tail.
func TestTruncatePowerLoss(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			opts.FlushInterval = 1 << 40 // only explicit flushes
			opts.FlushThoroughInterval = 1 << 40
			l, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs := fillBatches(t, l, 900)
			sortByOffset(recs)
			i := len(recs) / 2
			off := recs[i].res.PhysicalOffset
			if err := l.Truncate(off); err != nil {
				t.Fatal(err)
			}
			flushed := l.FlushedOffset()
			if flushed != off {
				t.Fatalf("flushed %d after the cut at %d", flushed, off)
			}
			var more []appended
			if m.flush == FlushAsync { // not flushed: lost below
				for j := 0; j < 50; j++ {
					more = append(more, appendOne(t, l, record(t, "N", 0, bytes.Repeat([]byte{9}, 300))))
				}
			}
			// Power loss: stop without a flush, then cut every file at
			// the durable offset.
			l.closed.Store(true)
			l.cancel()
			l.wg.Wait()
			l.closeSegments()
			starts, err := listSegments(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range starts {
				p := filepath.Join(dir, SegmentName(s))
				switch {
				case s >= flushed && s > 0:
					err = os.Truncate(p, 0)
				case s+opts.SegmentSize > flushed:
					err = os.Truncate(p, flushed-s)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			r := openTestLog(t, opts, 0)
			if rec := r.Recovery(); rec.End != off {
				t.Fatalf("after power loss the log ends at %d, want %d (%+v)", rec.End, off, rec)
			}
			checkRecords(t, r, recs[:i])
			checkScan(t, r, 0, recs[:i])
		})
	}
}
