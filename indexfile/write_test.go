package indexfile

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestFlushedEntriesSurviveACrash: what Flush wrote (entries and header of
// the active file, whose slots are only in memory) and the full older file
// (written whole before the next was created) are found again after the
// process dies without Close; entries put after the last flush are not.
func TestFlushedEntriesSurviveACrash(t *testing.T) {
	opts := Options{SlotCount: 7, MaxEntries: 30} // 29 entries a file
	ops, keys := recoverWorkload(55)
	dir := t.TempDir()
	s := openTest(t, dir, opts)
	defer s.Close()
	for _, op := range ops[:50] {
		mustPut(t, s, op.key, op.phy, op.ts)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops[50:] {
		mustPut(t, s, op.key, op.phy, op.ts)
	}
	if n := len(fileNames(t, dir)); n != 2 {
		t.Fatalf("%d files, want 2 (the workload must roll over once)", n)
	}
	modelOf(opts, ops).checkAgainst(t, s, keys) // the live store sees all 55

	crashed := openTest(t, testutil.CrashCopy(t, dir), opts)
	defer crashed.Close()
	modelOf(opts, ops[:50]).checkAgainst(t, crashed, keys)

	// The recovered store takes new entries where the flushed ones end.
	for _, op := range ops[50:] {
		mustPut(t, crashed, op.key, op.phy, op.ts)
	}
	modelOf(opts, ops).checkAgainst(t, crashed, keys)
}

// TestCloseWritesTheActiveSlotTable: after Close the newest file is a
// complete RocketMQ IndexFile, slot table included.
func TestCloseWritesTheActiveSlotTable(t *testing.T) {
	opts := Options{SlotCount: 11, MaxEntries: 100}
	ops, _ := recoverWorkload(40)
	dir := t.TempDir()
	buildClosed(t, dir, opts, ops)
	names := fileNames(t, dir)
	raw, err := os.ReadFile(filepath.Join(dir, names[len(names)-1]))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int32, opts.SlotCount)
	for i, op := range ops {
		want[int(KeyHash(op.key))%opts.SlotCount] = int32(i + 1)
	}
	for s, w := range want {
		if got := int32(binary.BigEndian.Uint32(raw[HeaderSize+s*SlotSize:])); got != w {
			t.Fatalf("slot %d on disk = %d, want %d", s, got, w)
		}
	}
	if h, err := DecodeHeader(raw); err != nil || h.IndexCount != int32(len(ops)+1) {
		t.Fatalf("header on disk %+v (%v), want indexCount %d", h, err, len(ops)+1)
	}
}

// TestFlushWritesWhatTheMappingReads: Put keeps new entries in memory; Flush
// writes them and the header into the file, where the mapping reads them.
func TestFlushWritesWhatTheMappingReads(t *testing.T) {
	opts := Options{SlotCount: 11, MaxEntries: 100}
	ops, keys := recoverWorkload(30)
	s := openTest(t, t.TempDir(), opts)
	defer s.Close()
	for _, op := range ops {
		mustPut(t, s, op.key, op.phy, op.ts)
	}
	f := s.files[0]
	if !isZero(mappedEntry(f, 1)) {
		t.Fatal("entry 1 reached the file before a flush")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := int32(1); i <= int32(len(ops)); i++ {
		e, err := DecodeEntry(mappedEntry(f, i))
		if err != nil || e.PhyOffset != ops[i-1].phy || e.KeyHash != KeyHash(ops[i-1].key) {
			t.Fatalf("entry %d in the file: %+v (%v), want offset %d", i, e, err, ops[i-1].phy)
		}
	}
	if h, _ := DecodeHeader(f.data); h != f.hdr {
		t.Fatalf("header in the file %+v, in memory %+v", h, f.hdr)
	}
	modelOf(opts, ops).checkAgainst(t, s, keys)
}
