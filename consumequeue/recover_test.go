package consumequeue

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// crashStore writes units [0, n) of t/0 with UnitsPerFile 10 and closes the
// store, returning the root and the queue directory.
func crashStore(t *testing.T, n int64) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	s := openStore(t, root, 10)
	putRange(t, mustQueue(t, s, "t", 0), 0, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return root, filepath.Join(root, "t", "0")
}

func reopenQueue(t *testing.T, root string) *Queue {
	t.Helper()
	s := openStore(t, root, 10)
	q, ok := s.Lookup("t", 0)
	if !ok {
		t.Fatal("queue t/0 not recovered")
	}
	return q
}

func TestRecoverShortLastFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64 // bytes left in the last file (units 20..27 were written)
		want int64 // recovered max offset
	}{
		{"cut mid unit", 5*UnitSize + 7, 25},
		{"cut on unit boundary", 3 * UnitSize, 23},
		{"cut inside size field", 2*UnitSize + 10, 22},
		{"cut to nothing", 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dir := crashStore(t, 28)
			last := filepath.Join(dir, fileName(400))
			if err := os.Truncate(last, tc.size); err != nil {
				t.Fatal(err)
			}
			q := reopenQueue(t, root)
			checkRange(t, q, 0, tc.want)
			st, err := os.Stat(last)
			if tc.want == 20 {
				// The emptied trailing file is removed; the next Put recreates it.
				if !os.IsNotExist(err) {
					t.Fatalf("empty trailing file still there: %v", err)
				}
			} else if err != nil || st.Size() != 200 {
				t.Fatalf("last file not re-extended: %v %v", st, err)
			}
			putRange(t, q, tc.want, 33)
			checkRange(t, q, 0, 33)
		})
	}
}

func TestRecoverEmptyLastFiles(t *testing.T) {
	root, dir := crashStore(t, 15)
	// A crash after creating files that were never written to.
	for _, start := range []int64{400, 600} {
		if err := os.WriteFile(filepath.Join(dir, fileName(start)), make([]byte, 200), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := reopenQueue(t, root)
	checkRange(t, q, 0, 15)
	if got := queueFiles(t, root, "t", "0"); len(got) != 2 {
		t.Fatalf("files = %v, want the two written ones", got)
	}
}

func TestRecoverFirstFileEmpty(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t", "0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fileName(0)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	q := reopenQueue(t, root)
	checkRange(t, q, 0, 0)
	putRange(t, q, 0, 3)
	checkRange(t, q, 0, 3)
}

func TestRecoverZeroesStaleTail(t *testing.T) {
	root, dir := crashStore(t, 18)
	// Lose the unit at 13 (a page not written back) but keep 14..17.
	path := filepath.Join(dir, fileName(200))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(data[3*UnitSize : 4*UnitSize])
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	q := reopenQueue(t, root)
	checkRange(t, q, 0, 13)
	data, _ = os.ReadFile(path)
	if !allZero(data[3*UnitSize:]) {
		t.Fatal("stale units past the end were not zeroed")
	}
	// New units at 13.. must not be followed by the stale 14..17 after a restart.
	if err := q.Put(13, unitFor(13)); err != nil {
		t.Fatal(err)
	}
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	q = reopenQueue(t, root)
	checkRange(t, q, 0, 14)
}

func TestRecoverSkipsStrayEntries(t *testing.T) {
	root, dir := crashStore(t, 12)
	for _, p := range []string{
		filepath.Join(dir, "00000000000000000200.tmp"),
		filepath.Join(dir, "notes"),
		filepath.Join(root, "t", "abc"),
		filepath.Join(root, "t", "007"),
		filepath.Join(root, "README"),
	} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "t", "-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, root, 10)
	if got := s.Queues(); len(got) != 1 || got[0].String() != "t/0" {
		t.Fatalf("queues = %v", got)
	}
	q, _ := s.Lookup("t", 0)
	checkRange(t, q, 0, 12)
}

func TestRecoverRejectsBadLayouts(t *testing.T) {
	t.Run("UnitsPerFile changed", func(t *testing.T) {
		root, _ := crashStore(t, 25)
		if _, err := Open(root, Options{UnitsPerFile: 20}, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with other UnitsPerFile = %v, want ErrCorrupt", err)
		}
		if _, err := Open(root, Options{UnitsPerFile: 5}, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with smaller UnitsPerFile = %v, want ErrCorrupt", err)
		}
	})
	t.Run("missing middle file", func(t *testing.T) {
		root, dir := crashStore(t, 25)
		if err := os.Remove(filepath.Join(dir, fileName(200))); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(root, Options{UnitsPerFile: 10}, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with a gap = %v, want ErrCorrupt", err)
		}
	})
}

func TestRecoverAfterDeleteBeforeCrash(t *testing.T) {
	// A crash in the middle of DeleteBefore leaves a contiguous suffix.
	root, dir := crashStore(t, 35)
	if err := os.Remove(filepath.Join(dir, fileName(0))); err != nil {
		t.Fatal(err)
	}
	q := reopenQueue(t, root)
	checkRange(t, q, 10, 35)
	want := []string{fileName(200), fileName(400), fileName(600)}
	if got := queueFiles(t, root, "t", "0"); !reflect.DeepEqual(got, want) {
		t.Fatalf("files = %v", got)
	}
}
