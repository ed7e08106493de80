package consumequeue

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestPutGetReadAcrossFiles(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "orders", 3)
	if q.Topic() != "orders" || q.ID() != 3 || q.String() != "orders/3" {
		t.Fatalf("identity = %s %d %s", q.Topic(), q.ID(), q)
	}
	checkRange(t, q, 0, 0)
	if _, err := os.Stat(filepath.Join(root, "orders")); !os.IsNotExist(err) {
		t.Fatalf("queue directory created before the first Put: %v", err)
	}
	// Units 0..22 reach the files, 23..34 stay staged: reads cross from
	// the mapping to the stage in the middle of a file.
	putRange(t, q, 0, 23)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 23, 35)
	checkRange(t, q, 0, 35)
	if data, err := os.ReadFile(filepath.Join(root, "orders", "3", "00000000000000000400")); err != nil || !allZero(data[60:]) {
		t.Fatalf("staged units on disk before a flush (%v)", err)
	}
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 35)

	want := []string{"00000000000000000000", "00000000000000000200", "00000000000000000400", "00000000000000000600"}
	if got := queueFiles(t, root, "orders", "3"); !reflect.DeepEqual(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	// Files are full-size and hold the RocketMQ layout byte for byte.
	data, err := os.ReadFile(filepath.Join(root, "orders", "3", want[1]))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 200 {
		t.Fatalf("file size = %d, want 200", len(data))
	}
	var unit [UnitSize]byte
	EncodeUnit(unit[:], unitFor(12))
	if !bytes.Equal(data[40:60], unit[:]) {
		t.Fatalf("unit 12 on disk = % x, want % x", data[40:60], unit[:])
	}

	for _, tc := range []struct {
		from int64
		max  int
		want int
	}{
		{0, 32, 32}, {8, 5, 5}, {9, 12, 12}, {30, 32, 5}, {34, 1, 1}, {35, 10, 0}, {100, 10, 0}, {5, 0, 0},
	} {
		dst := []Unit{{Offset: -42}}
		got, err := q.Read(tc.from, tc.max, dst)
		if err != nil {
			t.Fatalf("Read(%d, %d): %v", tc.from, tc.max, err)
		}
		if len(got) != 1+tc.want || got[0].Offset != -42 {
			t.Fatalf("Read(%d, %d) = %d units, want 1+%d", tc.from, tc.max, len(got), tc.want)
		}
		for i, u := range got[1:] {
			if u != unitFor(tc.from+int64(i)) {
				t.Fatalf("Read(%d, %d)[%d] = %+v", tc.from, tc.max, i, u)
			}
		}
	}
	if _, err := q.Get(-1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(-1) = %v", err)
	}
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestReopenRecoversMaxOffset(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, 11, 25, 30} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, root, 10)
			putRange(t, mustQueue(t, s, "t", 0), 0, n)
			putRange(t, mustQueue(t, s, "t", 1), 0, 3)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, root, 10)
			q, ok := s.Lookup("t", 0)
			if n == 0 {
				if ok {
					t.Fatal("empty queue has a directory after reopen")
				}
				return
			}
			if !ok {
				t.Fatal("queue not recovered")
			}
			checkRange(t, q, 0, n)
			putRange(t, q, n, n+12)
			checkRange(t, q, 0, n+12)
		})
	}
}

func TestRePutIsIdempotent(t *testing.T) {
	s := openStore(t, t.TempDir(), 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 15)
	putRange(t, q, 0, 15) // re-dispatch of the same units
	checkRange(t, q, 0, 15)
	other := unitFor(4)
	other.TagHash++
	if err := q.Put(4, other); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("re-put of a different unit = %v, want ErrCorrupt", err)
	}
	checkRange(t, q, 0, 15)
}

func TestPutGapAndInvalid(t *testing.T) {
	s := openStore(t, t.TempDir(), 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 5)
	err := q.Put(6, unitFor(6))
	if !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("Put past max = %v, want ErrOffsetGap", err)
	}
	if msg := err.Error(); !bytes.Contains([]byte(msg), []byte("t/0")) {
		t.Fatalf("error lacks context: %q", msg)
	}
	for _, tc := range []struct {
		off int64
		u   Unit
	}{
		{-1, unitFor(0)},
		{5, Unit{Offset: 1 << 40, Size: 0}},
		{5, Unit{Offset: -1, Size: 3}},
		{5, blankUnit},
	} {
		if err := q.Put(tc.off, tc.u); !errors.Is(err, ErrInvalid) {
			t.Errorf("Put(%d, %+v) = %v, want ErrInvalid", tc.off, tc.u, err)
		}
	}
	// Physical offsets must follow CommitLog order.
	if err := q.Put(5, unitFor(3)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Put of an older physical offset = %v, want ErrCorrupt", err)
	}
	checkRange(t, q, 0, 5)
}

func TestStartAtNonZeroOffset(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "t", 2)
	putRange(t, q, 23, 37)
	checkRange(t, q, 23, 37)
	if got := queueFiles(t, root, "t", "2"); !reflect.DeepEqual(got, []string{"00000000000000000400", "00000000000000000600"}) {
		t.Fatalf("files = %v", got)
	}
	if _, err := q.Read(22, 5, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read below min = %v, want ErrNotFound", err)
	}
	// Below MinOffset a re-put is ignored: nothing to compare with.
	if err := q.Put(3, unitFor(3)); err != nil {
		t.Fatalf("Put below min = %v", err)
	}
	// The units before the start are RocketMQ pre-blank markers.
	data, err := os.ReadFile(filepath.Join(root, "t", "2", "00000000000000000400"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if u := decodeUnit(data[i*UnitSize:]); u != blankUnit {
			t.Fatalf("unit %d = %+v, want pre-blank", 20+i, u)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, root, 10)
	q, _ = s.Lookup("t", 2)
	checkRange(t, q, 23, 37)
	if err := q.TruncateAfter(0); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 23, 23)
	putRange(t, q, 23, 25)
	checkRange(t, q, 23, 25)
}

func TestTruncateAfterAcrossFiles(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 37)
	// Cut at a unit boundary that is not a message start: units whose Offset
	// is >= the cut go.
	if err := q.TruncateAfter(unitFor(15).Offset - 1); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 15)
	if got := queueFiles(t, root, "t", "0"); len(got) != 2 {
		t.Fatalf("files after truncation = %v, want 2", got)
	}
	if err := q.TruncateAfter(1 << 50); err != nil { // nothing past it
		t.Fatal(err)
	}
	checkRange(t, q, 0, 15)
	putRange(t, q, 15, 28)
	checkRange(t, q, 0, 28)

	// Exactly on a file boundary: the file past it is deleted.
	if err := q.TruncateAfter(unitFor(20).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 20)
	if got := queueFiles(t, root, "t", "0"); len(got) != 2 {
		t.Fatalf("files after boundary truncation = %v, want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, root, 10)
	q, _ = s.Lookup("t", 0)
	checkRange(t, q, 0, 20)

	// Everything: the first file stays, empty.
	if err := s.TruncateAfter(0); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 0, 0)
	if got := queueFiles(t, root, "t", "0"); len(got) != 1 {
		t.Fatalf("files after full truncation = %v, want 1", got)
	}
	putRange(t, q, 0, 3)
	checkRange(t, q, 0, 3)
}

func TestDeleteBefore(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 35)
	// The CommitLog now starts at unit 12: the first file (units 0-9) goes,
	// and MinOffset moves past units 10 and 11 of the second one.
	n, err := s.DeleteBefore(unitFor(12).Offset)
	if err != nil || n != 1 {
		t.Fatalf("DeleteBefore = %d, %v, want 1 file", n, err)
	}
	checkRange(t, q, 12, 35)
	for _, off := range []int64{5, 10, 11} {
		if _, err := q.Read(off, 3, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(%d) of deleted units = %v, want ErrNotFound", off, err)
		}
	}
	// Within one file: no file goes, MinOffset moves all the same.
	n, err = s.DeleteBefore(unitFor(17).Offset)
	if err != nil || n != 0 {
		t.Fatalf("DeleteBefore within a file = %d, %v, want 0 files", n, err)
	}
	checkRange(t, q, 17, 35)
	// MinOffset never moves down.
	if _, err := s.DeleteBefore(unitFor(3).Offset); err != nil {
		t.Fatal(err)
	}
	checkRange(t, q, 17, 35)
	// Never the last file, even if everything is gone from the CommitLog:
	// the queue is then empty at its max offset.
	n, err = s.DeleteBefore(1 << 50)
	if err != nil || n != 2 {
		t.Fatalf("DeleteBefore(all) = %d, %v, want 2 files", n, err)
	}
	checkAgedOut(t, q, 35)
	if got := queueFiles(t, root, "t", "0"); !reflect.DeepEqual(got, []string{"00000000000000000600"}) {
		t.Fatalf("files = %v", got)
	}
	putRange(t, q, 35, 42)
	checkRange(t, q, 35, 42)
	if err := q.Put(42, Unit{Offset: unitFor(41).Offset, Size: 1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Put behind the last unit = %v, want ErrCorrupt", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// MinOffset is not persisted: the files give the first file's start,
	// and DeleteBefore with the CommitLog's minimum corrects it again.
	s = openStore(t, root, 10)
	q, _ = s.Lookup("t", 0)
	checkRange(t, q, 30, 42)
	if n, err := s.DeleteBefore(unitFor(36).Offset); err != nil || n != 0 {
		t.Fatalf("DeleteBefore after reopen = %d, %v", n, err)
	}
	checkRange(t, q, 36, 42)
}

// TestDeleteBeforeStagedAndLargeFiles: MinOffset is corrected in a file far
// from full and over units still staged, by binary search.
func TestDeleteBeforeStagedAndLargeFiles(t *testing.T) {
	q := mustQueue(t, openStore(t, t.TempDir(), 1000), "t", 0)
	putRange(t, q, 0, 300)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 300, 700) // 300..699 staged
	for _, tc := range []struct{ phy, want int64 }{
		{unitFor(0).Offset, 0},
		{unitFor(0).Offset + 1, 1},
		{unitFor(299).End(), 300},
		{unitFor(450).Offset, 450},
		{unitFor(699).Offset, 699},
		{unitFor(699).End(), 700},
	} {
		if n, err := q.DeleteBefore(tc.phy); err != nil || n != 0 {
			t.Fatalf("DeleteBefore(%d) = %d, %v", tc.phy, n, err)
		}
		if tc.want == 700 {
			checkAgedOut(t, q, 700)
		} else {
			checkRange(t, q, tc.want, 700)
		}
	}
}

func TestOffsetForTime(t *testing.T) {
	s := openStore(t, t.TempDir(), 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 50)
	// Store time of offset i is 1000 + 10*(i/2): pairs share a timestamp.
	storeTime := func(u Unit) (int64, error) {
		i := (u.Offset - 1000) / 100
		return 1000 + 10*(i/2), nil
	}
	for _, tc := range []struct{ ts, want int64 }{
		{0, 0}, {1000, 0}, {1001, 2}, {1010, 2}, {1015, 4}, {1240, 48}, {1241, 50}, {9999, 50},
	} {
		got, err := q.OffsetForTime(tc.ts, storeTime)
		if err != nil || got != tc.want {
			t.Errorf("OffsetForTime(%d) = %d, %v, want %d", tc.ts, got, err, tc.want)
		}
	}
	// Messages already gone from the CommitLog count as older than anything.
	gone := func(u Unit) (int64, error) {
		if u.Offset < unitFor(20).Offset {
			return 0, fmt.Errorf("commitlog: %w", ErrNotFound)
		}
		return storeTime(u)
	}
	if got, err := q.OffsetForTime(0, gone); err != nil || got != 20 {
		t.Errorf("OffsetForTime with deleted head = %d, %v, want 20", got, err)
	}
	boom := errors.New("boom")
	if _, err := q.OffsetForTime(1100, func(Unit) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("callback error not propagated: %v", err)
	}
	empty := mustQueue(t, s, "t", 1)
	if got, err := empty.OffsetForTime(5, storeTime); err != nil || got != 0 {
		t.Errorf("OffsetForTime on empty queue = %d, %v", got, err)
	}
}
