package consumequeue

import (
	"testing"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestStagedUnitsReachTheFileAtFlush: units are readable as soon as they
// are put, reach the files only at Flush, and a crash keeps exactly what
// was flushed, including after truncations that cut into the written part
// and into the staged part.
func TestStagedUnitsReachTheFileAtFlush(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 25)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 25, 33) // staged, across a file boundary
	checkRange(t, q, 0, 33)
	checkRange(t, crashedQueue(t, root), 0, 25)

	// A cut inside the staged units trims the stage only.
	if err := q.TruncateAfter(unitFor(28).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 28)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, crashedQueue(t, root), 0, 28)

	// A cut below the written end zeroes the file and drops the stage.
	putRange(t, q, 28, 31)
	if err := q.TruncateAfter(unitFor(22).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 22)
	checkRange(t, crashedQueue(t, root), 0, 22)
	putRange(t, q, 22, 26)
	checkRange(t, q, 0, 26)
	if err := s.Close(); err != nil { // a clean close writes the stage
		t.Fatal(err)
	}
	checkRange(t, mustQueue(t, openStore(t, root, 10), "t", 0), 0, 26)
}

// TestDeleteBeforeDropsStagedUnits: deleting files whose units are still
// staged drops those units with them; the next flush writes only the rest.
func TestDeleteBeforeDropsStagedUnits(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 5)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 5, 27) // 5..26 staged, files 0, 1, 2
	if n, err := q.DeleteBefore(unitFor(19).End()); err != nil || n != 2 {
		t.Fatalf("DeleteBefore = %d, %v; want 2 files", n, err)
	}
	checkRange(t, q, 20, 27)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, crashedQueue(t, root), 20, 27)
}

// TestStageShrinksAfterABurst: between flushes the stage keeps about what
// its last interval needed, not what a past burst did.
func TestStageShrinksAfterABurst(t *testing.T) {
	q := mustQueue(t, openStore(t, t.TempDir(), 100_000), "t", 0)
	stageCap := func() int {
		q.mu.RLock()
		defer q.mu.RUnlock()
		return cap(q.stage)
	}
	putRange(t, q, 0, 20_000) // 400 KB staged
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if c := stageCap(); c < 20_000*UnitSize {
		t.Fatalf("stage of %d bytes after a busy interval of 400 000", c)
	}
	putRange(t, q, 20_000, 20_010)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if c := stageCap(); c > 2*stageKeep {
		t.Fatalf("stage of %d bytes after a quiet interval", c)
	}
	checkRange(t, q, 0, 20_010)
}

// crashedQueue opens queue t/0 of a crash copy of the store in root (what
// a kill -9 would leave on disk now).
func crashedQueue(t *testing.T, root string) *Queue {
	t.Helper()
	return mustQueue(t, openStore(t, testutil.CrashCopy(t, root), 10), "t", 0)
}
