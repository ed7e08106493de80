package commitlog

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// writtenLog appends n records in the given mode, closes the log and returns
// its options and records.
func writtenLog(t *testing.T, flush FlushMode, write WriteMode, n int) (Options, []appended) {
	t.Helper()
	opts := testOptions(t.TempDir(), flush, write)
	l, err := Open(opts, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := fillLog(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return opts, recs
}

func segPath(opts Options, start int64) string {
	return filepath.Join(opts.Dir, SegmentName(start))
}

// recordsBelow returns the records that end at or before off.
func recordsBelow(recs []appended, off int64) []appended {
	var out []appended
	for _, a := range recs {
		if a.res.End() <= off {
			out = append(out, a)
		}
	}
	return out
}

// TestRecoverFromCheckpoint: Open verifies only the records from its from
// offset on; what lies before it is trusted (even when damaged), and a from
// past the end falls back to scanning the last segment.
func TestRecoverFromCheckpoint(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts, recs := writtenLog(t, m.flush, m.write, 1200)
			end := recs[len(recs)-1].res.End()
			seg := opts.SegmentSize
			// The first record of segment 2: its predecessor is a blank.
			firstOfSeg := -1
			for i, a := range recs {
				if a.res.PhysicalOffset == 2*seg {
					firstOfSeg = i
					break
				}
			}
			if firstOfSeg < 0 {
				t.Fatal("no record starts segment 2")
			}
			for _, from := range []int{700, firstOfSeg, len(recs) - 1} {
				off := recs[from].res.PhysicalOffset
				l := openTestLog(t, opts, off)
				rec := l.Recovery()
				if rec.From != off || rec.End != end || rec.Records != int64(len(recs)-from) || rec.Torn {
					t.Fatalf("from record %d at %d: %+v, want %d records to %d", from, off, rec, len(recs)-from, end)
				}
				checkRecords(t, l, recs)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}

			// Damage record 100: recovery from record 700 trusts it ...
			bad := recs[100].res
			path := segPath(opts, bad.PhysicalOffset/seg*seg)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			pos := bad.PhysicalOffset%seg + int64(bad.Size)/2
			b := []byte{0}
			if _, err := f.ReadAt(b, pos); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0xff
			if _, err := f.WriteAt(b, pos); err != nil {
				t.Fatal(err)
			}
			f.Close()
			l := openTestLog(t, opts, recs[700].res.PhysicalOffset)
			if rec := l.Recovery(); rec.Torn || rec.End != end || rec.Records != int64(len(recs)-700) {
				t.Fatalf("from 700 with record 100 damaged: %+v", rec)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// ... a from past the end scans the last segment only ...
			l = openTestLog(t, opts, end+10*seg)
			if rec := l.Recovery(); rec.Torn || rec.End != end || rec.From != end/seg*seg {
				t.Fatalf("from past the end: %+v", rec)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// ... and a full scan cuts the log at record 100, removing every
			// later segment.
			nsegs := len(segmentFiles(t, opts.Dir))
			l = openTestLog(t, opts, 0)
			rec := l.Recovery()
			wantRemoved := nsegs - 1 - int(bad.PhysicalOffset/seg)
			if !rec.Torn || rec.End != bad.PhysicalOffset || rec.Records != 100 || rec.RemovedSegments != wantRemoved {
				t.Fatalf("full scan: %+v, want torn at %d after 100 records, %d segments removed", rec, bad.PhysicalOffset, wantRemoved)
			}
			if l.MaxOffset() != bad.PhysicalOffset {
				t.Fatalf("max %d", l.MaxOffset())
			}
			if got := len(segmentFiles(t, opts.Dir)); got > int(bad.PhysicalOffset/seg)+2 {
				t.Fatalf("%d segment files left", got)
			}
			checkRecords(t, l, recs[:100])
			checkScan(t, l, 0, recs[:100])
		})
	}
}

// TestRecoverShortSegment: a segment file cut short (power loss while its
// size was not yet durable) recovers to the last whole record before the cut
// and is re-extended to the segment size; later segments are removed.
func TestRecoverShortSegment(t *testing.T) {
	for _, m := range modes() {
		for _, which := range []string{"last", "middle"} {
			t.Run(m.name+"/"+which, func(t *testing.T) {
				opts, recs := writtenLog(t, m.flush, m.write, 1200)
				seg := opts.SegmentSize
				starts, _ := listSegments(opts.Dir)
				if len(starts) < 4 {
					t.Fatalf("%d segments", len(starts))
				}
				victim := starts[len(starts)-1]
				if which == "middle" {
					victim = starts[1]
				}
				// Cut the file to half of what was written into it.
				written := min(recs[len(recs)-1].res.End()-victim, seg)
				cut := victim + written/2
				if err := os.Truncate(segPath(opts, victim), written/2); err != nil {
					t.Fatal(err)
				}
				kept := recordsBelow(recs, cut)
				wantEnd := kept[len(kept)-1].res.End()
				l := openTestLog(t, opts, 0)
				rec := l.Recovery()
				wantTorn := wantEnd != cut
				wantRemoved := 0
				for _, s := range starts {
					if s > victim {
						wantRemoved++
					}
				}
				if rec.End != wantEnd || rec.Torn != wantTorn || rec.Records != int64(len(kept)) || rec.RemovedSegments != wantRemoved {
					t.Fatalf("recovery %+v, want end %d (torn %v) after %d records, %d segments removed", rec, wantEnd, wantTorn, len(kept), wantRemoved)
				}
				files := segmentFiles(t, opts.Dir)
				if files[victim] != seg {
					t.Fatalf("cut segment is %d bytes after recovery, want %d", files[victim], seg)
				}
				for s := range files {
					if s > victim+seg {
						t.Fatalf("segment %s past the cut survived", SegmentName(s))
					}
				}
				checkRecords(t, l, kept)
				checkScan(t, l, 0, kept)
				// The log continues from the cut and reopens cleanly.
				more := fillLog(t, l, 300)
				if more[0].res.PhysicalOffset != wantEnd {
					t.Fatalf("append after recovery at %d, want %d", more[0].res.PhysicalOffset, wantEnd)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l2 := openTestLog(t, opts, 0)
				all := append(kept, more...)
				if rec := l2.Recovery(); rec.Torn || rec.Records != int64(len(all)) {
					t.Fatalf("second reopen: %+v, want %d records", rec, len(all))
				}
				checkRecords(t, l2, all)
				checkScan(t, l2, 0, all)
			})
		}
	}
}

// TestRecoverZeroedLastPage: the last 4 KiB page holding data reads as zeros
// (its write never reached the disk): recovery keeps every record before
// that page.
func TestRecoverZeroedLastPage(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts, recs := writtenLog(t, m.flush, m.write, 1200)
			seg := opts.SegmentSize
			end := recs[len(recs)-1].res.End()
			segStart := (end - 1) / seg * seg
			pageAbs := (end - 1) / pageSize * pageSize
			if pageAbs <= segStart {
				t.Fatalf("the last page starts its segment; change the record count")
			}
			f, err := os.OpenFile(segPath(opts, segStart), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(make([]byte, pageSize), pageAbs-segStart); err != nil {
				t.Fatal(err)
			}
			f.Close()
			kept := recordsBelow(recs, pageAbs)
			wantEnd := kept[len(kept)-1].res.End()
			l := openTestLog(t, opts, 0)
			rec := l.Recovery()
			if rec.End != wantEnd || rec.Torn != (wantEnd != pageAbs) || rec.Records != int64(len(kept)) {
				t.Fatalf("recovery %+v, want end %d after %d records (page at %d)", rec, wantEnd, len(kept), pageAbs)
			}
			checkRecords(t, l, kept)
			checkScan(t, l, 0, kept)
		})
	}
}

// TestRecoverClearsGarbageAfterEnd: bytes past the end of the log behind a
// gap of zeros — here a valid-looking record stamped for the offset where
// the log will reach after three more appends, then random bytes — are
// cleared by recovery, so that after appending and reopening again nothing
// stale comes back.
func TestRecoverClearsGarbageAfterEnd(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts, recs := writtenLog(t, m.flush, m.write, 400)
			seg := opts.SegmentSize
			end := recs[len(recs)-1].res.End()
			segStart := (end - 1) / seg * seg
			sizes := []int{700, 900, 1100}
			next := end
			for _, s := range sizes {
				next += int64(s)
			}
			stale := sizedRecord(t, "T", 0, 600, 'S').Record
			message.Stamp(stale, 12345, next, 1)
			if err := message.Verify(stale); err != nil {
				t.Fatal(err)
			}
			garbage := make([]byte, 3000)
			if _, err := rand.Read(garbage); err != nil {
				t.Fatal(err)
			}
			if next+int64(len(stale)+len(garbage)) > segStart+seg-message.BlankSize {
				t.Fatal("the planted bytes do not fit in the last segment; change the record count")
			}
			f, err := os.OpenFile(segPath(opts, segStart), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			planted := append(append([]byte{}, stale...), garbage...)
			if _, err := f.WriteAt(planted, next-segStart); err != nil {
				t.Fatal(err)
			}
			f.Close()

			l := openTestLog(t, opts, 0)
			if rec := l.Recovery(); rec.Torn || rec.End != end || rec.Records != int64(len(recs)) {
				t.Fatalf("first reopen: %+v, want a clean end at %d", rec, end)
			}
			// The bytes past the end must read as zeros now.
			raw, err := os.ReadFile(segPath(opts, segStart))
			if err != nil {
				t.Fatal(err)
			}
			if tail := raw[end-segStart:]; !bytes.Equal(tail, make([]byte, len(tail))) {
				i := bytes.IndexFunc(tail, func(r rune) bool { return r != 0 })
				t.Fatalf("stale bytes survive recovery at %d", end+int64(i))
			}
			var more []appended
			for i, s := range sizes {
				more = append(more, appendOne(t, l, sizedRecord(t, "T", 1, s, byte('a'+i))))
			}
			if got := more[len(more)-1].res.End(); got != next {
				t.Fatalf("appends end at %d, planned %d", got, next)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openTestLog(t, opts, 0)
			all := append(recs, more...)
			if rec := l2.Recovery(); rec.Torn || rec.End != next || rec.Records != int64(len(all)) || l2.MaxOffset() != next {
				t.Fatalf("second reopen: %+v, max %d, want %d records ending at %d (a stale record came back?)", rec, l2.MaxOffset(), len(all), next)
			}
			checkRecords(t, l2, all)
			checkScan(t, l2, 0, all)
		})
	}
}

// TestRecoverStraySegmentAfterCleanEnd: a segment file past the end of the
// log (left by a crash after it was created, before anything reached it)
// is removed when it does not follow the end directly, and kept (cleared)
// when it starts exactly where the log ends.
func TestRecoverStraySegmentAfterCleanEnd(t *testing.T) {
	opts, recs := writtenLog(t, FlushSync, WritePwrite, 400)
	seg := opts.SegmentSize
	end := recs[len(recs)-1].res.End()
	last := (end - 1) / seg * seg
	for _, s := range []int64{last + seg, last + 2*seg} {
		junk := make([]byte, seg)
		if _, err := rand.Read(junk[:5000]); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segPath(opts, s), junk, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := openTestLog(t, opts, 0)
	rec := l.Recovery()
	if rec.End != end || rec.RemovedSegments != 2 || rec.Records != int64(len(recs)) {
		t.Fatalf("recovery %+v, want end %d with the 2 stray segments removed", rec, end)
	}
	for s := range segmentFiles(t, opts.Dir) {
		if s > last+seg {
			t.Fatalf("stray segment %s survived", SegmentName(s))
		}
	}
	more := fillLog(t, l, 600)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTestLog(t, opts, 0)
	all := append(recs, more...)
	if rec := l2.Recovery(); rec.Torn || rec.Records != int64(len(all)) {
		t.Fatalf("second reopen: %+v, want %d records", rec, len(all))
	}
	checkRecords(t, l2, all)
	checkScan(t, l2, 0, all)
}
