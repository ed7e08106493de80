package commitlog

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// unwrittenIn reports whether any extent of f in [off, off+n) is unwritten
// (allocated, never written), by FIEMAP; it skips the test on a file
// system without FIEMAP.
func unwrittenIn(t *testing.T, l *Log, off, n int64) bool {
	t.Helper()
	const (
		fsIocFiemap       = 0xC020660B
		fiemapFlagSync    = 0x1
		fiemapExtUnwritte = 0x800
		maxExtents        = 64
	)
	type extent struct {
		Logical, Physical, Length uint64
		_                         [2]uint64
		Flags                     uint32
		_                         [3]uint32
	}
	type fiemap struct {
		Start, Length           uint64
		Flags, Mapped, Count, _ uint32
		Extents                 [maxExtents]extent
	}
	l.segMu.RLock()
	seg := l.segmentFor(off)
	l.segMu.RUnlock()
	fm := fiemap{Start: uint64(off - seg.start), Length: uint64(n), Flags: fiemapFlagSync, Count: maxExtents}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, seg.f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&fm))); errno != 0 {
		t.Skipf("FIEMAP: %v", errno)
	}
	for _, e := range fm.Extents[:fm.Mapped] {
		if e.Flags&fiemapExtUnwritte != 0 {
			return true
		}
	}
	return false
}

// TestZerosAheadOfDurableWriter: in sync flush mode the part of the active
// segment ahead of the writer becomes written extents (zeros), at least
// half of ZeroAhead of it; the part beyond ZeroAhead stays unwritten; and
// the records read back.
func TestZerosAheadOfDurableWriter(t *testing.T) {
	o := testOptions(t.TempDir(), FlushSync, WritePwrite)
	o.SegmentSize = 16 << 20
	o.ZeroAhead = 2 << 20
	l := openTestLog(t, o, 0)
	recs := fillLog(t, l, 100)
	end := l.MaxOffset()
	from := (end + pageSize - 1) &^ (pageSize - 1)
	deadline := time.Now().Add(10 * time.Second)
	for unwrittenIn(t, l, from, end+o.ZeroAhead/2-from) {
		if time.Now().After(deadline) {
			t.Fatalf("[%d, %d) still unwritten", from, end+o.ZeroAhead/2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	far := end + o.ZeroAhead + zeroStep
	if !unwrittenIn(t, l, far, pageSize) {
		t.Fatalf("the extent at %d, past what is zeroed ahead, is written", far)
	}
	checkRecords(t, l, recs)
}

// TestZerosAheadKeepConcurrentAppends: with zeros written in small, slow
// steps just ahead of the writer, so that appenders run into steps in
// progress all the time, every record of concurrent durable appenders
// (single and batched, of mixed sizes) reads back intact, also after a
// reopen.
func TestZerosAheadKeepConcurrentAppends(t *testing.T) {
	o := testOptions(t.TempDir(), FlushSync, WritePwrite)
	o.SegmentSize = 1 << 20
	o.ZeroAhead = 16 << 10
	appendsKeptThroughZeros(t, o, 150,
		func(i int) int { return 1 + (i%4)*3 }, // batches of 1, 4, 7 and 10 records
		func(i, k int) int { return 50 + (i*97+k*13)%3000 })
}

// appendsKeptThroughZeros has 8 goroutines append rounds batches each to
// a log opened with o, with every zero step slowed down so that they run
// into claimed ranges (zeroClaimDelay): batch i of a goroutine holds
// records(i) records, record k of it a body of size(i, k) bytes. Every
// record must read back intact, also after a reopen.
func appendsKeptThroughZeros(t *testing.T, o Options, rounds int, records func(i int) int, size func(i, k int) int) {
	t.Helper()
	defer func(d time.Duration) { zeroClaimDelay = d }(zeroClaimDelay)
	zeroClaimDelay = time.Millisecond
	l := openTestLog(t, o, 0)
	ctx := context.Background()
	var mu sync.Mutex
	var recs []appended
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				n := records(i)
				batch := make([]*Entry, n)
				bodies := make([][]byte, n)
				for k := range batch {
					bodies[k] = bytes.Repeat([]byte{byte(w*31 + i + k)}, size(i, k))
					batch[k] = record(t, "Z", int32(w), bodies[k])
				}
				res, err := l.AppendBatch(ctx, batch, nil)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for k, r := range res {
					recs = append(recs, appended{res: r, topic: "Z", queue: int32(w), body: bodies[k]})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sortByOffset(recs)
	checkRecords(t, l, recs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, openTestLog(t, o, 0), recs)
}

// TestZerosBeforePopulating: in mmap write mode the whole pages made
// writable ahead of the writer are first written with zeros (the active
// segment's zeroed mark passes the writer by at least half of
// PopulateAhead), and not with ZeroAhead 0; the records read back either
// way.
func TestZerosBeforePopulating(t *testing.T) {
	for _, zeroAhead := range []int64{32 << 20, 0} {
		o := testOptions(t.TempDir(), FlushAsync, WriteMmap)
		o.SegmentSize = 64 << 20
		o.ZeroAhead = zeroAhead
		l := openTestLog(t, o, 0)
		recs := fillLog(t, l, 2000) // about 1.3 MiB; populating starts at the first
		end := l.MaxOffset()
		zeroed := func() int64 {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.active.start + l.active.zeroed
		}
		if zeroAhead == 0 {
			time.Sleep(50 * time.Millisecond)
			if z := zeroed(); z != 0 {
				t.Fatalf("ZeroAhead 0: zeros written up to %d", z)
			}
		} else {
			deadline := time.Now().Add(10 * time.Second)
			for zeroed() < end+PopulateAhead/2 {
				if l.populateOff.Load() {
					t.Skip("the kernel cannot populate pages ahead (MADV_POPULATE_WRITE)")
				}
				if time.Now().After(deadline) {
					t.Fatalf("zeros written up to %d, want at least %d (log ends at %d)", zeroed(), end+PopulateAhead/2, end)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		checkRecords(t, l, recs)
	}
}

// TestZerosBeforePopulatingKeepConcurrentAppends: in mmap write mode, with
// the zeros of each populating step written slowly, so that appenders run
// into claimed ranges all the time, every record of concurrent appenders
// (single records through the mapping, batches with pwrite, crossing
// segments) reads back intact, also after a reopen.
func TestZerosBeforePopulatingKeepConcurrentAppends(t *testing.T) {
	defer func(gap int64) { populateZeroGap = gap }(populateZeroGap)
	populateZeroGap = 0 // claims start at the writer's next page
	o := testOptions(t.TempDir(), FlushAsync, WriteMmap)
	o.SegmentSize = 1 << 20
	o.FlushInterval = 5 * time.Millisecond
	appendsKeptThroughZeros(t, o, 200,
		func(i int) int { return 1 + (i%5)*8 }, // 1 to 33 records: single stores and bulk writes
		func(i, k int) int { return 50 + (i*97+k*13)%1500 })
}
