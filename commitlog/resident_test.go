package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/mmap"
)

func mappedRSS(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := mmap.ResidentUnder(dir)
	if err != nil {
		t.Skip(err)
	}
	return n
}

// TestReleaseResident: records read through the mapping count in the
// process's RSS until ReleaseResident drops them; they read back the same
// afterwards.
func TestReleaseResident(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir, m.flush, m.write)
			o.SegmentSize = 2 << 20
			l := openTestLog(t, o, 0)
			recs := fillLog(t, l, 6000) // about 3.5 MiB: two segments
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			checkRecords(t, l, recs)
			before := mappedRSS(t, dir)
			if before < 3<<20 {
				t.Fatalf("only %d bytes of the log resident after reading it all", before)
			}
			n, err := l.ReleaseResident(l.MaxOffset())
			if err != nil || n < l.MaxOffset() {
				t.Fatalf("released %d bytes (log %d): %v", n, l.MaxOffset(), err)
			}
			after := mappedRSS(t, dir)
			// The pages made writable ahead of the writer stay: up to
			// PopulateAhead, within its segment.
			ahead := int64(0)
			if l.WriteMode() == WriteMmap {
				end := l.MaxOffset()
				ahead = min(PopulateAhead, (end/o.SegmentSize+1)*o.SegmentSize-end) + pageSize
			}
			if after > before/4+ahead {
				t.Fatalf("resident %d bytes before, %d after the release", before, after)
			}
			t.Logf("resident: %d KiB before, %d KiB after", before>>10, after>>10)
			checkRecords(t, l, recs)
			more := fillLog(t, l, 100)
			checkRecords(t, l, more)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.ReleaseResident(1 << 20); err != ErrClosed {
				t.Fatalf("release after close: %v", err)
			}
		})
	}
}

// TestReleaseResidentWithRetentionAndAppends: releases running beside sync
// appends and retention removing segments neither fail nor touch a segment
// after it is gone (the race detector and the mapping checks would show
// it), and every record still in the log reads back.
func TestReleaseResidentWithRetentionAndAppends(t *testing.T) {
	o := testOptions(t.TempDir(), FlushSync, WritePwrite)
	o.SegmentSize = 256 << 10
	l := openTestLog(t, o, 0)
	fillLog(t, l, 4000) // many segments; retention removes at most five
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.ReleaseResident(l.MaxOffset()); err != nil {
				errs <- fmt.Errorf("release: %w", err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		policy := RetentionPolicy{MaxAge: time.Nanosecond, DeleteHours: nil, HighWaterRatio: 0, MaxPerRun: 1}
		for range 5 {
			time.Sleep(5 * time.Millisecond)
			// Expired by age, deleted at any hour once the disk is "full".
			if _, err := l.DeleteExpired(time.Now().Add(time.Hour), policy); err != nil {
				errs <- fmt.Errorf("retention: %w", err)
				return
			}
		}
	}()
	recs := fillLog(t, l, 1000)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(l.Segments()) == 0 || l.MinOffset() == 0 {
		t.Fatalf("retention removed nothing (min offset %d)", l.MinOffset())
	}
	checkRecords(t, l, recs)
}

// openPreadLog opens an async pwrite log of 2 MiB segments in dir.
func openPreadLog(t *testing.T, dir string) *Log {
	o := testOptions(dir, FlushAsync, WritePwrite)
	o.SegmentSize = 2 << 20
	return openTestLog(t, o, 0)
}

// TestPreadRecord: records behind the resident tail read back with pread
// exactly as through the mapping, without mapping their pages again, with
// or without a size hint; offsets that are not a readable record are
// refused.
func TestPreadRecord(t *testing.T) {
	dir := t.TempDir()
	l := openPreadLog(t, dir)
	recs := fillLog(t, l, 6000)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReleaseResident(l.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if l.ResidentFrom() != l.MaxOffset() {
		t.Fatalf("ResidentFrom = %d, want %d", l.ResidentFrom(), l.MaxOffset())
	}
	before := mappedRSS(t, dir)
	for i, a := range recs {
		var hint []byte
		switch i % 3 {
		case 1:
			hint = make([]byte, 0, 64) // smaller than the record: two reads
		case 2:
			hint = make([]byte, 3, a.res.Size+3) // exact, after a prefix
		}
		got, err := l.PreadRecord(a.res.PhysicalOffset, hint)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		got = got[len(hint):]
		want, err := l.ReadRecord(a.res.PhysicalOffset, nil)
		if err != nil || !bytes.Equal(got, want) || len(got) != int(a.res.Size) {
			t.Fatalf("record %d: pread %d bytes, mapping %d (%v)", i, len(got), len(want), err)
		}
		if _, err := l.ReleaseResident(l.MaxOffset()); err != nil { // drop what ReadRecord mapped
			t.Fatal(err)
		}
	}
	if after := mappedRSS(t, dir); after > before+64<<10 {
		t.Fatalf("resident %d bytes before the preads, %d after", before, after)
	}
	for _, off := range []int64{recs[5].res.PhysicalOffset + 1, l.MaxOffset(), -1, 1 << 40} {
		if _, err := l.PreadRecord(off, nil); !errors.Is(err, ErrOffset) {
			t.Fatalf("PreadRecord(%d) = %v, want ErrOffset", off, err)
		}
	}
}

// TestPreadRecords: a mix of neighbouring and scattered offsets, in any
// order, with bad ones among them, reads back exactly as ReadRecord does,
// each offset answered once; again, and from two callers at once, with
// the span buffers of earlier calls.
func TestPreadRecords(t *testing.T) {
	l := openPreadLog(t, t.TempDir())
	recs := fillLog(t, l, 3000)
	// A record longer than a span's guess, between short ones.
	big := appendOne(t, l, record(t, "T", 1, bytes.Repeat([]byte{7}, 6000)))
	recs = append(recs, big, appendOne(t, l, record(t, "T", 2, []byte("after"))))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i := len(recs) - 3; i >= 0; i -= 1 + i%7 { // runs of neighbours and gaps, newest first
		offs = append(offs, recs[i].res.PhysicalOffset)
	}
	// The long record last in its span: read again on its own.
	offs = append(offs, big.res.PhysicalOffset, recs[0].res.PhysicalOffset)
	bad := []int64{recs[10].res.PhysicalOffset + 3, l.MaxOffset(), -5}
	offs = append(offs, bad...)
	check := func(offs []int64, bad int) { checkPreadRecords(t, l, offs, bad) }
	check(offs, len(bad))
	// Other records through the buffers the first call gave back.
	var odd, even []int64
	for i := range recs {
		if i%2 == 0 {
			even = append(even, recs[i].res.PhysicalOffset)
		} else {
			odd = append(odd, recs[i].res.PhysicalOffset)
		}
	}
	check(odd, 0)
	var wg sync.WaitGroup
	for _, offs := range [][]int64{even, odd} {
		wg.Go(func() { check(offs, 0) })
	}
	wg.Wait()
}

// checkPreadRecords reads offs with PreadRecords and checks that each is
// answered once, the last bad of them with ErrOffset and the others with
// the record ReadRecord reads from the mapping.
func checkPreadRecords(t *testing.T, l *Log, offs []int64, bad int) {
	t.Helper()
	seen := make([]int, len(offs))
	l.PreadRecords(offs, func(i int, rec []byte, err error) {
		seen[i]++
		if i >= len(offs)-bad {
			if !errors.Is(err, ErrOffset) {
				t.Errorf("offset %d: %v, want ErrOffset", offs[i], err)
			}
			return
		}
		want, werr := l.ReadRecord(offs[i], nil)
		if err != nil || werr != nil || !bytes.Equal(rec, want) {
			t.Errorf("offset %d: pread %d bytes (%v), mapping %d bytes (%v)", offs[i], len(rec), err, len(want), werr)
		}
	})
	for i, n := range seen {
		if n != 1 {
			t.Errorf("offset %d answered %d times", offs[i], n)
		}
	}
}
