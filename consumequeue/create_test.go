package consumequeue

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCreateMakesTheFirstFile: Create makes the directory and the first
// file of a queue that has neither, which the first Put then writes into,
// and does nothing to a queue that has a file or units.
func TestCreateMakesTheFirstFile(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 8)
	q := mustQueue(t, s, "t", 3)
	made, err := q.Create()
	if err != nil || !made {
		t.Fatalf("Create = %v, %v; want true, nil", made, err)
	}
	first := filepath.Join(root, "t", "3", fileName(0))
	st, err := os.Stat(first)
	if err != nil {
		t.Fatalf("first file: %v", err)
	}
	if _, size := q.FileFor(0); st.Size() != size {
		t.Fatalf("first file is %d bytes, want %d", st.Size(), size)
	}
	if q.NeedsFile(0) {
		t.Fatal("NeedsFile(0) after Create: the first Put would make the file again")
	}
	if q.MinOffset() != 0 || q.MaxOffset() != 0 {
		t.Fatalf("range after Create = [%d, %d), want empty at 0", q.MinOffset(), q.MaxOffset())
	}
	if made, err := q.Create(); err != nil || made {
		t.Fatalf("second Create = %v, %v; want false, nil", made, err)
	}
	putRange(t, q, 0, 5)
	checkRange(t, q, 0, 5)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}

	// A queue with units is left alone, also after a reopen.
	w := mustQueue(t, s, "t", 4)
	putRange(t, w, 0, 3)
	if made, err := w.Create(); err != nil || made {
		t.Fatalf("Create on a written queue = %v, %v; want false, nil", made, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, root, 8)
	q = mustQueue(t, s, "t", 3)
	checkRange(t, q, 0, 5)
	if made, err := q.Create(); err != nil || made {
		t.Fatalf("Create after reopen = %v, %v; want false, nil", made, err)
	}
	putRange(t, q, 5, 20) // on into later files
	checkRange(t, q, 0, 20)
}

// TestCreatedQueueStartsLater: a queue whose first file Create made, still
// empty, takes a first unit past offset 0 as a queue without files does
// (pre-blank units before it), rather than refusing it as a gap, before
// and after a reopen.
func TestCreatedQueueStartsLater(t *testing.T) {
	for _, tc := range []struct {
		name   string
		start  int64
		reopen bool
	}{
		{"in the first file", 3, false},
		{"past the first file", 20, false},
		{"in the first file, after a reopen", 5, true},
		{"past the first file, after a reopen", 17, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, root, 8)
			q := mustQueue(t, s, "t", 0)
			if made, err := q.Create(); err != nil || !made {
				t.Fatalf("Create = %v, %v", made, err)
			}
			if tc.reopen {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openStore(t, root, 8)
				q = mustQueue(t, s, "t", 0)
				if q.MaxOffset() != 0 || q.NeedsFile(0) {
					t.Fatalf("reopened: MaxOffset %d, NeedsFile(0) %v; want the empty first file", q.MaxOffset(), q.NeedsFile(0))
				}
			}
			// A second link keeps the first file's inode, so that a file
			// made anew in its place cannot pass for it.
			firstPath := filepath.Join(root, "t", "0", fileName(0))
			keep := filepath.Join(t.TempDir(), "first")
			if err := os.Link(firstPath, keep); err != nil {
				t.Fatal(err)
			}
			putRange(t, q, tc.start, tc.start+10)
			checkRange(t, q, tc.start, tc.start+10)
			if start, _ := q.FileFor(tc.start); start == 0 {
				// The file the planner counted on is kept, not made anew.
				before, err := os.Stat(keep)
				if err != nil {
					t.Fatal(err)
				}
				if after, err := os.Stat(firstPath); err != nil || !os.SameFile(before, after) {
					t.Fatalf("the first file was replaced (%v)", err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, root, 8)
			checkRange(t, mustQueue(t, s, "t", 0), tc.start, tc.start+10)
			if start, _ := q.FileFor(tc.start); start > 0 {
				if _, err := os.Stat(filepath.Join(root, "t", "0", fileName(0))); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the empty first file is still there (%v)", err)
				}
			}
		})
	}
}

// TestCreateOnClosedQueue: Create on a deleted topic's queue fails with
// ErrClosed and makes nothing.
func TestCreateOnClosedQueue(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 8)
	q := mustQueue(t, s, "gone", 0)
	if err := s.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Create(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Create on a closed queue: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(filepath.Join(root, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted topic's directory exists again (%v)", err)
	}
}
