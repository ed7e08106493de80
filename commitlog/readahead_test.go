package commitlog

import (
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestPrefetchFollowsReaders: Prefetch asks for ReadAhead bytes ahead of a
// reader, nothing more while the reader stays within ReadAhead/4 of what
// was asked for, follows several readers apart, and never asks past
// Readable, so a reader following the tail costs no more requests.
func TestPrefetchFollowsReaders(t *testing.T) {
	const ra = 64 << 10
	opts := testOptions(t.TempDir(), FlushAsync, WriteAuto)
	opts.ReadAhead = ra
	l := openTestLog(t, opts, 0)
	got := make(chan [2]int64, 100)
	l.ra.advised = func(from, to int64) { got <- [2]int64{from, to} }
	for range 300 {
		appendOne(t, l, sizedRecord(t, "T", 0, 4000, 'a'))
	}
	var want [][2]int64
	expect := func(from, to int64) { want = append(want, [2]int64{from, to}) }

	l.Prefetch(0, 1000) // a new reader: ReadAhead past what it reads
	expect(0, 1000+ra)
	l.Prefetch(1000, 2000) // inside what was asked for: nothing
	l.Prefetch(20000, 21000)
	expect(1000+ra, 21000+ra)  // ReadAhead/4 past: the next stretch
	l.Prefetch(600000, 601000) // a second reader, far ahead
	expect(600000, 601000+ra)
	l.Prefetch(30000, 31000) // the first again, less than ReadAhead/4 on

	r := l.Readable()
	l.Prefetch(r-100, r) // the tail: up to Readable only
	expect(r-100, r)
	l.Prefetch(r-100, r)
	l.Prefetch(r, r+5) // nothing readable there
	for range 3 {
		appendOne(t, l, sizedRecord(t, "T", 0, 4000, 'b'))
	}
	r2 := l.Readable()
	l.Prefetch(r, r2) // 12 000 bytes appended: below ReadAhead/4
	for range 2 {
		appendOne(t, l, sizedRecord(t, "T", 0, 4000, 'c'))
	}
	r3 := l.Readable()
	l.Prefetch(r2, r3)         // 20 000 appended, but none of it asked for ahead
	l.Prefetch(300000, 300001) // far from every reader: a new one
	expect(300000, 300001+ra)

	for i, w := range want {
		select {
		case g := <-got:
			if g != w {
				t.Fatalf("request %d: [%d, %d), want [%d, %d)", i, g[0], g[1], w[0], w[1])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d [%d, %d) not made", i, w[0], w[1])
		}
	}
	select {
	case g := <-got:
		t.Fatalf("unexpected request [%d, %d)", g[0], g[1])
	default:
	}
}

// TestPrefetchOff: a negative ReadAhead makes Prefetch do nothing.
func TestPrefetchOff(t *testing.T) {
	opts := testOptions(t.TempDir(), FlushAsync, WriteAuto)
	opts.ReadAhead = -1
	l := openTestLog(t, opts, 0)
	l.ra.advised = func(from, to int64) { t.Errorf("request [%d, %d) with read-ahead off", from, to) }
	appendOne(t, l, sizedRecord(t, "T", 0, 4000, 'a'))
	l.Prefetch(0, 4000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPrefetchReadsIntoPageCache: a reader's Prefetch on a log whose pages
// were dropped from the page cache makes the kernel read the next
// ReadAhead bytes, across segment ends, and not the rest of the log.
func TestPrefetchReadsIntoPageCache(t *testing.T) {
	const seg = 1 << 20
	dir := t.TempDir()
	opts := testOptions(dir, FlushAsync, WriteAuto)
	opts.SegmentSize = seg
	opts.ReadAhead = 2 << 20
	l := openTestLog(t, opts, 0)
	for l.MaxOffset() < 5*seg+seg/2 {
		appendOne(t, l, sizedRecord(t, "T", 0, 16000, 'x'))
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, opts, end) // nothing to verify: no page is read
	l.ra.advised = nil
	files := l.Segments()
	for _, s := range files {
		testutil.DropPageCache(t, s.Path)
	}
	for _, s := range files[1:3] {
		if n := testutil.ResidentBytes(t, s.Path, 0, -1); n > seg/4 {
			t.Skipf("%s: %d bytes still resident after POSIX_FADV_DONTNEED (a file system without a page cache of its own?)", s.Path, n)
		}
	}
	done := make(chan struct{}, 1)
	l.ra.advised = func(int64, int64) { done <- struct{}{} }
	l.Prefetch(seg, seg+16000) // a reader at the start of the second segment
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no read-ahead request")
	}
	// The kernel reads asynchronously: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, b := testutil.ResidentBytes(t, files[1].Path, 0, -1), testutil.ResidentBytes(t, files[2].Path, 0, -1)
		if a >= seg*9/10 && b >= seg*9/10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("segments 1 and 2: %d and %d bytes resident, want all %d", a, b, seg)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := testutil.ResidentBytes(t, files[4].Path, 0, -1); n > seg/2 {
		t.Fatalf("segment 4, past the read-ahead: %d bytes resident", n)
	}
}

// TestReadAheadChunk: one fadvise call asks for what the device's limits
// let the kernel read at once, within bounds; raMinChunk when the device
// is unknown.
func TestReadAheadChunk(t *testing.T) {
	dir := t.TempDir()
	c := raChunkFor(dir)
	if c < raMinChunk || c > raMaxChunk {
		t.Fatalf("chunk %d for %s, want within [%d, %d]", c, dir, raMinChunk, raMaxChunk)
	}
	t.Logf("%s: %d KiB per call", dir, c>>10)
	if c := raChunkFor(dir + "/missing"); c != raMinChunk {
		t.Fatalf("chunk %d for a missing directory, want %d", c, raMinChunk)
	}
}
