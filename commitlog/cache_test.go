package commitlog

import (
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cachedBytes counts the bytes of [lo, hi) of the file at path that are in
// the page cache (mincore over a mapping of its own).
func cachedBytes(t *testing.T, path string, lo, hi int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	page := int64(os.Getpagesize())
	vec := make([]byte, (st.Size()+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Skip(errno)
	}
	var n int64
	for p := lo / page; p < (hi+page-1)/page && p < int64(len(vec)); p++ {
		if vec[p]&1 != 0 {
			n += page
		}
	}
	return n
}

// TestCacheWindow: with a CacheWindow, the log drops what lies more than
// the window behind its flushed end from the page cache on its own, keeps
// the window's bytes cached, and every record still reads back.
func TestCacheWindow(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			o := testOptions(t.TempDir(), m.flush, m.write)
			// The records are read back only after the page cache is
			// checked: the loop may drop the first segment while the log is
			// still being filled, and reading it would cache it again.
			l, recs, want := fillBehindWindow(t, o)
			l.segMu.RLock()
			segs := slices.Clone(l.segs)
			l.segMu.RUnlock()
			first := segs[0]
			if got := cachedBytes(t, first.path, 0, first.size); got > 64<<10 {
				t.Errorf("%d KiB of the first segment (all behind the window) still cached", got>>10)
			}
			last := segs[len(segs)-1]
			inWindow := l.FlushedOffset() - max(want, last.start)
			if got := cachedBytes(t, last.path, max(want, last.start)-last.start, l.FlushedOffset()-last.start); got < inWindow/2 {
				t.Errorf("%d of the window's last %d bytes cached", got, inWindow)
			}
			checkRecords(t, l, recs)
			checkRecords(t, l, fillLog(t, l, 100))
		})
	}
}

// fillBehindWindow opens a log of 2 MiB segments with a 1 MiB CacheWindow,
// fills it with about 3.5 MiB of records, flushes it and waits until the
// log has dropped from the page cache all it should (want, the flushed end
// less the window).
func fillBehindWindow(t *testing.T, o Options) (l *Log, recs []appended, want int64) {
	t.Helper()
	o.SegmentSize = 2 << 20
	o.CacheWindow = 1 << 20
	l = openTestLog(t, o, 0)
	recs = fillLog(t, l, 6000)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want = l.FlushedOffset() - o.CacheWindow
	for deadline := time.Now().Add(10 * time.Second); l.ResidentFrom() < want || l.CacheFrom() < want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dropped below %d (page cache %d) after 10 s, want %d", l.ResidentFrom(), l.CacheFrom(), want)
		}
	}
	return l, recs, want
}
