package indexfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const t0 = int64(1_700_000_000_123) // a store timestamp, ms

var all = [2]int64{math.MinInt64, math.MaxInt64}

func TestPutQuery(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 16, MaxEntries: 64})
	defer s.Close()
	if got := mustQuery(t, s, "T#a", all[0], all[1], 10); got != nil {
		t.Fatalf("empty store: %v", got)
	}
	mustPut(t, s, "T#a", 100, t0)
	mustPut(t, s, "T#b", 100, t0)
	mustPut(t, s, "T#a", 200, t0+10)
	mustPut(t, s, "T#c", 300, t0+20)
	mustPut(t, s, "T#a", 400, t0+30)
	if got := mustQuery(t, s, "T#a", all[0], all[1], 10); !slices.Equal(got, []int64{400, 200, 100}) {
		t.Fatalf("T#a = %v", got)
	}
	if got := mustQuery(t, s, "T#b", all[0], all[1], 10); !slices.Equal(got, []int64{100}) {
		t.Fatalf("T#b = %v", got)
	}
	if got := mustQuery(t, s, "T#zzz", all[0], all[1], 10); got != nil {
		t.Fatalf("absent key = %v", got)
	}
	if got := s.MaxPhysicalOffset(); got != 400 {
		t.Fatalf("MaxPhysicalOffset = %d", got)
	}
	if s.Files() != 1 {
		t.Fatalf("Files = %d", s.Files())
	}
}

func TestMaxResultsNewestFirst(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 8, MaxEntries: 100})
	defer s.Close()
	for i := int64(0); i < 20; i++ {
		mustPut(t, s, "T#k", i*10, t0+i)
	}
	for _, n := range []int{1, 5, 20, 50} {
		got := mustQuery(t, s, "T#k", all[0], all[1], n)
		if len(got) != min(n, 20) {
			t.Fatalf("max %d: %d results", n, len(got))
		}
		for i, off := range got {
			if want := int64(19-i) * 10; off != want {
				t.Fatalf("max %d: result %d = %d, want %d", n, i, off, want)
			}
		}
	}
	if got := mustQuery(t, s, "T#k", all[0], all[1], 0); got != nil {
		t.Fatalf("max 0: %v", got)
	}
	if got := mustQuery(t, s, "T#k", 10, 5, 10); got != nil {
		t.Fatalf("begin > end: %v", got)
	}
}

func TestTimeRange(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 8, MaxEntries: 100})
	defer s.Close()
	// Entry times are the file begin plus whole seconds.
	mustPut(t, s, "T#k", 1, t0)      // time t0
	mustPut(t, s, "T#k", 2, t0+999)  // diff 0 -> t0
	mustPut(t, s, "T#k", 3, t0+1000) // diff 1 -> t0+1000
	mustPut(t, s, "T#k", 4, t0+5500) // diff 5 -> t0+5000
	mustPut(t, s, "T#x", 5, t0+9000)
	tests := []struct {
		begin, end int64
		want       []int64
	}{
		{t0, t0, []int64{2, 1}},
		{t0 + 1, t0 + 999, nil},
		{t0 + 1000, t0 + 5000, []int64{4, 3}},
		{t0 + 5001, t0 + 5500, nil}, // 5500 rounds down to 5000
		{t0 - 10_000, t0 - 1, nil},
		{t0 + 500, t0 + 1000, []int64{3}},
		{t0, t0 + 100_000, []int64{4, 3, 2, 1}},
	}
	for _, tt := range tests {
		if got := mustQuery(t, s, "T#k", tt.begin, tt.end, 10); !slices.Equal(got, tt.want) {
			t.Errorf("[%d, %d] = %v, want %v", tt.begin-t0, tt.end-t0, got, tt.want)
		}
	}
}

func TestCollisionsSmallSlotCount(t *testing.T) {
	opts := Options{SlotCount: 7, MaxEntries: 1000}
	s := openTest(t, t.TempDir(), opts)
	defer s.Close()
	m := newModel(opts)
	keys := []string{"Aa", "BB", "polygenelubricants", "T#é", "T#😀"}
	for i := 0; i < 40; i++ {
		keys = append(keys, fmt.Sprintf("T#key-%d", i))
	}
	for i := 0; i < 300; i++ {
		k := keys[(i*7+i/3)%len(keys)]
		mustPut(t, s, k, int64(i/2), t0+int64(i)*300)
		m.put(k, int64(i/2), t0+int64(i)*300)
	}
	m.checkAgainst(t, s, keys)
	// "Aa" and "BB" share a hash: each query returns both keys' offsets,
	// which is why callers re-check the records.
	aa := mustQuery(t, s, "Aa", all[0], all[1], 1000)
	bb := mustQuery(t, s, "BB", all[0], all[1], 1000)
	if !slices.Equal(aa, bb) || len(aa) == 0 {
		t.Fatalf("colliding keys: %v vs %v", aa, bb)
	}
}

func TestFileLayout(t *testing.T) {
	opts := Options{SlotCount: 7, MaxEntries: 10}
	dir := t.TempDir()
	s := openTest(t, dir, opts)
	// Aa and BB: hash 2112, slot 2112%7 = 5. "a": hash 97, slot 6.
	mustPut(t, s, "Aa", 1000, t0)
	mustPut(t, s, "a", 2000, t0+1500)
	mustPut(t, s, "BB", 3000, t0+62_000)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _, _ := listFiles(dir)
	if len(names) != 1 || len(names[0]) != 17 {
		t.Fatalf("files %v", names)
	}
	raw, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) != opts.FileSize() || len(raw) != 40+7*4+10*20 {
		t.Fatalf("size %d", len(raw))
	}
	be := binary.BigEndian
	hdr := []int64{int64(be.Uint64(raw[0:])), int64(be.Uint64(raw[8:])), int64(be.Uint64(raw[16:])), int64(be.Uint64(raw[24:]))}
	if !slices.Equal(hdr, []int64{t0, t0 + 62_000, 1000, 3000}) {
		t.Fatalf("header times/offsets %v", hdr)
	}
	if used, count := be.Uint32(raw[32:]), be.Uint32(raw[36:]); used != 2 || count != 4 {
		t.Fatalf("hashSlotCount %d indexCount %d", used, count)
	}
	slots := make([]uint32, 7)
	for i := range slots {
		slots[i] = be.Uint32(raw[40+4*i:])
	}
	if !slices.Equal(slots, []uint32{0, 0, 0, 0, 0, 3, 2}) {
		t.Fatalf("slots %v", slots)
	}
	entry := func(i int) Entry {
		e, err := DecodeEntry(raw[40+7*4+20*i:])
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	want := []Entry{
		{}, // position 0 unused
		{KeyHash: 2112, PhyOffset: 1000, TimeDiff: 0, PrevIndex: 0},
		{KeyHash: 97, PhyOffset: 2000, TimeDiff: 1, PrevIndex: 0},
		{KeyHash: 2112, PhyOffset: 3000, TimeDiff: 62, PrevIndex: 1},
		{},
	}
	for i, w := range want {
		if got := entry(i); got != w {
			t.Errorf("entry %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestRolloverAndReopen(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 4} // 3 entries a file
	dir := t.TempDir()
	s := openTest(t, dir, opts)
	m := newModel(opts)
	keys := []string{"T#a", "T#b", "T#c"}
	for i := 0; i < 10; i++ {
		k := keys[i%3]
		mustPut(t, s, k, int64(i*100), t0+int64(i)*1234)
		m.put(k, int64(i*100), t0+int64(i)*1234)
	}
	if s.Files() != 4 {
		t.Fatalf("Files = %d", s.Files())
	}
	m.checkAgainst(t, s, keys)
	if got := mustQuery(t, s, "T#a", all[0], all[1], 10); !slices.Equal(got, []int64{900, 600, 300, 0}) {
		t.Fatalf("across files: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	names, _, _ := listFiles(dir)
	if len(names) != 4 || !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != 4 {
		t.Fatalf("names %v", names)
	}
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.Size() != opts.FileSize() {
			t.Fatalf("%s: %v %v", n, st, err)
		}
	}

	s = openTest(t, dir, opts)
	defer s.Close()
	m.checkAgainst(t, s, keys)
	for i := 10; i < 14; i++ {
		k := keys[i%3]
		mustPut(t, s, k, int64(i*100), t0+int64(i)*1234)
		m.put(k, int64(i*100), t0+int64(i)*1234)
	}
	m.checkAgainst(t, s, keys)
}

func TestPutOutOfOrder(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 5, MaxEntries: 10})
	defer s.Close()
	mustPut(t, s, "T#a", 100, t0)
	mustPut(t, s, "T#b", 100, t0) // same message, another key
	if err := s.Put("T#c", 99, t0); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("smaller offset: %v", err)
	}
	if err := s.Put("T#c", -1, t0); err == nil {
		t.Fatal("negative offset accepted")
	}
}

func TestClosed(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 5, MaxEntries: 10})
	mustPut(t, s, "T#a", 1, t0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("T#a", 2, t0); !errors.Is(err, ErrClosed) {
		t.Errorf("Put: %v", err)
	}
	if _, err := s.Query("T#a", all[0], all[1], 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Query: %v", err)
	}
	if err := s.TruncateAfter(0); !errors.Is(err, ErrClosed) {
		t.Errorf("TruncateAfter: %v", err)
	}
	if _, err := s.DeleteBefore(10); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteBefore: %v", err)
	}
	if err := s.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{}, nil); err == nil {
		t.Fatal("invalid options accepted")
	}
	// A file bigger than the options allow means the options changed.
	dir := t.TempDir()
	s := openTest(t, dir, Options{SlotCount: 5, MaxEntries: 10})
	mustPut(t, s, "T#a", 1, t0)
	s.Close()
	if _, err := Open(dir, Options{SlotCount: 5, MaxEntries: 5}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("smaller options: %v", err)
	}
	// Foreign names are ignored.
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{SlotCount: 5, MaxEntries: 10})
	defer s.Close()
	if s.Files() != 1 {
		t.Fatalf("Files = %d", s.Files())
	}
}

func TestDeleteBefore(t *testing.T) {
	opts := Options{SlotCount: 3, MaxEntries: 3} // 2 entries a file
	s := openTest(t, t.TempDir(), opts)
	defer s.Close()
	m := newModel(opts)
	keys := []string{"T#a", "T#b"}
	for i := 0; i < 9; i++ { // offsets 0..800, five files
		mustPut(t, s, keys[i%2], int64(i*100), t0+int64(i)*1000)
		m.put(keys[i%2], int64(i*100), t0+int64(i)*1000)
	}
	for _, cut := range []int64{0, 100, 101, 350, 10_000} {
		n, err := s.DeleteBefore(cut)
		if err != nil {
			t.Fatal(err)
		}
		if want := m.deleteBefore(cut); n != want {
			t.Fatalf("DeleteBefore(%d) = %d, model %d", cut, n, want)
		}
		m.checkAgainst(t, s, keys)
	}
	if s.Files() != 1 {
		t.Fatalf("newest file must stay: %d", s.Files())
	}
	mustPut(t, s, "T#a", 900, t0+9000)
	m.put("T#a", 900, t0+9000)
	m.checkAgainst(t, s, keys)
}

func TestFlush(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 5, MaxEntries: 10})
	defer s.Close()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "T#a", 1, t0)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil { // nothing dirty
		t.Fatal(err)
	}
}

func TestTimeDiffClamp(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{SlotCount: 5, MaxEntries: 10})
	defer s.Close()
	mustPut(t, s, "T#a", 1, t0)
	mustPut(t, s, "T#a", 2, t0-5000) // clock stepped back: 0
	mustPut(t, s, "T#a", 3, t0+3e12) // ~95 years on: MaxInt32 seconds
	mustPut(t, s, "T#a", 4, t0+1999) // 1 s
	f := s.files[0]
	for i, want := range []int32{0, 0, math.MaxInt32, 1} {
		if got := f.entry(int32(i + 1)).TimeDiff; got != want {
			t.Errorf("entry %d timeDiff %d, want %d", i+1, got, want)
		}
	}

	// A file that begins at a non-positive timestamp stores 0 throughout,
	// as RocketMQ does.
	z := openTest(t, t.TempDir(), Options{SlotCount: 5, MaxEntries: 10})
	defer z.Close()
	mustPut(t, z, "T#a", 1, 0)
	mustPut(t, z, "T#a", 2, 5000)
	if got := z.files[0].entry(2).TimeDiff; got != 0 {
		t.Fatalf("timeDiff %d after zero begin", got)
	}
}

func TestCheckHeader(t *testing.T) {
	o := Options{SlotCount: 5, MaxEntries: 10}
	good := []Header{
		{},
		{IndexCount: 1},
		{BeginTimestamp: t0, EndTimestamp: t0, BeginPhyOffset: 5, EndPhyOffset: 5, SlotCount: 1, IndexCount: 2},
		{SlotCount: 5, IndexCount: 10, EndPhyOffset: 9},
	}
	bad := []Header{
		{BeginTimestamp: 1},                 // indexCount 0 but written
		{IndexCount: 11},                    // past MaxEntries
		{SlotCount: 6, IndexCount: 10},      // more slots than exist
		{SlotCount: 2, IndexCount: 2},       // more slots than entries
		{IndexCount: 3, BeginPhyOffset: -1}, // negative offset
		{IndexCount: 3, BeginPhyOffset: 9, EndPhyOffset: 8},
	}
	for _, h := range good {
		if err := o.checkHeader(h); err != nil {
			t.Errorf("%+v: %v", h, err)
		}
	}
	for _, h := range bad {
		if err := o.checkHeader(h); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v accepted: %v", h, err)
		}
	}
	if (Header{IndexCount: 7}).Entries() != 6 || (Header{}).Entries() != 0 {
		t.Error("Header.Entries")
	}
}

func TestAccessors(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SlotCount: 5, MaxEntries: 10}
	s := openTest(t, dir, opts)
	defer s.Close()
	if got := s.Options(); s.Dir() != dir || got.SlotCount != opts.SlotCount || got.MaxEntries != opts.MaxEntries {
		t.Fatalf("Dir %q Options %+v", s.Dir(), s.Options())
	}
}
