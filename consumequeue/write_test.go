package consumequeue

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// crashCopy copies root as the files stand now (what a kill -9 would leave:
// the page cache survives, the process's memory does not), while the
// store stays open.
func crashCopy(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

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
	checkRange(t, mustQueue(t, openStore(t, crashCopy(t, root), 10), "t", 0), 0, 25)

	// A cut inside the staged units trims the stage only.
	if err := q.TruncateAfter(unitFor(28).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 28)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, mustQueue(t, openStore(t, crashCopy(t, root), 10), "t", 0), 0, 28)

	// A cut below the written end zeroes the file and drops the stage.
	putRange(t, q, 28, 31)
	if err := q.TruncateAfter(unitFor(22).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 22)
	checkRange(t, mustQueue(t, openStore(t, crashCopy(t, root), 10), "t", 0), 0, 22)
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
	checkRange(t, mustQueue(t, openStore(t, crashCopy(t, root), 10), "t", 0), 20, 27)
}
