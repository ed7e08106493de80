package consumequeue

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

func TestLayout(t *testing.T) {
	type file struct{ start, units int64 }
	for _, tc := range []struct {
		upf, first int64
		want       []file // the first files, in order
	}{
		{100, 8, []file{{0, 8}, {8, 8}, {16, 16}, {32, 32}, {64, 36}, {100, 100}, {200, 100}}},
		{300_000, 2048, []file{{0, 2048}, {2048, 2048}, {4096, 4096}, {8192, 8192}, {16384, 16384},
			{32768, 32768}, {65536, 65536}, {131072, 131072}, {262144, 37856}, {300_000, 300_000}, {600_000, 300_000}}},
		{64, 16, []file{{0, 16}, {16, 16}, {32, 32}, {64, 64}, {128, 64}}},
		{10, 10, []file{{0, 10}, {10, 10}, {20, 10}}},
		{10, 50, []file{{0, 10}, {10, 10}}}, // first >= upf: every file full
	} {
		l := layout{upf: tc.upf, first: min(tc.first, tc.upf)}
		var start int64
		for i, f := range tc.want {
			if start != f.start || l.fileUnits(start) != f.units {
				t.Fatalf("upf %d first %d: file %d is [%d, +%d), want [%d, +%d)", tc.upf, tc.first, i,
					start, l.fileUnits(start), f.start, f.units)
			}
			for _, off := range []int64{f.start, f.start + f.units/2, f.start + f.units - 1} {
				if got := l.fileStart(off); got != f.start {
					t.Fatalf("upf %d first %d: fileStart(%d) = %d, want %d", tc.upf, tc.first, off, got, f.start)
				}
			}
			if !l.isFileStart(f.start) || (f.units > 1 && l.isFileStart(f.start+1)) {
				t.Fatalf("upf %d first %d: isFileStart around %d is wrong", tc.upf, tc.first, f.start)
			}
			start = l.fileEnd(start)
		}
	}
}

func openGrowing(t testing.TB, root string, upf, first int) *Store {
	t.Helper()
	s, err := Open(root, Options{UnitsPerFile: upf, FirstFileUnits: first}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fileSizes maps the queue's file names to their sizes on disk.
func fileSizes(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int64)
	for _, e := range entries {
		st, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = st.Size()
	}
	return m
}

func wantSizes(units ...[2]int64) map[string]int64 {
	m := make(map[string]int64)
	for _, u := range units {
		m[fileName(u[0]*UnitSize)] = u[1] * UnitSize
	}
	return m
}

// TestGrowingFiles: a queue's files start small and double up to the full
// size; the queue reads across them, survives a reopen, and a short file
// of the middle of the layout is found again.
func TestGrowingFiles(t *testing.T) {
	root := t.TempDir()
	s := openGrowing(t, root, 100, 8)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 5)
	dir := filepath.Join(root, "t", "0")
	if got, want := fileSizes(t, dir), wantSizes([2]int64{0, 8}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files after 5 units: %v, want %v", got, want)
	}
	putRange(t, q, 5, 250)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 250)
	want := wantSizes([2]int64{0, 8}, [2]int64{8, 8}, [2]int64{16, 16}, [2]int64{32, 32}, [2]int64{64, 36},
		[2]int64{100, 100}, [2]int64{200, 100})
	if got := fileSizes(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files after 250 units: %v, want %v", got, want)
	}
	units, err := q.Read(3, 120, nil)
	if err != nil || len(units) != 120 {
		t.Fatalf("Read across the files: %d units, %v", len(units), err)
	}
	for i, u := range units {
		if u != unitFor(int64(3+i)) {
			t.Fatalf("Read: unit %d = %+v", 3+i, u)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openGrowing(t, root, 100, 8)
	q = mustQueue(t, s, "t", 0)
	checkRange(t, q, 0, 250)
	putRange(t, q, 250, 320)
	checkRange(t, q, 0, 320)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Another FirstFileUnits does not fit the files: refused, not misread.
	if _, err := Open(root, Options{UnitsPerFile: 100, FirstFileUnits: 4}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reopen with another FirstFileUnits: %v, want ErrCorrupt", err)
	}
}

// TestGrowingStartsMidway: a queue whose first unit lies past 0 starts in
// the file of the layout that holds it, pre-blank below it.
func TestGrowingStartsMidway(t *testing.T) {
	root := t.TempDir()
	s := openGrowing(t, root, 100, 8)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 40, 70)
	checkRange(t, q, 40, 70)
	dir := filepath.Join(root, "t", "0")
	want := wantSizes([2]int64{32, 32}, [2]int64{64, 36})
	if got := fileSizes(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files: %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openGrowing(t, root, 100, 8)
	checkRange(t, mustQueue(t, s, "t", 0), 40, 70)
}

// TestLegacyFullFirstFile: a queue written when every file was full-size
// (its first file holds UnitsPerFile units) opens with growing files on
// and goes on in full-size files; a new queue of the same store grows.
func TestLegacyFullFirstFile(t *testing.T) {
	root := t.TempDir()
	s := openGrowing(t, root, 100, 100)
	putRange(t, mustQueue(t, s, "t", 0), 0, 150)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openGrowing(t, root, 100, 8)
	q := mustQueue(t, s, "t", 0)
	checkRange(t, q, 0, 150)
	putRange(t, q, 150, 230)
	checkRange(t, q, 0, 230)
	putRange(t, mustQueue(t, s, "t", 1), 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := wantSizes([2]int64{0, 100}, [2]int64{100, 100}, [2]int64{200, 100})
	if got := fileSizes(t, filepath.Join(root, "t", "0")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("legacy queue's files: %v, want %v", got, want)
	}
	want = wantSizes([2]int64{0, 8}, [2]int64{8, 8})
	if got := fileSizes(t, filepath.Join(root, "t", "1")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("new queue's files: %v, want %v", got, want)
	}
	s = openGrowing(t, root, 100, 8)
	checkRange(t, mustQueue(t, s, "t", 0), 0, 230)
	checkRange(t, mustQueue(t, s, "t", 1), 0, 10)
}

// TestGrowingTruncateAndDelete: truncation and retention across files of
// different sizes keep the files contiguous and the units right, also
// after a reopen.
func TestGrowingTruncateAndDelete(t *testing.T) {
	root := t.TempDir()
	s := openGrowing(t, root, 100, 8)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 150)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Cut inside the 32-unit file: the 64.. and 100.. files go.
	if err := q.TruncateAfter(unitFor(40).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 40)
	want := wantSizes([2]int64{0, 8}, [2]int64{8, 8}, [2]int64{16, 16}, [2]int64{32, 32})
	if got := fileSizes(t, filepath.Join(root, "t", "0")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files after the cut: %v, want %v", got, want)
	}
	putRange(t, q, 40, 120)
	// Everything below unit 20's end is gone from the log: the 0.. and
	// 8.. files go, MinOffset moves to 20.
	n, err := q.DeleteBefore(unitFor(19).End())
	if err != nil || n != 2 {
		t.Fatalf("DeleteBefore: %d files removed, %v", n, err)
	}
	checkRange(t, q, 20, 120)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openGrowing(t, root, 100, 8)
	q = mustQueue(t, s, "t", 0)
	if _, err := q.DeleteBefore(unitFor(19).End()); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 20, 120)
}

// TestGrowingShortFile: a file of the growing part cut by a crash is
// re-extended to its own size, keeping its whole units.
func TestGrowingShortFile(t *testing.T) {
	root := t.TempDir()
	s := openGrowing(t, root, 100, 8)
	putRange(t, mustQueue(t, s, "t", 0), 0, 40)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(root, "t", "0", fileName(32*UnitSize))
	if err := os.Truncate(last, 5*UnitSize+3); err != nil {
		t.Fatal(err)
	}
	s = openGrowing(t, root, 100, 8)
	q := mustQueue(t, s, "t", 0)
	checkRange(t, q, 0, 37)
	if st, err := os.Stat(last); err != nil || st.Size() != 32*UnitSize {
		t.Fatalf("short file not re-extended to 32 units: %v %v", st, err)
	}
	putRange(t, q, 37, 70)
	checkRange(t, q, 0, 70)
}

// TestOpenFilesBudget: descriptors are kept only while a queue is used and
// the store is under MaxOpenFiles; a closed file is reopened when read.
func TestOpenFilesBudget(t *testing.T) {
	root := t.TempDir()
	base := processFDs(t)
	s, err := Open(root, Options{UnitsPerFile: 100, FirstFileUnits: 8, MaxOpenFiles: 5, SyncFSAbove: -1}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	// The count the store keeps is the kernel's (and one more, its root
	// directory's, and one for the staging journal once a flush made it):
	// no descriptor leaks.
	checkFDs := func(when string) {
		t.Helper()
		if got, want := processFDs(t), base+2+s.OpenFiles(); got != want {
			t.Fatalf("%s: the process holds %d descriptors, want %d (%d before the store, %d open files, the root, the journal)", when, got, want, base, s.OpenFiles())
		}
	}
	const queues = 20
	for i := range int32(queues) {
		putRange(t, mustQueue(t, s, "t", i), 0, 30) // three files each
	}
	if n := s.OpenFiles(); n != 3*queues {
		t.Fatalf("%d files open while written, want the %d created", n, 3*queues)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenFiles(); n > 6 {
		t.Fatalf("%d files open after a flush, MaxOpenFiles 5", n)
	}
	if err := s.Flush(); err != nil { // nothing used since the last
		t.Fatal(err)
	}
	if n := s.OpenFiles(); n != 0 {
		t.Fatalf("%d files open after an idle flush", n)
	}
	checkFDs("after an idle flush")
	q := mustQueue(t, s, "t", 3)
	checkRange(t, q, 0, 30)
	if n := s.OpenFiles(); n != 3 {
		t.Fatalf("%d files open after reading one queue's three files", n)
	}
	checkFDs("after a read")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenFiles(); n != 0 {
		t.Fatalf("%d files open after two flushes without use", n)
	}
	putRange(t, q, 30, 40)
	checkRange(t, q, 0, 40)
	checkFDs("after more puts")
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := processFDs(t); got != base {
		t.Fatalf("after Close the process holds %d descriptors, %d before the store", got, base)
	}
}

// processFDs counts the process's open file descriptors.
func processFDs(t *testing.T) int64 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(ents)) - 1 // less the one ReadDir read through
}

// TestFlushSyncFS: a flush of many dirty queues writes them all and syncs
// the file system once; the queues are flushed (nothing dirty is left),
// what was written is in the files, and a truncation between the write
// and the sync is not marked flushed.
func TestFlushSyncFS(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, Options{UnitsPerFile: 100, FirstFileUnits: 8, SyncFSAbove: 2}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	const queues = 6
	for i := range int32(queues) {
		putRange(t, mustQueue(t, s, "t", i), 0, int64(10+i))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, q := range s.Queues() {
		if q.dirty() {
			t.Fatalf("%s still dirty after the flush", q)
		}
		if q.flushed.Load() != q.MaxOffset() {
			t.Fatalf("%s flushed to %d, max offset %d", q, q.flushed.Load(), q.MaxOffset())
		}
	}
	// The units are in the files, not only in memory: read them raw.
	raw, err := os.ReadFile(filepath.Join(root, "t", "5", fileName(8*UnitSize)))
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeUnit(raw[6*UnitSize:]); got != unitFor(14) {
		t.Fatalf("unit 14 in its file: %+v, want %+v", got, unitFor(14))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openGrowing(t, root, 100, 8)
	for i := range int32(queues) {
		checkRange(t, mustQueue(t, s, "t", i), 0, int64(10+i))
	}
}

// TestFlushSyncsClosedFiles: the first flush after a reopen makes the
// recovered units durable although recovery left every file closed (the
// page cache may hold what a crashed process wrote): it opens them to sync.
func TestFlushSyncsClosedFiles(t *testing.T) {
	root := t.TempDir()
	s := openGrowing(t, root, 100, 8)
	putRange(t, mustQueue(t, s, "t", 0), 0, 30)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(root, Options{UnitsPerFile: 100, FirstFileUnits: 8, SyncFSAbove: -1}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := mustQueue(t, s, "t", 0)
	if s.OpenFiles() != 0 || !q.dirty() {
		t.Fatalf("after recovery: %d files open, dirty %v", s.OpenFiles(), q.dirty())
	}
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if q.dirty() || q.flushed.Load() != 30 {
		t.Fatalf("after the flush: dirty %v, flushed to %d", q.dirty(), q.flushed.Load())
	}
}

// TestFlushBelowDefers: with many queues dirty, FlushBelow leaves the few
// staged units of a queue staged while they point at or above keepFrom,
// writes the rest (a queue with a page of units, or units below keepFrom),
// and says where the first unit left staged points.
func TestFlushBelowDefers(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, Options{UnitsPerFile: 1000, FirstFileUnits: 8, SyncFSAbove: 2}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	busy := mustQueue(t, s, "t", 0)
	putRange(t, busy, 0, 300) // more than a page staged
	light := make([]*Queue, 5)
	for i := range light {
		light[i] = mustQueue(t, s, "t", int32(i+1))
		putRange(t, light[i], 0, 3)
	}
	// The new files' directory entries are written out with the first flush.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, q := range light {
		putRange(t, q, 3, 5)
	}
	putRange(t, busy, 300, 600)
	kept, err := s.FlushBelow(0)
	if err != nil {
		t.Fatal(err)
	}
	if kept != unitFor(3).Offset {
		t.Fatalf("FlushBelow(0) kept units from %d, want %d", kept, unitFor(3).Offset)
	}
	if busy.dirty() {
		t.Fatal("the queue with a page of units was left staged")
	}
	for _, q := range light {
		if !q.dirty() || q.flushed.Load() != 3 {
			t.Fatalf("%s: dirty %v, flushed to %d; want its two new units left staged", q, q.dirty(), q.flushed.Load())
		}
		checkRange(t, q, 0, 5)
	}
	// Units below keepFrom are written whatever their number.
	kept, err = s.FlushBelow(unitFor(4).Offset)
	if err != nil || kept != math.MaxInt64 {
		t.Fatalf("FlushBelow above the staged units: %d, %v", kept, err)
	}
	for _, q := range s.Queues() {
		if q.dirty() {
			t.Fatalf("%s still dirty", q)
		}
	}
}

// TestRootGivenRelative: a store whose root is given relative to the
// working directory, not cleaned, opens its files relative to the root's
// descriptor and reads back what it wrote after its descriptors were
// closed, also reopened from a new working directory.
func TestRootGivenRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	root := "./stores/../cq/"
	s, err := Open(root, Options{UnitsPerFile: 100, FirstFileUnits: 8, MaxOpenFiles: 2, SyncFSAbove: -1}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range int32(4) {
		putRange(t, mustQueue(t, s, "t", i), 0, 30)
	}
	for range 2 { // the second closes every descriptor
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.OpenFiles(); n != 0 {
		t.Fatalf("%d files open", n)
	}
	t.Chdir(t.TempDir()) // the root's descriptor still finds the files
	for i := range int32(4) {
		checkRange(t, mustQueue(t, s, "t", i), 0, 30)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cq", "t", "3", fileName(0))); err != nil {
		t.Fatal(err)
	}
}
