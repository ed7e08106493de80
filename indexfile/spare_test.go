package indexfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestSpareOnFullDisk: on a full disk the index takes a new file from
// Options.Spare; with no spare left, Put fails with a no-space error and
// what is indexed stays queryable. Room counts the entries left before a
// new file is needed.
func TestSpareOnFullDisk(t *testing.T) {
	root := testutil.MountTmpfs(t, "1m")
	opts := Options{SlotCount: 10, MaxEntries: 100}
	spare := filepath.Join(root, "spare")
	f, err := os.Create(spare)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsutil.Preallocate(f, opts.FileSize()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	asked := 0
	opts.Spare = func(path string, size int64) (*os.File, error) {
		if asked++; size != opts.FileSize() || asked > 1 {
			return nil, errors.New("no spare")
		}
		if err := os.Rename(spare, path); err != nil {
			return nil, err
		}
		return os.OpenFile(path, os.O_RDWR, 0)
	}
	s := openTest(t, filepath.Join(root, "index"), opts)
	defer s.Close()
	if s.Room() != 0 {
		t.Fatalf("Room of an empty store = %d", s.Room())
	}
	f, err = os.Create(filepath.Join(root, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	for i := 0; i < 99; i++ { // a file holds MaxEntries-1 entries
		if err := s.Put(fmt.Sprintf("t#k%d", i), int64(i*100), 1_000_000+int64(i)); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
		if got := s.Room(); got != int64(98-i) {
			t.Fatalf("Room after %d entries = %d", i+1, got)
		}
	}
	if asked != 1 || s.Files() != 1 {
		t.Fatalf("spare asked %d times, %d files", asked, s.Files())
	}
	if err := s.Put("t#k99", 9900, 1_000_099); !fsutil.IsNoSpace(err) {
		t.Fatalf("Put needing a second file on a full disk without a spare: %v", err)
	}
	if got, err := s.Query("t#k42", 0, 2_000_000, 4); err != nil || len(got) != 1 || got[0] != 4200 {
		t.Fatalf("Query after the failed Put: %v %v", got, err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}
