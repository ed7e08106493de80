package indexfile

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// buildClosed writes ops into a new store in dir and closes it.
func buildClosed(t *testing.T, dir string, opts Options, ops []putOp) {
	t.Helper()
	s := openTest(t, dir, opts)
	for _, op := range ops {
		mustPut(t, s, op.key, op.phy, op.ts)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	names, _, err := listFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// recoverWorkload: offsets with non-trivial low bytes, so a torn entry reads
// as a smaller offset.
func recoverWorkload(n int) ([]putOp, []string) {
	keys := []string{"T#a", "T#b", "T#c", "T#d", "Aa", "BB"}
	ops := make([]putOp, n)
	for i := range ops {
		ops[i] = putOp{keys[(i*5)%len(keys)], 1000 + int64(i)*1037, t0 + int64(i)*600}
	}
	return ops, keys
}

func modelOf(opts Options, ops []putOp) *model {
	m := newModel(opts)
	for _, op := range ops {
		m.put(op.key, op.phy, op.ts)
	}
	return m
}

func TestOpenCutFile(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 40}
	ops, keys := recoverWorkload(30)
	ent := int64(opts.entriesOffset())
	cases := []struct {
		size int64
		keep int // entries expected to survive
	}{
		{0, 0},
		{HeaderSize / 2, 0},
		{HeaderSize + 8, 0}, // header intact, slots and entries gone
		{ent + 20, 0},       // only position 0
		{ent + 2*20, 1},
		{ent + 11*20, 10},
		{ent + 11*20 + 9, 10},  // entry 11 torn inside its offset
		{ent + 11*20 + 17, 10}, // entry 11 torn inside prevIndex
		{ent + 31*20, 30},
		{opts.FileSize() - 1, 30},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.size), func(t *testing.T) {
			dir := t.TempDir()
			buildClosed(t, dir, opts, ops)
			path := filepath.Join(dir, fileNames(t, dir)[0])
			if err := os.Truncate(path, c.size); err != nil {
				t.Fatal(err)
			}
			s := openTest(t, dir, opts)
			defer s.Close()
			if st, _ := os.Stat(path); st.Size() != opts.FileSize() {
				t.Fatalf("not re-extended: %d", st.Size())
			}
			m := modelOf(opts, ops[:c.keep])
			m.files = m.files[:min(len(m.files), 1)]
			if c.keep == 0 {
				m.files = nil
			}
			mf := len(m.files)
			if mf == 0 && s.Files() == 1 { // the (empty) newest file stays
				m.files = append(m.files, &modelFile{})
			}
			m.checkAgainst(t, s, keys)

			// The dispatcher's part: truncate at its checkpoint, re-put.
			checkpoint := ops[c.keep/2].phy
			if err := s.TruncateAfter(checkpoint); err != nil {
				t.Fatal(err)
			}
			for _, op := range ops {
				if op.phy >= checkpoint {
					mustPut(t, s, op.key, op.phy, op.ts)
				}
			}
			full := modelOf(opts, ops)
			for _, k := range keys {
				got := mustQuery(t, s, k, all[0], all[1], 100)
				want := full.query(k, all[0], all[1], 100)
				if !slices.Equal(got, want) {
					t.Fatalf("%q after re-dispatch: %v, want %v", k, got, want)
				}
			}
		})
	}
}

func TestOpenBrokenNewestHeader(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 4}
	ops, keys := recoverWorkload(7) // files of 3, 3, 1
	dir := t.TempDir()
	buildClosed(t, dir, opts, ops)
	names := fileNames(t, dir)
	if len(names) != 3 {
		t.Fatalf("files %v", names)
	}
	patch(t, filepath.Join(dir, names[2]), offIndexCount, be32(1000)) // > MaxEntries
	s := openTest(t, dir, opts)
	defer s.Close()
	m := modelOf(opts, ops[:6])
	m.files = append(m.files, &modelFile{}) // reset, empty, still there
	m.checkAgainst(t, s, keys)
	if got := s.MaxPhysicalOffset(); got != ops[5].phy {
		t.Fatalf("MaxPhysicalOffset %d", got)
	}
	mustPut(t, s, ops[6].key, ops[6].phy, ops[6].ts) // goes into the reset file
	modelOf(opts, ops).checkAgainst(t, s, keys)
}

func TestOpenBrokenOlderHeader(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 4}
	ops, keys := recoverWorkload(9) // three files of 3
	dir := t.TempDir()
	buildClosed(t, dir, opts, ops)
	names := fileNames(t, dir)
	patch(t, filepath.Join(dir, names[1]), offHashSlotCount, be32(-5))
	s := openTest(t, dir, opts)
	defer s.Close()
	if got := fileNames(t, dir); !slices.Equal(got, []string{names[0], names[2]}) {
		t.Fatalf("files %v, want the broken one removed", got)
	}
	m := modelOf(opts, ops)
	m.entries = slices.Delete(m.entries, 3, 6)
	m.files = slices.Delete(m.files, 1, 2)
	m.checkAgainst(t, s, keys)
}

func TestOpenAfterCrashMidPut(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 40}
	ops, keys := recoverWorkload(12)
	dir := t.TempDir()
	buildClosed(t, dir, opts, ops)
	path := filepath.Join(dir, fileNames(t, dir)[0])

	// A Put that wrote its entry (13) and slot but died before indexCount.
	key := "T#a"
	hash := KeyHash(key)
	slot := int(hash) % opts.SlotCount
	raw, _ := os.ReadFile(path)
	head := int32(binary.BigEndian.Uint32(raw[HeaderSize+4*slot:]))
	if head == 0 {
		t.Fatal("workload must use the slot")
	}
	e := make([]byte, EntrySize)
	EncodeEntry(e, Entry{KeyHash: hash, PhyOffset: 1 << 30, TimeDiff: 99, PrevIndex: head})
	patch(t, path, int64(opts.entriesOffset()+13*EntrySize), e)
	patch(t, path, int64(HeaderSize+4*slot), be32(13))
	// And some junk further on.
	patch(t, path, int64(opts.entriesOffset()+14*EntrySize), []byte{1, 2, 3})

	s := openTest(t, dir, opts)
	defer s.Close()
	m := modelOf(opts, ops)
	m.checkAgainst(t, s, keys) // older entries of the slot still reachable
	f := s.files[0]
	e13, e14 := mappedEntry(f, 13), mappedEntry(f, 14)
	if f.slot(slot) != head || !isZero(e13) || !isZero(e14) {
		t.Fatalf("slot %d = %d (want %d), entry 13 %x, entry 14 %x", slot, f.slot(slot), head, e13, e14)
	}
	for _, op := range []putOp{{key, 1 << 30, t0 + 99_000}, {"T#z", 1 << 31, t0 + 99_500}} {
		mustPut(t, s, op.key, op.phy, op.ts)
		m.put(op.key, op.phy, op.ts)
	}
	m.checkAgainst(t, s, append(keys, "T#z"))
}

func TestOpenCorruptEntryKeepsPrefix(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 40}
	ops, keys := recoverWorkload(20)
	for _, tc := range []struct {
		name  string
		entry int
		off   int
		val   int32
	}{
		{"prev points ahead", 8, offEntryPrevIndex, 15},
		{"prev wrong", 8, offEntryPrevIndex, 0},
		{"negative hash", 8, offEntryKeyHash, -7},
		{"negative time", 8, offEntryTimeDiff, -1},
		{"first entry time", 1, offEntryTimeDiff, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			buildClosed(t, dir, opts, ops)
			path := filepath.Join(dir, fileNames(t, dir)[0])
			patch(t, path, int64(opts.entriesOffset()+tc.entry*EntrySize+tc.off), be32(tc.val))
			// A stale slot pointing past the end, too.
			patch(t, path, HeaderSize, be32(39))
			s := openTest(t, dir, opts)
			defer s.Close()
			keep := tc.entry - 1
			m := modelOf(opts, ops[:keep])
			if keep == 0 {
				m.files = []*modelFile{{}}
			}
			m.checkAgainst(t, s, keys)
			h := s.files[0].hdr
			if int(h.IndexCount) != keep+1 || (keep > 0 && h.EndPhyOffset != ops[keep-1].phy) {
				t.Fatalf("header %+v", h)
			}
			for i := 0; i < opts.SlotCount; i++ {
				if v := s.files[0].slot(i); v >= h.IndexCount {
					t.Fatalf("slot %d = %d past indexCount %d", i, v, h.IndexCount)
				}
			}
		})
	}
}

func TestOpenEmptyNewestFile(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 4}
	ops, keys := recoverWorkload(3)
	dir := t.TempDir()
	buildClosed(t, dir, opts, ops)
	// A crash right after creating the next file, before it was extended.
	next := "29991231235959999"
	if err := os.WriteFile(filepath.Join(dir, next), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, opts)
	defer s.Close()
	m := modelOf(opts, ops)
	m.files = append(m.files, &modelFile{})
	m.checkAgainst(t, s, keys)
	op := putOp{"T#a", 1 << 20, t0 + 1_000_000}
	mustPut(t, s, op.key, op.phy, op.ts)
	if names := fileNames(t, dir); len(names) != 2 || names[1] != next {
		t.Fatalf("files %v: the empty newest file must be used", names)
	}
	m = modelOf(opts, append(ops, op))
	m.checkAgainst(t, s, keys)
}

// mappedEntry returns entry position i as the file holds it.
func mappedEntry(f *file, i int32) []byte {
	off := f.entBase + int(i)*EntrySize
	return f.data[off : off+EntrySize]
}
