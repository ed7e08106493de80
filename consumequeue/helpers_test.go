package consumequeue

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

// unitFor is the unit the tests store at queue offset i: increasing,
// non-overlapping physical offsets, as dispatch produces.
func unitFor(i int64) Unit {
	return Unit{Offset: 1000 + i*100, Size: int32(50 + i%7), TagHash: i*31 - 7}
}

func openStore(t testing.TB, root string, upf int) *Store {
	t.Helper()
	s, err := Open(root, Options{UnitsPerFile: upf}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustQueue(t testing.TB, s *Store, topic string, id int32) *Queue {
	t.Helper()
	q, err := s.Queue(topic, id)
	if err != nil {
		t.Fatalf("Queue(%s, %d): %v", topic, id, err)
	}
	return q
}

func putRange(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := q.Put(i, unitFor(i)); err != nil {
			t.Fatalf("Put(%d): %v", i, err)
		}
	}
}

// checkRange asserts that the queue holds exactly unitFor(i) for i in [lo, hi).
func checkRange(t testing.TB, q *Queue, lo, hi int64) {
	t.Helper()
	if q.MinOffset() != lo || q.MaxOffset() != hi {
		t.Fatalf("range = [%d, %d), want [%d, %d)", q.MinOffset(), q.MaxOffset(), lo, hi)
	}
	for i := lo; i < hi; i++ {
		u, err := q.Get(i)
		if err != nil {
			t.Fatalf("Get(%d): %v", i, err)
		}
		if u != unitFor(i) {
			t.Fatalf("Get(%d) = %+v, want %+v", i, u, unitFor(i))
		}
	}
	all, err := q.Read(lo, int(hi-lo)+5, nil)
	if err != nil {
		t.Fatalf("Read(%d): %v", lo, err)
	}
	if int64(len(all)) != hi-lo {
		t.Fatalf("Read(%d) returned %d units, want %d", lo, len(all), hi-lo)
	}
	for i, u := range all {
		if u != unitFor(lo+int64(i)) {
			t.Fatalf("Read unit %d = %+v, want %+v", lo+int64(i), u, unitFor(lo+int64(i)))
		}
	}
	if _, err := q.Get(hi); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(max %d) error = %v, want ErrNotFound", hi, err)
	}
	if lo > 0 {
		if _, err := q.Get(lo - 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(min-1 = %d) error = %v, want ErrNotFound", lo-1, err)
		}
	}
	wantPhy := int64(0)
	if hi > lo {
		wantPhy = unitFor(hi - 1).End()
	}
	if q.MaxPhysicalOffset() != wantPhy {
		t.Fatalf("MaxPhysicalOffset = %d, want %d", q.MaxPhysicalOffset(), wantPhy)
	}
}

// checkAgedOut asserts that DeleteBefore left the queue empty at offset at,
// having moved MinOffset past all of its units 0..at-1: nothing is
// readable, and MaxPhysicalOffset still says where the last unit ended.
func checkAgedOut(t testing.TB, q *Queue, at int64) {
	t.Helper()
	if q.MinOffset() != at || q.MaxOffset() != at {
		t.Fatalf("range = [%d, %d), want [%d, %d)", q.MinOffset(), q.MaxOffset(), at, at)
	}
	if _, err := q.Get(at - 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(%d) = %v, want ErrNotFound", at-1, err)
	}
	if got, want := q.MaxPhysicalOffset(), unitFor(at-1).End(); got != want {
		t.Fatalf("MaxPhysicalOffset = %d, want %d", got, want)
	}
}

// queueFiles lists the file names of a queue directory.
func queueFiles(t testing.TB, root, topic, id string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, topic, id))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
