package commitlog

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/bolide-mq/bolide/internal/mmap"
)

// TestPopulateAheadAndFlushUnmaps: in mmap write mode the pages ahead of
// the writer become resident without being stored to, a flush unmaps the
// writer's pages it wrote back (but not those ahead), and the records read
// back the same.
func TestPopulateAheadAndFlushUnmaps(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, FlushAsync, WriteAuto)
	o.SegmentSize = 64 << 20
	o.FlushInterval = time.Hour // flushes only when the test asks
	o.FlushThoroughInterval = time.Hour
	l := openTestLog(t, o, 0)
	if l.WriteMode() != WriteMmap {
		t.Fatalf("async flush writes with %v, want mmap", l.WriteMode())
	}
	if n := mappedRSS(t, dir); n != 0 {
		t.Fatalf("%d bytes resident before the first append", n)
	}
	// 2 MiB of records: the writer asks for the pages up to 2 + 4 MiB.
	recs := make([]appended, 0, 2048)
	body := bytes.Repeat([]byte("p"), 1000)
	for len(recs) < 2048 {
		r, err := l.Append(context.Background(), record(t, "P", 0, body))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, appended{res: r, topic: "P", queue: 0, body: body})
	}
	end := l.MaxOffset()
	want := end + PopulateAhead*3/4 // leave room for the request's rounding
	deadline := time.Now().Add(10 * time.Second)
	for mappedRSS(t, dir) < want {
		if l.populateOff.Load() {
			t.Skip("the kernel cannot populate pages ahead (MADV_POPULATE_WRITE)")
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes resident, want at least %d (log ends at %d)", mappedRSS(t, dir), want, end)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Only the page holding the end and the pages after it stay mapped.
	if n, most := mappedRSS(t, dir), int64(PopulateAhead)+2*pageSize; n > most {
		t.Fatalf("%d bytes resident after the flush, want at most %d", n, most)
	}
	checkRecords(t, l, recs)
}

// TestBulkAppendInMmapMode: in mmap write mode a large batch is written
// with pwrite (it maps no page of the log, ahead or behind), single
// records go through the mapping, and both read back in order.
func TestBulkAppendInMmapMode(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, FlushAsync, WriteMmap)
	o.SegmentSize = 1 << 20 // batches cross segments
	l := openTestLog(t, o, 0)
	ctx := context.Background()
	var recs []appended
	body := bytes.Repeat([]byte("b"), 1000)
	for len(recs) < 2048 {
		batch := make([]*Entry, 64) // about 70 KiB: a bulk append
		for i := range batch {
			batch[i] = record(t, "B", int32(i%4), body)
		}
		res, err := l.AppendBatch(ctx, batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			recs = append(recs, appended{res: r, topic: "B", queue: int32(i % 4), body: body})
		}
	}
	time.Sleep(50 * time.Millisecond) // a populate request, if one were made, would be served
	if n := mappedRSS(t, dir); n > 0 {
		t.Fatalf("%d bytes of the log mapped after bulk appends only", n)
	}
	for i := 0; i < 100; i++ {
		r, err := l.Append(ctx, record(t, "B", 9, body))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, appended{res: r, topic: "B", queue: 9, body: body})
	}
	if l.Readable() != l.MaxOffset() {
		t.Fatalf("readable %d, written %d", l.Readable(), l.MaxOffset())
	}
	checkRecords(t, l, recs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, openTestLog(t, o, 0), recs)
}

// TestBulkWriteFailureInMmapMode: a bulk append whose pwrite fails makes
// the log fail; neither it nor a small append after it (stored into the
// mapping past the hole) becomes readable, and a reopen ends where the log
// was durable.
func TestBulkWriteFailureInMmapMode(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WriteMmap)
	l := openTestLog(t, o, 0)
	ctx := context.Background()
	good := fillLog(t, l, 20)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	durable := l.MaxOffset()
	restore := failWritesOnActiveFile(t, l)
	batch := make([]*Entry, 32)
	for i := range batch {
		batch[i] = record(t, "T", 0, bytes.Repeat([]byte("x"), 1000))
	}
	if _, err := l.AppendBatch(ctx, batch, nil); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("bulk append over a failing file: %v, want ErrWriteFailed", err)
	}
	if _, err := l.Append(ctx, record(t, "T", 0, []byte("after"))); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("append after the failure: %v, want ErrWriteFailed", err)
	}
	if l.Readable() != durable {
		t.Fatalf("readable %d after the failure, want %d", l.Readable(), durable)
	}
	checkRecords(t, l, good)
	restore()
	_ = l.Close()
	l2 := openTestLog(t, o, 0)
	if l2.MaxOffset() != durable {
		t.Fatalf("reopen ends at %d, want %d", l2.MaxOffset(), durable)
	}
	checkRecords(t, l2, good)
}

// vmFlags returns the VmFlags of the mapping of this process holding addr
// (/proc/self/smaps), or skips the test where there is no such file.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	regions, err := mmap.SelfRegions()
	if err != nil {
		t.Skip(err)
	}
	for _, r := range regions {
		if addr >= r.Start && addr < r.End {
			return r.VmFlags
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return nil
}

// TestActiveSegmentReadsNoAround: in mmap write mode the active segment's
// mapping from the writer on is advised MADV_RANDOM ("rr"), the part
// before the writer at open is not, and a segment the writer has left
// gets the default back.
func TestActiveSegmentReadsNoAround(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, FlushAsync, WriteMmap)
	o.SegmentSize = 1 << 20
	l := openTestLog(t, o, 0)
	fillLog(t, l, 400) // inside the first segment
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, o, 0)
	at := func(off int64) uintptr {
		l.segMu.RLock()
		defer l.segMu.RUnlock()
		s := l.segmentFor(off)
		return uintptr(unsafe.Pointer(&s.m.Data[off-s.start]))
	}
	end := l.MaxOffset()
	if slices.Contains(vmFlags(t, at(0)), "rr") {
		t.Fatal("the records written before the open read no pages around a fault")
	}
	if !slices.Contains(vmFlags(t, at(end+pageSize)), "rr") {
		t.Fatal("the active segment from the writer on reads around a fault")
	}
	for l.MaxOffset() < o.SegmentSize+pageSize {
		fillLog(t, l, 100)
	}
	if f := vmFlags(t, at(end+pageSize)); slices.Contains(f, "rr") {
		t.Fatalf("the segment left behind still reads no pages around a fault: %v", f)
	}
	if !slices.Contains(vmFlags(t, at(l.MaxOffset()+pageSize)), "rr") {
		t.Fatal("the new active segment reads around a fault")
	}
}

// TestLatePopulateSkipsWrittenPages: a populate request served after the
// writer passed its pages touches none of them. Made writable again, the
// pages of a segment written, flushed and dropped from the page cache
// would come back into it dirty, where dropBehind cannot drop them.
func TestLatePopulateSkipsWrittenPages(t *testing.T) {
	l, recs, _ := fillBehindWindow(t, testOptions(t.TempDir(), FlushAsync, WriteMmap))
	l.segMu.RLock()
	first := l.segs[0]
	l.segMu.RUnlock()
	if got := cachedBytes(t, first.path, 0, first.size); got > 64<<10 {
		t.Fatalf("%d KiB of the first segment cached before the late request", got>>10)
	}
	l.populate(populateReq{seg: first, lo: 0, hi: first.size})
	if got := cachedBytes(t, first.path, 0, first.size); got > 64<<10 {
		t.Errorf("%d KiB of the first segment cached after the late request", got>>10)
	}
	checkRecords(t, l, recs)
}
