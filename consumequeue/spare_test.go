package consumequeue

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// fill writes a ballast file in dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestSpareOnFullDisk: a queue that needs a new file on a full disk gets it
// from Options.Spare; without Spare, Put fails with a no-space error and
// the queue is unchanged.
func TestSpareOnFullDisk(t *testing.T) {
	root := testutil.MountTmpfs(t, "1m")
	const upf = 1000 // 20 000-byte files
	spare := filepath.Join(root, "spare")
	f, err := os.Create(spare)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsutil.Preallocate(f, upf*UnitSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var asked []string
	opts := Options{UnitsPerFile: upf, Spare: func(path string, size int64) (*os.File, error) {
		asked = append(asked, path)
		if size != upf*UnitSize || len(asked) > 1 {
			return nil, errors.New("no spare")
		}
		if err := os.Rename(spare, path); err != nil {
			return nil, err
		}
		return os.OpenFile(path, os.O_RDWR, 0)
	}}
	s, err := Open(filepath.Join(root, "cq"), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := mustQueue(t, s, "t", 0)
	if !q.NeedsFile(0) {
		t.Fatal("an empty queue needs no file")
	}
	if err := q.Prepare(); err != nil {
		t.Fatal(err)
	}
	fill(t, root)

	putRange(t, q, 0, upf) // the first file comes from the spare, ...
	if len(asked) != 1 || q.NeedsFile(upf-1) || !q.NeedsFile(upf) {
		t.Fatalf("spare asked for %v; NeedsFile(%d) = %v, NeedsFile(%d) = %v",
			asked, upf-1, q.NeedsFile(upf-1), upf, q.NeedsFile(upf))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, upf)
	// ... the second one from nowhere: no room, no spare left.
	if err := q.Put(upf, unitFor(upf)); !fsutil.IsNoSpace(err) {
		t.Fatalf("Put needing a file on a full disk without a spare: %v", err)
	}
	checkRange(t, q, 0, upf)
}
