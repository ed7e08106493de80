package consumequeue

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/bolide-mq/bolide/internal/testutil"
	"go.uber.org/zap/zaptest"
)

// journalOptions make four or more written queues "many", so that
// FlushBelow leaves light queues staged and journals them.
func journalOptions() Options {
	return Options{UnitsPerFile: 100, FirstFileUnits: 16, SyncFSAbove: 2}
}

func openJournaled(t *testing.T, root string) *Store {
	t.Helper()
	s, err := Open(root, journalOptions(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// crash stops s as a killed process would: descriptors closed, nothing
// flushed, the journal left as it is.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for _, q := range s.all() {
		q.mu.Lock()
		segs := q.segs
		q.segs = nil
		q.closed.Store(true)
		q.mu.Unlock()
		for _, seg := range segs {
			if err := seg.closeFile(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := errors.Join(s.j.close(), s.fds.close()); err != nil {
		t.Fatal(err)
	}
}

// journaledStore makes 8 queues of topic "j" whose units [0, 5) are in
// their files and [5, 8) and [8, 10) were journaled by two periodic
// flushes, whose positions it returns.
func journaledStore(t *testing.T, root string) (*Store, JournalPosition, JournalPosition) {
	t.Helper()
	s := openJournaled(t, root)
	for i := range int32(8) {
		putRange(t, mustQueue(t, s, "j", i), 0, 5)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var pos [2]JournalPosition
	for k, r := range [][2]int64{{5, 8}, {8, 10}} {
		for i := range int32(8) {
			putRange(t, mustQueue(t, s, "j", i), r[0], r[1])
		}
		kept, err := s.FlushBelow(0)
		if err != nil {
			t.Fatal(err)
		}
		if want := unitFor(5).Offset; kept != want {
			t.Fatalf("flush %d: kept from %d, want the first staged unit's offset %d", k, kept, want)
		}
		pos[k] = s.Journal()
		if pos[k].Gen == 0 || pos[k].End == 0 {
			t.Fatalf("flush %d: journal at %+v, want blocks", k, pos[k])
		}
	}
	if pos[1].End <= pos[0].End || pos[1].Gen != pos[0].Gen {
		t.Fatalf("journal positions %+v then %+v", pos[0], pos[1])
	}
	return s, pos[0], pos[1]
}

// fileUnits reads queue j/id's units [0, n) from its files, bypassing
// the stage.
func fileUnits(t *testing.T, root string, id string, n int) []Unit {
	t.Helper()
	var all []byte
	for _, name := range queueFiles(t, root, "j", id) {
		b, err := os.ReadFile(filepath.Join(root, "j", id, name))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	out := make([]Unit, n)
	for i := range out {
		out[i] = decodeUnit(all[i*UnitSize:])
	}
	return out
}

func TestJournalPutsBackStagedUnits(t *testing.T) {
	root := t.TempDir()
	s, _, p2 := journaledStore(t, root)
	// The files hold only what the full flush wrote: the rest is staged
	// and journaled.
	if u := fileUnits(t, root, "3", 6); u[4] != unitFor(4) || u[5] != (Unit{}) {
		t.Fatalf("queue 3's file holds %+v at 4 and %+v at 5, want unit 4 then nothing", u[4], u[5])
	}
	crash(t, s)

	s = openJournaled(t, root)
	st := s.Replayed()
	if st.Units != 8*5 || st.Lost || !st.Covers(p2) {
		t.Fatalf("replayed %+v, want 40 units covering %+v", st, p2)
	}
	for i := range int32(8) {
		checkRange(t, mustQueue(t, s, "j", i), 0, 10)
	}
	// Puts go on after what was put back, and a close writes it all.
	putRange(t, mustQueue(t, s, "j", 0), 10, 12)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := fileUnits(t, root, "0", 12); u[11] != unitFor(11) {
		t.Fatalf("after close, queue 0's file holds %+v at 11", u[11])
	}
	s = openJournaled(t, root)
	defer s.Close()
	if st := s.Replayed(); st.Units != 0 || st.End != 0 || st.Gen <= p2.Gen {
		t.Fatalf("after a clean close the journal holds %+v, want none under a later generation than %d", st, p2.Gen)
	}
	checkRange(t, mustQueue(t, s, "j", 0), 0, 12)
	checkRange(t, mustQueue(t, s, "j", 7), 0, 10)
}

func TestJournalTornTail(t *testing.T) {
	root := t.TempDir()
	s, p1, p2 := journaledStore(t, root)
	crash(t, s)
	path := filepath.Join(root, journalName)
	if err := os.Truncate(path, journalHeaderSize+p2.End-3); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, root)
	st := s.Replayed()
	if st.Lost || !st.Covers(p1) || st.Covers(p2) || st.Units != 8*3 {
		t.Fatalf("replayed %+v: want the first block's 24 units, covering %+v and not %+v", st, p1, p2)
	}
	for i := range int32(8) {
		checkRange(t, mustQueue(t, s, "j", i), 0, 8)
	}
	// The torn bytes were cut, so new blocks follow the whole ones. (The
	// first flush after an open syncs every queue: the page cache may
	// hold what a crashed process wrote. The second journals.)
	for k := range int64(2) {
		for i := range int32(8) {
			putRange(t, mustQueue(t, s, "j", i), 8+k, 9+k)
		}
		if _, err := s.FlushBelow(0); err != nil {
			t.Fatal(err)
		}
	}
	p3 := s.Journal()
	if p3.Gen != p1.Gen || p3.End <= p1.End {
		t.Fatalf("journal at %+v after the cut at %+v", p3, p1)
	}
	crash(t, s)
	s = openJournaled(t, root)
	if st := s.Replayed(); st.Units != 8*4 || !st.Covers(p3) {
		t.Fatalf("replayed %+v, want 32 units covering %+v", st, p3)
	}
	checkRange(t, mustQueue(t, s, "j", 5), 0, 10)
	crash(t, s)

	// An unreadable header: nothing is put back, and nothing that relied
	// on the journal is covered.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[9] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, root)
	defer s.Close()
	if st := s.Replayed(); st.Gen != 0 || st.Units != 0 || st.Covers(p1) || !st.Covers(JournalPosition{Gen: 7}) {
		t.Fatalf("replayed %+v from a damaged journal", st)
	}
	checkRange(t, mustQueue(t, s, "j", 0), 0, 9) // the files' units only
}

func TestJournalAfterTruncation(t *testing.T) {
	root := t.TempDir()
	s, _, p2 := journaledStore(t, root)
	if err := s.TruncateAfter(unitFor(7).Offset); err != nil {
		t.Fatal(err)
	}
	if p := s.Journal(); p.End != 0 || p.Gen != p2.Gen+1 {
		t.Fatalf("after a truncation the journal is at %+v, want empty under generation %d", p, p2.Gen+1)
	}
	crash(t, s)
	s = openJournaled(t, root)
	defer s.Close()
	if st := s.Replayed(); st.Units != 0 || st.Lost {
		t.Fatalf("replayed %+v after a truncation", st)
	}
	for i := range int32(8) {
		if q := mustQueue(t, s, "j", i); q.MaxOffset() != 7 {
			t.Fatalf("queue %d ends at %d, want 7", i, q.MaxOffset())
		}
	}
}

func TestJournalAfterDeleteTopic(t *testing.T) {
	root := t.TempDir()
	s, _, _ := journaledStore(t, root)
	if err := s.DeleteTopic("j"); err != nil {
		t.Fatal(err)
	}
	// A topic of the same name again, with other units.
	other := func(i int64) Unit { return Unit{Offset: 5_000_000 + i*64, Size: 64} }
	for i := range int32(8) {
		q := mustQueue(t, s, "j", i)
		for k := range int64(3) {
			if err := q.Put(k, other(k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.FlushBelow(0); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	s = openJournaled(t, root)
	defer s.Close()
	if st := s.Replayed(); st.Lost {
		t.Fatalf("replayed %+v: the deleted topic's units came back", st)
	}
	q := mustQueue(t, s, "j", 2)
	if q.MaxOffset() != 3 {
		t.Fatalf("queue 2 ends at %d, want 3", q.MaxOffset())
	}
	for k := range int64(3) {
		if u, err := q.Get(k); err != nil || u != other(k) {
			t.Fatalf("unit %d: %+v %v", k, u, err)
		}
	}
}

// A journal that contradicts the files, or names a queue that has none,
// is reported lost: the caller rebuilds instead of trusting it.
func TestJournalContradictionIsLost(t *testing.T) {
	for name, entry := range map[string][]byte{
		"differs":   appendJournalEntry(nil, "j", 1, 3, unitBytes(Unit{Offset: 1, Size: 9}, Unit{Offset: 20, Size: 9})),
		"gap":       appendJournalEntry(nil, "j", 1, 9, unitBytes(unitFor(9))),
		"no queue":  appendJournalEntry(nil, "k", 0, 0, unitBytes(unitFor(0))),
		"bad order": appendJournalEntry(nil, "j", 1, 5, unitBytes(Unit{Offset: 10, Size: 9})),
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			s := openJournaled(t, root)
			for i := range int32(4) {
				putRange(t, mustQueue(t, s, "j", i), 0, 5)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			b := finishBlock(append(beginBlock(nil), entry...), s.j.gen)
			if err := s.j.append(b); err != nil {
				t.Fatal(err)
			}
			p := s.Journal()
			crash(t, s)
			s = openJournaled(t, root)
			defer s.Close()
			if st := s.Replayed(); !st.Lost || st.Covers(p) {
				t.Fatalf("replayed %+v, want it lost", st)
			}
			checkRange(t, mustQueue(t, s, "j", 1), 0, 5)
		})
	}
}

// unitBytes encodes us one after another.
func unitBytes(us ...Unit) []byte {
	b := make([]byte, len(us)*UnitSize)
	for i, u := range us {
		EncodeUnit(b[i*UnitSize:], u)
	}
	return b
}

func TestJournalCodec(t *testing.T) {
	gen, err := decodeJournalHeader(encodeJournalHeader(42))
	if err != nil || gen != 42 {
		t.Fatalf("header: %d %v", gen, err)
	}
	h := encodeJournalHeader(42)
	h[3] ^= 1
	if _, err := decodeJournalHeader(h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged header: %v", err)
	}
	b := beginBlock(nil)
	b = appendJournalEntry(b, "orders", 3, 17, unitBytes(unitFor(17), unitFor(18)))
	b = appendJournalEntry(b, "t", 0, 0, unitBytes(unitFor(0)))
	b = finishBlock(b, 42)
	p, n, ok := nextBlock(b, 42)
	if !ok || n != len(b) {
		t.Fatalf("block: ok %v n %d of %d", ok, n, len(b))
	}
	var got []journalEntry
	if err := decodeJournalEntries(p, func(e journalEntry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Topic != "orders" || got[0].QueueID != 3 || got[0].From != 17 ||
		!bytes.Equal(got[0].Units, unitBytes(unitFor(17), unitFor(18))) || got[1].Topic != "t" || len(got[1].Units) != UnitSize {
		t.Fatalf("entries %+v", got)
	}
	if _, _, ok := nextBlock(b, 43); ok {
		t.Fatal("a block passed under another generation")
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, _, ok := nextBlock(c, 42); ok {
			t.Fatalf("a block with byte %d changed passed", i)
		}
	}
	if _, _, ok := nextBlock(b[:len(b)-1], 42); ok {
		t.Fatal("a cut block passed")
	}
}

// FuzzJournalBlock: any bytes, read as a journal's blocks, are refused or
// decoded without a panic, and entries never claim more than they hold.
func FuzzJournalBlock(f *testing.F) {
	b := beginBlock(nil)
	b = appendJournalEntry(b, "orders", 3, 17, unitBytes(unitFor(17), unitFor(18)))
	f.Add(finishBlock(b, 1), false)
	f.Add(appendJournalEntry(nil, "x", 1, 2, unitBytes(unitFor(2))), true)
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		payload := data
		if !raw {
			p, n, ok := nextBlock(data, 1)
			if !ok {
				return
			}
			if n > len(data) || len(p) != n-blockHeaderSize {
				t.Fatalf("block of %d bytes from %d", n, len(data))
			}
			payload = p
		}
		_ = decodeJournalEntries(payload, func(e journalEntry) error {
			if len(e.Units) == 0 || len(e.Units)%UnitSize != 0 || e.From < 0 {
				t.Fatalf("entry %+v", e)
			}
			return nil
		})
	})
}

// TestJournalOnFullDisk: when the journal cannot grow (a full disk), a
// periodic flush writes every queue to its preallocated file instead, so
// nothing is left relying on the journal, and later flushes go on.
func TestJournalOnFullDisk(t *testing.T) {
	mnt := testutil.MountTmpfs(t, "1m")
	root := filepath.Join(mnt, "cq")
	s := openJournaled(t, root)
	t.Cleanup(func() { _ = s.Close() })
	const queues = 64 // a flush's block is more than the journal's first page
	for i := range int32(queues) {
		putRange(t, mustQueue(t, s, "j", i), 0, 5)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := s.Journal(); p.Gen == 0 || p.End != 0 {
		t.Fatalf("journal at %+v after the first flush", p)
	}
	fill(t, mnt)
	for k := range int64(3) {
		for i := range int32(queues) {
			putRange(t, mustQueue(t, s, "j", i), 5+3*k, 8+3*k)
		}
		kept, err := s.FlushBelow(0)
		if err != nil {
			t.Fatalf("flush %d on a full disk: %v", k, err)
		}
		if p := s.Journal(); kept != math.MaxInt64 || p.End != 0 {
			t.Fatalf("flush %d on a full disk left units from %d relying on the journal at %+v", k, kept, p)
		}
	}
	if u := fileUnits(t, root, "6", 14); u[13] != unitFor(13) {
		t.Fatalf("queue 6's file holds %+v at 13, want unit 13", u[13])
	}
	crash(t, s)
	s = openJournaled(t, root)
	defer s.Close()
	if st := s.Replayed(); st.Lost || st.Units != 0 {
		t.Fatalf("replayed %+v", st)
	}
	checkRange(t, mustQueue(t, s, "j", 6), 0, 14)
}

// TestJournalReplayKeepsOpenFilesBudget: putting back entries whose units
// are in the files already reads those files; over many queues the
// replay closes them again as it goes, within MaxOpenFiles.
func TestJournalReplayKeepsOpenFilesBudget(t *testing.T) {
	root := t.TempDir()
	opts := journalOptions()
	opts.MaxOpenFiles = 4
	s, err := Open(root, opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	const queues = 40
	for i := range int32(queues) {
		putRange(t, mustQueue(t, s, "j", i), 0, 5)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range int32(queues) {
		putRange(t, mustQueue(t, s, "j", i), 5, 8)
	}
	if _, err := s.FlushBelow(0); err != nil { // journaled
		t.Fatal(err)
	}
	if _, err := s.FlushBelow(math.MaxInt64); err != nil { // written to the files, still journaled
		t.Fatal(err)
	}
	if p := s.Journal(); p.End == 0 {
		t.Fatal("the journal was emptied")
	}
	crash(t, s)
	s, err = Open(root, opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Replayed(); st.Lost || st.Units != queues*3 {
		t.Fatalf("replayed %+v", st)
	}
	if n := s.OpenFiles(); n > int64(opts.MaxOpenFiles) {
		t.Fatalf("%d files open after the replay, MaxOpenFiles %d", n, opts.MaxOpenFiles)
	}
	checkRange(t, mustQueue(t, s, "j", 39), 0, 8)
}

// TestStorePassesKeepOpenFilesBudget: TruncateAfter and DeleteBefore over
// many queues read every queue's files (their searches); they close them
// again as they go once over MaxOpenFiles.
func TestStorePassesKeepOpenFilesBudget(t *testing.T) {
	opts := journalOptions()
	opts.MaxOpenFiles = 4
	s, err := Open(t.TempDir(), opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const queues = 40
	for i := range int32(queues) {
		putRange(t, mustQueue(t, s, "j", i), 0, 10)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenFiles(); n > int64(opts.MaxOpenFiles) {
		t.Fatalf("%d files open after a flush", n)
	}
	if err := s.TruncateAfter(unitFor(8).Offset); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenFiles(); n > int64(opts.MaxOpenFiles) {
		t.Fatalf("%d files open after TruncateAfter, MaxOpenFiles %d", n, opts.MaxOpenFiles)
	}
	if _, err := s.DeleteBefore(unitFor(3).Offset); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenFiles(); n > int64(opts.MaxOpenFiles) {
		t.Fatalf("%d files open after DeleteBefore, MaxOpenFiles %d", n, opts.MaxOpenFiles)
	}
	q := mustQueue(t, s, "j", 17)
	if q.MinOffset() != 3 || q.MaxOffset() != 8 {
		t.Fatalf("queue 17 holds [%d, %d), want [3, 8)", q.MinOffset(), q.MaxOffset())
	}
}

// TestSearchAcrossStage: a search finds the first matching unit whether
// it lies in the files, at the first staged unit, or among the staged.
func TestSearchAcrossStage(t *testing.T) {
	s := openJournaled(t, t.TempDir())
	defer s.Close()
	q := mustQueue(t, s, "j", 0)
	putRange(t, q, 0, 10)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 10, 16) // staged
	for k := int64(0); k <= 17; k++ {
		phy := unitFor(k).Offset - 1 // between unit k-1 and unit k
		q.mu.RLock()
		got, err := q.searchUnits(q.MinOffset(), q.MaxOffset(), func(u Unit) bool { return u.Offset >= phy })
		q.mu.RUnlock()
		if want := min(k, 16); err != nil || got != want {
			t.Fatalf("search for offset %d: %d %v, want %d", phy, got, err, want)
		}
	}
}

// TestJournalStagedBound: when the units a periodic flush would leave
// staged hold more than MaxStagedBytes, it writes every queue instead.
func TestJournalStagedBound(t *testing.T) {
	root := t.TempDir()
	opts := journalOptions()
	opts.MaxStagedBytes = 8 * 3 * UnitSize // less than 8 queues of 5 staged units
	s, err := Open(root, opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range int32(8) {
		putRange(t, mustQueue(t, s, "j", i), 0, 5)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range int32(8) {
		putRange(t, mustQueue(t, s, "j", i), 5, 8)
	}
	if kept, err := s.FlushBelow(0); err != nil || kept == math.MaxInt64 {
		t.Fatalf("3 units a queue, within the bound: kept from %d, %v", kept, err)
	}
	for i := range int32(8) {
		putRange(t, mustQueue(t, s, "j", i), 8, 10)
	}
	kept, err := s.FlushBelow(0)
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Journal(); kept != math.MaxInt64 || p.End != 0 {
		t.Fatalf("5 units a queue, over the bound: kept from %d, journal at %+v", kept, p)
	}
	if u := fileUnits(t, root, "2", 10); u[9] != unitFor(9) {
		t.Fatalf("queue 2's file holds %+v at 9", u[9])
	}
}

// A process killed while a flush writes journaled units to their file
// leaves the write cut at a page boundary: the unit that spans it holds
// its first bytes and zeros after, and passes for data when its offset
// and size were written. Replay puts the journaled unit in its place; a
// difference of any other shape is still lost.
func TestJournalReplacesUnitTornAtPageBoundary(t *testing.T) {
	page := int64(os.Getpagesize())
	// The first page boundary that cuts a unit after its size: the torn
	// unit is then valid and differs only in its tag hash.
	k, p := int64(0), int64(0)
	for b := page; ; b += page {
		if k, p = b/UnitSize, b%UnitSize; p >= 12 {
			break
		}
	}
	opts := Options{UnitsPerFile: int(k) + 100, FirstFileUnits: int(k) + 100, SyncFSAbove: 2}
	// Cut after its 19th byte, the unit differs from the journaled one in
	// a byte the page boundary's cut would have left zero.
	for name, cut := range map[string]int64{"at a page boundary": p, "elsewhere": UnitSize - 1} {
		t.Run(name, func(t *testing.T) {
			if name == "elsewhere" && p == UnitSize-1 {
				t.Skip("the page boundary falls there")
			}
			root := t.TempDir()
			s, err := Open(root, opts, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			for i := range int32(4) {
				putRange(t, mustQueue(t, s, "j", i), 0, k)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			for i := range int32(4) {
				putRange(t, mustQueue(t, s, "j", i), k, k+3)
			}
			if _, err := s.FlushBelow(0); err != nil {
				t.Fatal(err)
			}
			pos := s.Journal()
			if pos.End == 0 {
				t.Fatalf("journal at %+v, want the staged units in it", pos)
			}
			crash(t, s)
			// The later write of queue 1's units k, k+1, k+2, cut.
			b := unitBytes(unitFor(k), unitFor(k+1), unitFor(k+2))[:cut]
			path := filepath.Join(root, "j", "1", queueFiles(t, root, "j", "1")[0])
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(b, k*UnitSize); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if u := fileUnits(t, root, "1", int(k+1))[k]; !u.valid() || u == unitFor(k) {
				t.Fatalf("the cut unit reads %+v: want a valid unit that differs from %+v", u, unitFor(k))
			}

			s, err = Open(root, opts, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			st := s.Replayed()
			if cut != p {
				if !st.Lost || st.Covers(pos) {
					t.Fatalf("replayed %+v, want it lost", st)
				}
				_ = s.Close()
				return
			}
			if st.Lost || !st.Covers(pos) || st.Units != 4*3 {
				t.Fatalf("replayed %+v, want 12 units covering %+v", st, pos)
			}
			for i := range int32(4) {
				checkRange(t, mustQueue(t, s, "j", i), 0, k+3)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if u := fileUnits(t, root, "1", int(k+3)); u[k] != unitFor(k) || u[k+2] != unitFor(k+2) {
				t.Fatalf("after a close the file holds %+v and %+v at %d and %d", u[k], u[k+2], k, k+2)
			}
		})
	}
}
