package store

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestReserveQueueSpares: the reserve adds spares in batches, says which
// kind planned ConsumeQueue files lack (a large file needs a full-size
// spare, a first file either kind), takes a first-file spare for a first
// file while there is one and a full-size one, cut to size, after that,
// and keeps only spares of the right size across a reopen.
func TestReserveQueueSpares(t *testing.T) {
	dir := t.TempDir()
	sizes := [spareKinds]int64{spareQueue: 2000, spareQueueSmall: 160}
	targets := [spareKinds]int{spareQueue: 1, spareQueueSmall: 2}
	r, err := openReserve(dir, sizes, targets, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.fill(); err != nil {
		t.Fatal(err)
	}
	if r.ready(spareQueue) != 1 || r.ready(spareQueueSmall) != 2 || !r.full() {
		t.Fatalf("after fill: %d full, %d first", r.ready(spareQueue), r.ready(spareQueueSmall))
	}
	for _, tc := range []struct {
		big, small int64
		kind       spareKind
		short      bool
	}{
		{0, 3, 0, false},              // 2 first + 1 full
		{1, 2, 0, false},              // the full one for the big file
		{2, 0, spareQueue, true},      // two big files, one full spare
		{0, 4, spareQueueSmall, true}, // four first files, three spares
		{1, 3, spareQueueSmall, true}, // one too many in all
		{1, 1, 0, false},
	} {
		kind, short := r.queueSpares(tc.big, tc.small)
		if short != tc.short || (short && kind != tc.kind) {
			t.Errorf("queueSpares(%d, %d) = %v, %v; want %v, %v", tc.big, tc.small, kind, short, tc.kind, tc.short)
		}
	}
	if err := r.add(spareQueueSmall, 5); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.Glob(filepath.Join(dir, spareNames[spareQueueSmall]+"-*")); len(got) != 7 || r.ready(spareQueueSmall) != 7 {
		t.Fatalf("after adding 5: %d files, %d counted", len(got), r.ready(spareQueueSmall))
	}
	if n := r.trim(spareQueueSmall, 3); n != 4 || r.ready(spareQueueSmall) != 3 {
		t.Fatalf("trim to 3 removed %d, left %d", n, r.ready(spareQueueSmall))
	}
	take := func(size int64, want spareKind) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "file")
		f, kind, err := r.takeQueue(path, size)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || st.Size() != size || kind != want {
			t.Fatalf("took a %v spare of %d bytes for %d, want %v", kind, st.Size(), size, want)
		}
	}
	take(160, spareQueueSmall)
	take(160, spareQueueSmall)
	take(160, spareQueueSmall)
	take(160, spareQueue) // no first-file spare left: a full one, cut
	if _, _, err := r.takeQueue(filepath.Join(dir, "x"), 160); err == nil {
		t.Fatal("a spare taken from an empty reserve")
	}
	// A spare of a size the options no longer use is removed at open.
	if err := r.add(spareQueueSmall, 1); err != nil {
		t.Fatal(err)
	}
	sizes[spareQueueSmall] = 320
	r, err = openReserve(dir, sizes, targets, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.ready(spareQueueSmall) != 0 {
		t.Fatalf("%d first-file spares of the old size kept", r.ready(spareQueueSmall))
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("reserve directory holds %d entries", len(left))
	}
}
