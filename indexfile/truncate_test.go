package indexfile

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

type putOp struct {
	key     string
	phy, ts int64
}

// truncateWorkload has several keys per message (equal offsets), colliding
// keys, and enough entries for several files.
func truncateWorkload() ([]putOp, []string) {
	keys := []string{"Aa", "BB", "T#a", "T#b", "T#c", "T#d", "T#é"}
	var ops []putOp
	phy := int64(0)
	for i := 0; len(ops) < 40; i++ {
		for k := 0; k <= i%3 && len(ops) < 40; k++ {
			ops = append(ops, putOp{keys[(i*3+k)%len(keys)], phy, t0 + int64(i)*700})
		}
		phy += int64(50 + i%4*10)
	}
	return ops, keys
}

// sameContent compares two stores file by file: slots and entries byte for
// byte, headers except EndTimestamp (which truncation rounds to a second).
// Both are flushed first, so the entries compared are the files' own bytes
// (a truncated entry must be zero in the file).
func sameContent(t *testing.T, got, want *Store) {
	t.Helper()
	for _, s := range []*Store{got, want} {
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.files) != len(want.files) {
		t.Fatalf("files %d, want %d", len(got.files), len(want.files))
	}
	for i := range got.files {
		g, w := got.files[i], want.files[i]
		gh, wh := g.hdr, w.hdr
		gh.EndTimestamp, wh.EndTimestamp = 0, 0
		if gh != wh {
			t.Fatalf("file %d header %+v, want %+v", i, g.hdr, w.hdr)
		}
		for s := 0; s < g.opts.SlotCount; s++ {
			if g.slot(s) != w.slot(s) {
				t.Fatalf("file %d slot %d = %d, want %d", i, s, g.slot(s), w.slot(s))
			}
		}
		if !bytes.Equal(g.data[g.entBase:], w.data[w.entBase:]) {
			t.Fatalf("file %d entries differ", i)
		}
		if dh, _ := DecodeHeader(g.data); dh != g.hdr {
			t.Fatalf("file %d written header %+v, memory %+v", i, dh, g.hdr)
		}
	}
}

func TestTruncateAfterExact(t *testing.T) {
	opts := Options{SlotCount: 3, MaxEntries: 5} // 4 entries a file
	ops, keys := truncateWorkload()
	cuts := []int64{-1, 0, 1}
	for _, op := range ops {
		cuts = append(cuts, op.phy, op.phy+1)
	}
	cuts = append(cuts, 1<<40)
	for _, cut := range cuts {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := t.TempDir()
			s := openNoSync(t, dir, opts)
			m := newModel(opts)
			for _, op := range ops {
				mustPut(t, s, op.key, op.phy, op.ts)
				m.put(op.key, op.phy, op.ts)
			}
			if err := s.TruncateAfter(cut); err != nil {
				t.Fatal(err)
			}
			m.truncate(cut)
			m.checkAgainst(t, s, keys)
			for _, k := range keys {
				for _, off := range mustQuery(t, s, k, all[0], all[1], 1000) {
					if off >= cut {
						t.Fatalf("offset %d >= cut %d survived", off, cut)
					}
				}
			}

			// The result is what putting only the kept entries gives.
			ref := openNoSync(t, t.TempDir(), opts)
			defer ref.Close()
			for _, op := range ops {
				if op.phy < cut {
					mustPut(t, ref, op.key, op.phy, op.ts)
				}
			}
			sameContent(t, s, ref)

			// Puts continue cleanly, and all of it survives a reopen.
			next := max(cut, m.maxPhy())
			for i, op := range ops[:6] {
				phy := next + int64(i)*10
				mustPut(t, s, op.key, phy, op.ts+100_000)
				m.put(op.key, phy, op.ts+100_000)
			}
			m.checkAgainst(t, s, keys)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openNoSync(t, dir, opts)
			defer s.Close()
			m.checkAgainst(t, s, keys)
		})
	}
}

func TestTruncateInterleaved(t *testing.T) {
	opts := Options{SlotCount: 2, MaxEntries: 4}
	s := openTest(t, t.TempDir(), opts)
	defer s.Close()
	m := newModel(opts)
	keys := []string{"T#a", "T#b", "T#c"}
	phy, ts := int64(0), t0
	for round := 0; round < 30; round++ {
		for i := 0; i < 1+round%5; i++ {
			k := keys[(round+i)%3]
			mustPut(t, s, k, phy, ts)
			m.put(k, phy, ts)
			phy += int64(round % 2) // sometimes equal offsets
			ts += 450
		}
		cut := phy - int64(round%4)
		if err := s.TruncateAfter(cut); err != nil {
			t.Fatal(err)
		}
		m.truncate(cut)
		m.checkAgainst(t, s, keys)
		phy = max(m.maxPhy(), cut)
	}
	// Truncating everything leaves no files; Put starts a new one.
	if err := s.TruncateAfter(0); err != nil {
		t.Fatal(err)
	}
	m.truncate(0)
	m.checkAgainst(t, s, keys)
	if s.Files() != 0 || s.MaxPhysicalOffset() != 0 {
		t.Fatalf("after full truncate: %d files, max %d", s.Files(), s.MaxPhysicalOffset())
	}
	mustPut(t, s, "T#a", 5, ts)
	m.put("T#a", 5, ts)
	m.checkAgainst(t, s, keys)
}

// TestTruncateRepairsStaleSlots: an older file is not verified on open, so a
// damaged slot there is only found when truncation reaches it; the slot
// table is then rebuilt from the remaining entries.
func TestTruncateRepairsStaleSlots(t *testing.T) {
	opts := Options{SlotCount: 5, MaxEntries: 6} // 5 entries a file
	ops, keys := recoverWorkload(8)
	dir := t.TempDir()
	buildClosed(t, dir, opts, ops)
	names := fileNames(t, dir)
	if len(names) != 2 {
		t.Fatalf("files %v", names)
	}
	// Point the slot of entry 5 (the last of the first file) elsewhere.
	slot := int(KeyHash(ops[4].key)) % opts.SlotCount
	patch(t, filepath.Join(dir, names[0]), int64(HeaderSize+4*slot), be32(1))
	s := openTest(t, dir, opts)
	defer s.Close()
	cut := ops[3].phy
	if err := s.TruncateAfter(cut); err != nil {
		t.Fatal(err)
	}
	m := modelOf(opts, ops)
	m.truncate(cut)
	m.checkAgainst(t, s, keys)
	ref := openNoSync(t, t.TempDir(), opts)
	defer ref.Close()
	for _, op := range ops[:3] {
		mustPut(t, ref, op.key, op.phy, op.ts)
	}
	sameContent(t, s, ref)
}
