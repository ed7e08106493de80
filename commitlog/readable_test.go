package commitlog

import (
	"context"
	"testing"
)

// fired reports whether ch is closed.
func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// With AppendersDispatch, appends through AppendBatch leave ReadableChanged
// quiet (their appender hands the records on itself) while they are
// readable at once; replicated bytes (AppendRaw) still fire it, so does
// truncation's new end; without the option every append fires it.
func TestAppendersDispatchQuietReadable(t *testing.T) {
	src := openTestLog(t, DefaultOptions(t.TempDir()), 0)
	fillLog(t, src, 3)

	for _, quiet := range []bool{false, true} {
		opts := DefaultOptions(t.TempDir())
		opts.AppendersDispatch = quiet
		l := openTestLog(t, opts, 0)

		ch := l.ReadableChanged()
		r := appendOne(t, l, sizedRecord(t, "T", 0, 200, 'a'))
		if l.Readable() != r.res.End() {
			t.Fatalf("quiet=%v: readable %d after an append ending at %d", quiet, l.Readable(), r.res.End())
		}
		if got := fired(ch); got == quiet {
			t.Fatalf("quiet=%v: ReadableChanged fired %v after a local append", quiet, got)
		}

		// A replica's log: raw bytes always announce themselves, also
		// after a local append set the quiet end beyond them.
		opts = DefaultOptions(t.TempDir())
		opts.AppendersDispatch = quiet
		rl := openTestLog(t, opts, 0)
		chunk, next, err := src.ReadChunk(0, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch = rl.ReadableChanged()
		if _, err := rl.AppendRaw(context.Background(), 0, chunk); err != nil {
			t.Fatal(err)
		}
		if !fired(ch) || rl.Readable() != next {
			t.Fatalf("quiet=%v: AppendRaw up to %d: fired %v, readable %d", quiet, next, fired(ch), rl.Readable())
		}
	}
}

// After truncation below the quiet end, bytes up to the old end are
// announced again when something other than a local append brings them.
func TestAppendersDispatchTruncateResetsQuietEnd(t *testing.T) {
	opts := DefaultOptions(t.TempDir())
	opts.AppendersDispatch = true
	l := openTestLog(t, opts, 0)
	first := appendOne(t, l, sizedRecord(t, "T", 0, 200, 'a'))
	appendOne(t, l, sizedRecord(t, "T", 0, 200, 'b'))
	if l.quietEnd.Load() != l.MaxOffset() {
		t.Fatalf("quiet end %d, log end %d", l.quietEnd.Load(), l.MaxOffset())
	}
	if err := l.Truncate(first.res.End()); err != nil {
		t.Fatal(err)
	}
	if l.quietEnd.Load() != 0 {
		t.Fatalf("quiet end %d after truncation to %d", l.quietEnd.Load(), first.res.End())
	}
}
