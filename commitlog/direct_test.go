package commitlog

import (
	"bytes"
	"testing"
)

// TestReadSpanBelowCacheWindow: spans the log dropped from the page cache
// are read with O_DIRECT (where the file system takes it) and come back
// byte for byte as the mapping has them, at unaligned offsets and lengths,
// across whole runs of records and inside one; spans in the window are
// read through the page cache as before.
func TestReadSpanBelowCacheWindow(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WritePwrite)
	l, recs, _ := fillBehindWindow(t, o)
	viewed := func(off int64, n int) []byte {
		t.Helper()
		var out []byte
		if err := l.View(off, n, func(b []byte) error { out = append(out, b...); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(name string, off int64, n int) {
		t.Helper()
		got := make([]byte, n)
		if err := l.ReadSpan(off, got); err != nil {
			t.Fatalf("%s: ReadSpan(%d, %d): %v", name, off, n, err)
		}
		if !bytes.Equal(got, viewed(off, n)) {
			t.Fatalf("%s: ReadSpan(%d, %d) differs from the mapping", name, off, n)
		}
	}
	// Whole runs of records, starting at record boundaries (unaligned).
	for i := 1; i+40 < len(recs) && recs[i+40].res.End() < l.CacheFrom(); i += 97 {
		a, b := recs[i].res, recs[i+40].res
		if b.PhysicalOffset < a.PhysicalOffset || a.PhysicalOffset/l.opts.SegmentSize != b.End()/l.opts.SegmentSize {
			continue // not in one segment
		}
		check("run", a.PhysicalOffset, int(b.End()-a.PhysicalOffset))
	}
	check("inside a record", recs[3].res.PhysicalOffset+5, int(recs[3].res.Size)-9)
	check("in the window", recs[len(recs)-2].res.PhysicalOffset, int(recs[len(recs)-2].res.Size))
	checkReadDirect(t, l, o.Dir)
	checkRecords(t, l, recs)
}

// TestPreadRecordsBelowCacheWindow: due timer messages read back from
// below the window (PreadRecords' spans) come from the file with O_DIRECT
// and match the mapping record for record, alone and in runs, with
// records from inside the window among them.
func TestPreadRecordsBelowCacheWindow(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WritePwrite)
	l, recs, _ := fillBehindWindow(t, o)
	var offs []int64
	for i := 0; i < len(recs); i += 1 + i%5 { // runs of neighbours, and gaps
		offs = append(offs, recs[i].res.PhysicalOffset)
	}
	below := 0
	for _, off := range offs {
		if off < l.CacheFrom() {
			below++
		}
	}
	if below == 0 || below == len(offs) {
		t.Fatalf("%d of %d offsets below the window: want some on each side", below, len(offs))
	}
	checkPreadRecords(t, l, offs, 0)
	checkReadDirect(t, l, o.Dir)
}

// checkReadDirect fails the test unless the log's first segment was read
// with O_DIRECT, or its file system (in dir) refused O_DIRECT.
func checkReadDirect(t *testing.T, l *Log, dir string) {
	t.Helper()
	l.segMu.RLock()
	first := l.segs[0]
	l.segMu.RUnlock()
	first.dmu.Lock()
	opened, refused := first.dfile != nil, first.dfailed
	first.dmu.Unlock()
	switch {
	case opened:
	case refused:
		t.Logf("the file system of %s does not take O_DIRECT: read through the page cache", dir)
	default:
		t.Fatal("nothing below the window was read with O_DIRECT")
	}
}

// TestReadChunkBelowCacheWindow: a slave copying a log from far behind
// gets chunks read with O_DIRECT below the window, through the mapping
// above it, and ends byte for byte the master's copy, whatever the chunk
// size: smaller than a record, a few records, more than a segment.
func TestReadChunkBelowCacheWindow(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WritePwrite)
	src, _, _ := fillBehindWindow(t, o)
	if len(src.Segments()) < 2 {
		t.Fatalf("%d segments: the test wants a segment end below the window", len(src.Segments()))
	}
	for _, max := range []int{100, 3000, 256 << 10, 64 << 20} {
		so := testOptions(t.TempDir(), FlushAsync, WritePwrite)
		so.SegmentSize = src.opts.SegmentSize
		dst := openTestLog(t, so, 0)
		chunks := copyAll(t, src, dst, max)
		sameBytes(t, src, dst)
		t.Logf("max %d: %d chunks", max, chunks)
	}
	checkReadDirect(t, src, o.Dir)
}

// TestPreadRecordBelowCacheWindow: a lone record below the window (a
// lookup by key or offset) is read with O_DIRECT, and is the record.
func TestPreadRecordBelowCacheWindow(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WritePwrite)
	l, recs, _ := fillBehindWindow(t, o)
	off := recs[len(recs)/4].res.PhysicalOffset
	if off >= l.CacheFrom() {
		t.Fatalf("record at %d is not below the window (%d)", off, l.CacheFrom())
	}
	want, err := l.ReadRecord(off, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, guess := range []int{0, 16, len(want), 64 << 10} { // under and over its size
		got, err := l.PreadRecord(off, make([]byte, 3, 3+guess))
		if err != nil || string(got[:3]) != "\x00\x00\x00" || !bytes.Equal(got[3:], want) {
			t.Fatalf("guess %d: read %d bytes (%v), want the %d of the record after the 3 kept", guess, len(got), err, len(want))
		}
	}
	checkReadDirect(t, l, o.Dir)
}
