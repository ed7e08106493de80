package commitlog

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// retentionNow is the fake clock of the retention tests: 04:30 local time.
var retentionNow = time.Date(2024, 5, 1, 4, 30, 0, 0, time.Local)

// retentionLog returns a flushed log of at least n segments and its records.
func retentionLog(t *testing.T, opts Options, n int) (*Log, []appended) {
	t.Helper()
	opts.Now = func() time.Time { return retentionNow }
	l := openTestLog(t, opts, 0)
	var recs []appended
	for len(l.Segments()) < n {
		recs = append(recs, fillLog(t, l, 50)...)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l, recs
}

// setAges sets segment i's modification time to retentionNow minus ages[i]
// (segments already deleted are skipped).
func setAges(t *testing.T, segs []SegmentInfo, ages ...time.Duration) {
	t.Helper()
	for i, age := range ages {
		if _, err := os.Stat(segs[i].Path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		mt := retentionNow.Add(-age)
		if err := os.Chtimes(segs[i].Path, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

func policy(hours ...int) RetentionPolicy {
	return RetentionPolicy{MaxAge: time.Hour, DeleteHours: hours, HighWaterRatio: 0.99, MaxPerRun: 10}
}

// checkRetained checks MinOffset, that records below it are gone (ErrOffset)
// and those above still read and scan.
func checkRetained(t *testing.T, l *Log, recs []appended, minOff int64) {
	t.Helper()
	if l.MinOffset() != minOff {
		t.Fatalf("MinOffset %d, want %d", l.MinOffset(), minOff)
	}
	var kept []appended
	for _, a := range recs {
		if a.res.PhysicalOffset >= minOff {
			kept = append(kept, a)
			continue
		}
		if _, err := l.ReadRecord(a.res.PhysicalOffset, nil); !errors.Is(err, ErrOffset) {
			t.Fatalf("read of deleted record at %d: %v, want ErrOffset", a.res.PhysicalOffset, err)
		}
	}
	if len(kept) == len(recs) {
		t.Fatal("nothing was deleted")
	}
	checkRecords(t, l, kept)
	checkScan(t, l, minOff, kept)
	if _, err := l.Scan(0, l.MaxOffset(), func(int64, []byte) error { return nil }); !errors.Is(err, ErrOffset) {
		t.Fatalf("scan from 0 after retention: %v, want ErrOffset", err)
	}
	if _, _, err := l.ReadChunk(0, 64, nil); !errors.Is(err, ErrOffset) {
		t.Fatalf("ReadChunk below MinOffset: %v", err)
	}
	for start := range segmentFiles(t, l.Options().Dir) {
		if start < minOff {
			t.Fatalf("segment file %s below MinOffset %d is still there", SegmentName(start), minOff)
		}
	}
}

// TestRetentionDeleteHours: in a delete hour the oldest expired segments go;
// an unexpired segment stops the walk even if older ones follow it; the
// active segment is never deleted.
func TestRetentionDeleteHours(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			l, recs := retentionLog(t, testOptions(t.TempDir(), m.flush, m.write), 5)
			segs := l.Segments()
			old, fresh := 3*time.Hour, 10*time.Minute
			ages := make([]time.Duration, len(segs))
			for i := range ages {
				ages[i] = old
			}
			ages[2] = fresh // segment 2 has not expired; 3 and later have
			setAges(t, segs, ages...)

			// Outside the delete hours, below the high-water mark: nothing.
			if n, err := l.DeleteExpired(retentionNow, policy(retentionNow.Hour()+1)); err != nil || n != 0 {
				t.Fatalf("outside the delete hours: deleted %d, %v", n, err)
			}
			if n, err := l.DeleteExpired(retentionNow, policy()); err != nil || n != 0 {
				t.Fatalf("no delete hours: deleted %d, %v", n, err)
			}
			// In the hour: 0 and 1 go, 2 stops the walk.
			n, err := l.DeleteExpired(retentionNow, policy(retentionNow.Hour()))
			if err != nil || n != 2 {
				t.Fatalf("deleted %d (%v), want 2", n, err)
			}
			checkRetained(t, l, recs, segs[2].Start)

			// Once 2 expires the walk goes on up to the active segment.
			ages[2] = old
			setAges(t, segs, ages...)
			n, err = l.DeleteExpired(retentionNow, policy(retentionNow.Hour()))
			if err != nil || n != len(segs)-3 {
				t.Fatalf("deleted %d (%v), want %d", n, err, len(segs)-3)
			}
			last := segs[len(segs)-1]
			checkRetained(t, l, recs, last.Start)
			if got := l.Segments(); len(got) != 1 || got[0].Start != last.Start {
				t.Fatalf("segments left: %+v", got)
			}
			// The log goes on and survives a reopen.
			extra := fillLog(t, l, 10)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openTestLog(t, l.Options(), 0)
			if l2.MinOffset() != last.Start || l2.Recovery().Torn {
				t.Fatalf("reopen: min %d, %+v", l2.MinOffset(), l2.Recovery())
			}
			checkRecords(t, l2, extra)
		})
	}
}

// TestRetentionHighWater: outside the delete hours expired segments go only
// above the high-water ratio; unexpired ones never go, however full the
// disk; MaxPerRun bounds one run.
func TestRetentionHighWater(t *testing.T) {
	l, recs := retentionLog(t, testOptions(t.TempDir(), FlushAsync, WriteMmap), 6)
	segs := l.Segments()
	setAges(t, segs, 3*time.Hour, 3*time.Hour, 10*time.Minute, 10*time.Minute, 10*time.Minute, 10*time.Minute)
	outside := retentionNow.Hour() + 1

	p := policy(outside)
	if n, err := l.DeleteExpired(retentionNow, p); err != nil || n != 0 {
		t.Fatalf("below high water: deleted %d, %v", n, err)
	}
	p.HighWaterRatio = 0.0001 // any real disk is above it
	n, err := l.DeleteExpired(retentionNow, p)
	if err != nil || n != 2 {
		t.Fatalf("above high water: deleted %d (%v), want the 2 expired", n, err)
	}
	checkRetained(t, l, recs, segs[2].Start)

	if n, err := l.DeleteExpired(retentionNow, p); err != nil || n != 0 {
		t.Fatalf("above high water: deleted %d unexpired segments (%v)", n, err)
	}
	checkRetained(t, l, recs, segs[2].Start)

	setAges(t, segs[2:], 3*time.Hour, 3*time.Hour, 3*time.Hour, 3*time.Hour)
	p.MaxPerRun = 1
	if n, err := l.DeleteExpired(retentionNow, p); err != nil || n != 1 {
		t.Fatalf("MaxPerRun 1: deleted %d, %v", n, err)
	}
	checkRetained(t, l, recs, segs[3].Start)
	p.MaxPerRun = 10
	n, err = l.DeleteExpired(retentionNow, p)
	if err != nil || n != len(segs)-4 {
		t.Fatalf("deleted %d (%v), want %d (all but the active one)", n, err, len(segs)-4)
	}
	checkRetained(t, l, recs, segs[len(segs)-1].Start)
}

// TestRetentionKeepsUnflushed: a segment that is not fully flushed is never
// deleted, however old.
func TestRetentionKeepsUnflushed(t *testing.T) {
	opts := testOptions(t.TempDir(), FlushAsync, WriteMmap)
	opts.FlushInterval = time.Hour
	opts.FlushThoroughInterval = time.Hour
	opts.Now = func() time.Time { return retentionNow }
	l := openTestLog(t, opts, 0)
	var recs []appended
	for len(l.Segments()) < 4 {
		recs = append(recs, fillLog(t, l, 50)...)
	}
	if l.FlushedOffset() != 0 {
		t.Fatalf("flushed %d with the flusher idle", l.FlushedOffset())
	}
	segs := l.Segments()
	setAges(t, segs, 3*time.Hour, 3*time.Hour, 3*time.Hour, 3*time.Hour)
	p := policy(retentionNow.Hour())
	p.HighWaterRatio = 0.0001
	if n, err := l.DeleteExpired(retentionNow, p); err != nil || n != 0 {
		t.Fatalf("deleted %d unflushed segments (%v)", n, err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteExpired(retentionNow, p); err != nil || n != len(segs)-1 {
		t.Fatalf("after Flush: deleted %d (%v), want %d", n, err, len(segs)-1)
	}
	checkRetained(t, l, recs, segs[len(segs)-1].Start)
}

// TestRetentionPolicyValidate checks the policy's field checks.
func TestRetentionPolicyValidate(t *testing.T) {
	if err := DefaultRetention().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]RetentionPolicy{
		"max age":     {MaxAge: 0, HighWaterRatio: 0.5, MaxPerRun: 1},
		"hour":        {MaxAge: time.Hour, DeleteHours: []int{24}, HighWaterRatio: 0.5, MaxPerRun: 1},
		"ratio":       {MaxAge: time.Hour, HighWaterRatio: 1.5, MaxPerRun: 1},
		"max per run": {MaxAge: time.Hour, HighWaterRatio: 0.5},
	} {
		if p.Validate() == nil {
			t.Errorf("%s: invalid policy accepted", name)
		}
	}
}

// TestRetentionConcurrentWithAppendsAndReads: forced retention runs in a
// loop while appenders roll segments, readers read and Flush is called from
// several goroutines. Nothing may fault, no write may fail, and every read of
// a record at or above MinOffset must succeed or report ErrOffset.
func TestRetentionConcurrentWithAppendsAndReads(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts := testOptions(t.TempDir(), m.flush, m.write)
			opts.FlushInterval = time.Millisecond
			opts.FlushLeastPages = 0
			l := openTestLog(t, opts, 0)
			ctx := context.Background()
			p := RetentionPolicy{MaxAge: time.Nanosecond, HighWaterRatio: 0.0001, MaxPerRun: 10}
			stop := make(chan struct{})
			var bg sync.WaitGroup
			loop := func(fn func() error) {
				bg.Add(1)
				go func() {
					defer bg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := fn(); err != nil {
							t.Error(err)
							return
						}
						// Pacing, not waiting: leave the CPUs to the appenders.
						time.Sleep(50 * time.Microsecond)
					}
				}()
			}
			loop(func() error { _, err := l.DeleteExpired(time.Now(), p); return err })
			loop(l.Flush) // a second flusher besides the log's own
			var offs sync.Map
			loop(func() error {
				var err error
				offs.Range(func(k, _ any) bool {
					off := k.(int64)
					if _, rerr := l.ReadRecord(off, nil); rerr != nil && !errors.Is(rerr, ErrOffset) {
						err = rerr
						return false
					}
					return true
				})
				return err
			})
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 400; i++ {
						r, err := l.Append(ctx, record(t, "T", int32(w), make([]byte, 1500)))
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						if i%10 == 0 {
							offs.Store(r.PhysicalOffset, true)
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			bg.Wait()
			if err := l.Err(); err != nil {
				t.Fatalf("sticky error: %v", err)
			}
			if l.MinOffset() == 0 {
				t.Fatal("retention deleted nothing")
			}
		})
	}
}

// TestRetentionKeepsWhatIsAboveTheLimit: DeleteExpiredBelow keeps every
// segment ending above the limit (the store's dispatch position), expired
// or not.
func TestRetentionKeepsWhatIsAboveTheLimit(t *testing.T) {
	l, recs := retentionLog(t, testOptions(t.TempDir(), FlushAsync, WriteMmap), 4)
	segs := l.Segments()
	setAges(t, segs, 3*time.Hour, 3*time.Hour, 3*time.Hour, 3*time.Hour)
	p := policy(retentionNow.Hour())
	if n, err := l.DeleteExpiredBelow(retentionNow, p, segs[0].End-1); err != nil || n != 0 {
		t.Fatalf("limit inside the first segment: deleted %d, %v", n, err)
	}
	if l.MinOffset() != segs[0].Start {
		t.Fatalf("min offset %d after a run that deleted nothing", l.MinOffset())
	}
	if n, err := l.DeleteExpiredBelow(retentionNow, p, segs[1].End); err != nil || n != 2 {
		t.Fatalf("limit at the second segment's end: deleted %d (%v), want 2", n, err)
	}
	checkRetained(t, l, recs, segs[2].Start)
}
