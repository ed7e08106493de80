package commitlog

import (
	"testing"

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
			if after > before/4 {
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
