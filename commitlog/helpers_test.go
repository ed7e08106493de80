package commitlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// Helpers shared by the commitlog tests. record, testOptions and modes live
// in log_test.go.

// openTestLog opens a log and closes it when the test ends (Close is
// idempotent, so tests may close it earlier).
func openTestLog(t testing.TB, opts Options, from int64) *Log {
	t.Helper()
	l, err := Open(opts, from, nil)
	if err != nil {
		t.Fatalf("open %s from %d: %v", opts.Dir, from, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// recordBase is the encoded size of record(t, topic, queue, nil).
func recordBase(t testing.TB, topic string, queue int32) int {
	t.Helper()
	return len(record(t, topic, queue, nil).Record)
}

// sizedRecord returns an entry whose encoded record is exactly size bytes.
func sizedRecord(t testing.TB, topic string, queue int32, size int, fill byte) *Entry {
	t.Helper()
	base := recordBase(t, topic, queue)
	if size < base {
		t.Fatalf("sizedRecord: %d bytes is below the minimum %d", size, base)
	}
	e := record(t, topic, queue, bytes.Repeat([]byte{fill}, size-base))
	if len(e.Record) != size {
		t.Fatalf("sizedRecord: encoded %d bytes, want %d", len(e.Record), size)
	}
	return e
}

// appended is an acknowledged append.
type appended struct {
	res   Result
	topic string
	queue int32
	body  []byte
}

func sortByOffset(recs []appended) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].res.PhysicalOffset < recs[j].res.PhysicalOffset })
}

// headerAt reads the 8-byte header at off through View.
func headerAt(t testing.TB, l *Log, off int64) message.Header {
	t.Helper()
	var h message.Header
	if err := l.View(off, message.BlankSize, func(b []byte) error {
		var err error
		h, err = message.PeekHeader(b)
		return err
	}); err != nil {
		t.Fatalf("view header at %d: %v", off, err)
	}
	return h
}

// checkContiguous checks that the records (sorted by offset) tile the log
// from start: each begins where the previous one ended, or at the next
// segment boundary when a blank fills the rest of the segment; no record
// crosses a segment and every segment keeps room for its blank. It returns
// the offset after the last record.
func checkContiguous(t testing.TB, l *Log, recs []appended, start int64) int64 {
	t.Helper()
	seg := l.Options().SegmentSize
	pos := start
	for i, a := range recs {
		r := a.res
		if r.PhysicalOffset != pos {
			if r.PhysicalOffset < pos || r.PhysicalOffset%seg != 0 || r.PhysicalOffset-pos >= seg {
				t.Fatalf("record %d at %d: previous record ended at %d and %d is not the next segment boundary",
					i, r.PhysicalOffset, pos, r.PhysicalOffset)
			}
			h := headerAt(t, l, pos)
			if !h.IsBlank() || int64(h.TotalSize) != r.PhysicalOffset-pos {
				t.Fatalf("gap [%d, %d) before record %d is not a blank filling the segment: %+v", pos, r.PhysicalOffset, i, h)
			}
		}
		if r.PhysicalOffset/seg != (r.End()-1)/seg {
			t.Fatalf("record %d [%d, %d) crosses a segment boundary", i, r.PhysicalOffset, r.End())
		}
		if left := (r.PhysicalOffset/seg+1)*seg - r.End(); left < message.BlankSize {
			t.Fatalf("record %d ends %d bytes before its segment end, no room for a blank", i, left)
		}
		pos = r.End()
	}
	return pos
}

// checkRecords reads every record back and compares it with what was
// appended.
func checkRecords(t testing.TB, l *Log, recs []appended) {
	t.Helper()
	var buf []byte
	for i, a := range recs {
		var err error
		buf, err = l.ReadRecord(a.res.PhysicalOffset, buf[:0])
		if err != nil {
			t.Fatalf("record %d at %d: %v", i, a.res.PhysicalOffset, err)
		}
		if len(buf) != int(a.res.Size) {
			t.Fatalf("record %d at %d: read %d bytes, appended %d", i, a.res.PhysicalOffset, len(buf), a.res.Size)
		}
		if err := message.Verify(buf); err != nil {
			t.Fatalf("record %d at %d: %v", i, a.res.PhysicalOffset, err)
		}
		m, err := message.Decode(buf)
		if err != nil {
			t.Fatalf("record %d at %d: %v", i, a.res.PhysicalOffset, err)
		}
		if m.Topic != a.topic || m.QueueID != a.queue || !bytes.Equal(m.Body, a.body) ||
			m.PhysicalOffset != a.res.PhysicalOffset || m.QueueOffset != a.res.QueueOffset ||
			m.StoreTimestamp != a.res.StoreTimestamp {
			t.Fatalf("record %d at %d differs: topic %q/%q queue %d/%d phys %d queueOffset %d/%d store %d/%d body equal %v",
				i, a.res.PhysicalOffset, m.Topic, a.topic, m.QueueID, a.queue, m.PhysicalOffset,
				m.QueueOffset, a.res.QueueOffset, m.StoreTimestamp, a.res.StoreTimestamp, bytes.Equal(m.Body, a.body))
		}
	}
}

// checkScan checks that Scan from from visits exactly recs (sorted), in
// order, and stops at the log's end.
func checkScan(t testing.TB, l *Log, from int64, recs []appended) {
	t.Helper()
	n := 0
	next, err := l.Scan(from, l.MaxOffset(), func(off int64, rec []byte) error {
		if n >= len(recs) {
			return fmt.Errorf("scan: extra record at %d", off)
		}
		if off != recs[n].res.PhysicalOffset || len(rec) != int(recs[n].res.Size) {
			return fmt.Errorf("scan: record %d at %d (%d bytes), want %d (%d bytes)",
				n, off, len(rec), recs[n].res.PhysicalOffset, recs[n].res.Size)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(recs) {
		t.Fatalf("scan visited %d records, want %d", n, len(recs))
	}
	if next != l.MaxOffset() {
		t.Fatalf("scan ended at %d, log ends at %d", next, l.MaxOffset())
	}
}

// segmentFiles lists the segment files in dir with their sizes.
func segmentFiles(t testing.TB, dir string) map[int64]int64 {
	t.Helper()
	starts, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]int64, len(starts))
	for _, s := range starts {
		st, err := os.Stat(filepath.Join(dir, SegmentName(s)))
		if err != nil {
			t.Fatal(err)
		}
		out[s] = st.Size()
	}
	return out
}

// appendOne appends e and records the acknowledgement.
func appendOne(t testing.TB, l *Log, e *Entry) appended {
	t.Helper()
	m, err := message.Decode(e.Record)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Append(t.Context(), e)
	if err != nil {
		t.Fatalf("append %d bytes at %d: %v", len(e.Record), l.MaxOffset(), err)
	}
	return appended{res: r, topic: e.Topic, queue: e.QueueID, body: m.Body}
}

// fillLog appends n records of varying sizes (100..1099 bytes of body) to
// topic T, queues 0..2.
func fillLog(t testing.TB, l *Log, n int) []appended {
	t.Helper()
	out := make([]appended, 0, n)
	for i := 0; i < n; i++ {
		body := bytes.Repeat([]byte{byte(i)}, 100+(i*37)%1000)
		out = append(out, appendOne(t, l, record(t, "T", int32(i%3), body)))
	}
	return out
}
