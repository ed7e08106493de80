package indexfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/mmap"
)

// file is one index file. Its mutable state is guarded by the Store:
// writes under Store.mu held for writing, reads under Store.mu held for
// reading; closing additionally holds Store.flushMu.
//
// The file is mapped for reading. Only recovery (Open) writes through the
// mapping. The newest file, the only one that takes entries, is "active":
// its slot table lives in memory (slots) and its new entries in a buffer
// (pending) until a flush writes them with pwrite. So the dispatcher never
// stores into a mapped page: after a flush cleans a mapped page, the next
// store into it faults and can wait for the flush's writeback and journal,
// which stalled dispatch for tens of milliseconds under load. The slot
// table of the active file reaches the file when the file is full (before
// a newer one is created) and at Close; recovery rebuilds the newest file's
// slots from its entries anyway (doc.go, "Recovery").
type file struct {
	name    string // base name, yyyyMMddHHmmssSSS
	path    string
	opts    Options
	entBase int // byte offset of entry position 0

	f    *os.File
	m    *mmap.Mapping
	data []byte

	// hdr is the header readers use; the file gets it at the next flush.
	hdr Header

	// slots is the active file's slot table; nil for older files, whose
	// slots are read from the mapping.
	slots []int32
	// Entries below written are in the file. Entries from written on are
	// in flushing (while a flush writes them) and then pending.
	written  int32
	flushing []byte
	pending  []byte
	spare    []byte // a recycled entry buffer

	dirty  atomic.Bool // changed since the last sync
	closed bool
}

// createFile creates, preallocates, syncs and maps a new empty file. The
// directory entry is made durable before the file is used, so entries that a
// later Flush covers cannot vanish with the file.
func createFile(root, name string, opts Options, durable bool) (*file, error) {
	path := filepath.Join(root, name)
	osf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create index file: %w", err)
	}
	fail := func(err error) (*file, error) {
		_ = osf.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create index file %s: %w", path, err)
	}
	size := opts.FileSize()
	if err := fsutil.Preallocate(osf, size); err != nil {
		if opts.Spare == nil || !fsutil.IsNoSpace(err) {
			return fail(err)
		}
		// The disk is full: take a preallocated file from the reserve.
		_ = osf.Close()
		_ = os.Remove(path)
		var serr error
		if osf, serr = opts.Spare(path, size); serr != nil {
			return nil, fmt.Errorf("create index file %s: %w; no spare file either: %v", path, err, serr)
		}
	}
	if durable {
		if err := osf.Sync(); err != nil {
			return fail(err)
		}
		if err := fsutil.SyncDir(root); err != nil {
			return fail(err)
		}
	}
	m, err := mmap.Map(osf, int(size), true)
	if err != nil {
		return fail(err)
	}
	f := &file{name: name, path: path, opts: opts, entBase: opts.entriesOffset(), f: osf, m: m, data: m.Data}
	f.setHeader(Header{IndexCount: 1})
	f.activate(make([]int32, opts.SlotCount))
	return f, nil
}

// mapExisting opens path and maps it at full size, re-extending a file that
// is shorter than the options say (a power loss can cut it). short reports
// that it was re-extended.
func mapExisting(root, name string, opts Options) (f *file, short bool, err error) {
	path := filepath.Join(root, name)
	osf, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, false, fmt.Errorf("open index file: %w", err)
	}
	st, err := osf.Stat()
	if err != nil {
		_ = osf.Close()
		return nil, false, fmt.Errorf("open index file %s: %w", path, err)
	}
	size := opts.FileSize()
	if st.Size() > size {
		_ = osf.Close()
		return nil, false, fmt.Errorf("open index file %s: size %d exceeds %d for SlotCount %d, MaxEntries %d (options changed?): %w",
			path, st.Size(), size, opts.SlotCount, opts.MaxEntries, ErrCorrupt)
	}
	if st.Size() < size {
		short = true
		if err := fsutil.Preallocate(osf, size); err != nil {
			_ = osf.Close()
			return nil, false, fmt.Errorf("re-extend index file %s from %d bytes: %w", path, st.Size(), err)
		}
	}
	m, err := mmap.Map(osf, int(size), true)
	if err != nil {
		_ = osf.Close()
		return nil, false, fmt.Errorf("open index file %s: %w", path, err)
	}
	f = &file{name: name, path: path, opts: opts, entBase: opts.entriesOffset(), f: osf, m: m, data: m.Data}
	if short {
		f.dirty.Store(true)
	}
	return f, short, nil
}

// activate makes f the file that takes entries, with slots as its slot
// table (nil: copy it from the mapping).
func (f *file) activate(slots []int32) {
	if slots == nil {
		slots = make([]int32, f.opts.SlotCount)
		for s := range slots {
			slots[s] = f.mappedSlot(s)
		}
	}
	f.slots = slots
	f.written = max(f.hdr.IndexCount, 1)
	f.pending = f.pending[:0]
}

// deactivate turns a full active file, whose entries and slots are all in
// the file, into an older one that is read through the mapping.
func (f *file) deactivate() {
	f.slots, f.pending, f.spare = nil, nil, nil
}

func (f *file) empty() bool { return f.hdr.IndexCount <= 1 }
func (f *file) full() bool  { return int(f.hdr.IndexCount) >= f.opts.MaxEntries }

func (f *file) slotOf(hash int32) int { return int(hash) % f.opts.SlotCount }

func (f *file) slot(s int) int32 {
	if f.slots != nil {
		return f.slots[s]
	}
	return f.mappedSlot(s)
}

func (f *file) mappedSlot(s int) int32 {
	return int32(binary.BigEndian.Uint32(f.data[HeaderSize+s*SlotSize:]))
}

// setSlot changes a slot: in memory for the active file, else (recovery of
// an older file) through the mapping.
func (f *file) setSlot(s int, v int32) {
	if f.slots != nil {
		f.slots[s] = v
		return
	}
	binary.BigEndian.PutUint32(f.data[HeaderSize+s*SlotSize:], uint32(v))
	f.dirty.Store(true)
}

// entryBytes returns entry i wherever it is: the mapping, the buffer being
// flushed or the pending buffer. Only recovery, before the file is active,
// stores into what it returns.
func (f *file) entryBytes(i int32) []byte {
	if f.slots != nil && i >= f.written {
		j := int(i-f.written) * EntrySize
		if j < len(f.flushing) {
			return f.flushing[j : j+EntrySize : j+EntrySize]
		}
		j -= len(f.flushing)
		return f.pending[j : j+EntrySize : j+EntrySize]
	}
	off := f.entBase + int(i)*EntrySize
	return f.data[off : off+EntrySize : off+EntrySize]
}

func (f *file) entry(i int32) Entry { return decodeEntryUnchecked(f.entryBytes(i)) }

// entryTime is the time a query compares for an entry: the header begin
// timestamp plus the stored whole seconds.
func (f *file) entryTime(diff int32) int64 {
	return f.hdr.BeginTimestamp + int64(diff)*1000
}

// setHeader changes the header readers see; the file gets it at the next
// flush.
func (f *file) setHeader(h Header) {
	f.hdr = h
	f.dirty.Store(true)
}

// timeDiff converts a store timestamp into the entry's seconds field exactly
// as RocketMQ does: truncated whole seconds since the header begin, clamped
// to [0, MaxInt32], and 0 while the header begin timestamp is not positive.
func (f *file) timeDiff(ts int64) int32 {
	if f.hdr.IndexCount <= 1 || f.hdr.BeginTimestamp <= 0 {
		return 0
	}
	d := (ts - f.hdr.BeginTimestamp) / 1000
	switch {
	case d > math.MaxInt32:
		return math.MaxInt32
	case d < 0:
		return 0
	}
	return int32(d)
}

// put appends one entry to the active file. Readers see it once Store.mu
// is released; the file gets it at the next flush.
func (f *file) put(hash int32, phy, ts int64) error {
	if f.full() {
		return fmt.Errorf("put into %s: %w", f.path, ErrFull)
	}
	h := f.hdr
	idx := h.IndexCount
	s := f.slotOf(hash)
	head := f.slot(s)
	if head <= 0 || head >= idx {
		head = 0 // empty, or a stale pointer past the published entries
	}
	n := len(f.pending)
	f.pending = slices.Grow(f.pending, EntrySize)[:n+EntrySize]
	EncodeEntry(f.pending[n:], Entry{KeyHash: hash, PhyOffset: phy, TimeDiff: f.timeDiff(ts), PrevIndex: head})
	f.setSlot(s, idx)
	if idx == 1 {
		h.BeginTimestamp = ts
		h.BeginPhyOffset = phy
	}
	if head == 0 {
		h.SlotCount++
	}
	h.EndTimestamp = ts
	h.EndPhyOffset = phy
	h.IndexCount = idx + 1
	f.setHeader(h)
	return nil
}

// overlaps reports whether the file's [begin, end] timestamps meet the
// query range (RocketMQ IndexFile.isTimeMatched).
func (f *file) overlaps(begin, end int64) bool {
	return begin <= f.hdr.EndTimestamp && end >= f.hdr.BeginTimestamp
}

// query appends to out the physical offsets of entries in hash's chain whose
// hash equals hash and whose time lies in [begin, end], newest first, until
// out holds max offsets.
func (f *file) query(hash int32, begin, end int64, max int, out []int64) []int64 {
	n := f.hdr.IndexCount
	if n <= 1 {
		return out
	}
	cur := f.slot(f.slotOf(hash))
	if cur <= 0 || cur >= n {
		return out
	}
	for len(out) < max {
		e := f.entry(cur)
		if e.TimeDiff < 0 {
			break
		}
		t := f.entryTime(e.TimeDiff)
		if e.KeyHash == hash && t >= begin && t <= end {
			if out == nil {
				out = make([]int64, 0, min(max, 32))
			}
			out = append(out, e.PhyOffset)
		}
		// Chains only go back (prev < cur), which also bounds the walk.
		// Times do not grow going back, so nothing older can match once
		// t < begin (timestamps are assumed non-decreasing; see doc.go).
		if e.PrevIndex <= 0 || e.PrevIndex >= cur || t < begin {
			break
		}
		cur = e.PrevIndex
	}
	return out
}

// truncateFrom removes every entry of the active file whose PhyOffset >=
// phy, newest first: unpublish it (indexCount), point its slot back at its
// PrevIndex, drop it. It reports how many entries it removed.
func (f *file) truncateFrom(phy int64) (int, error) {
	h := f.hdr
	removed := 0
	mismatch := false
	for i := h.IndexCount - 1; i >= 1; i-- {
		e := f.entry(i)
		if e.PhyOffset < phy {
			break
		}
		h.IndexCount = i
		if e.KeyHash < 0 { // damaged (an unverified older file): rebuild below
			mismatch = true
		} else if s := f.slotOf(e.KeyHash); f.slot(s) == i {
			f.setSlot(s, e.PrevIndex)
			if e.PrevIndex == 0 && h.SlotCount > 0 {
				h.SlotCount--
			}
		} else {
			mismatch = true // repaired below by a rebuild
		}
		removed++
	}
	if removed == 0 {
		return 0, nil
	}
	if err := f.dropEntriesFrom(h.IndexCount); err != nil {
		return 0, err
	}
	if mismatch {
		h.SlotCount = f.rebuildSlots(h.IndexCount)
	}
	if h.IndexCount <= 1 {
		h = Header{IndexCount: 1}
	} else {
		last := f.entry(h.IndexCount - 1)
		h.EndPhyOffset = last.PhyOffset
		// The exact store time of the last entry is not recorded; this
		// is a lower bound that still covers every remaining entry time.
		h.EndTimestamp = h.BeginTimestamp + int64(last.TimeDiff)*1000
	}
	f.setHeader(h)
	return removed, nil
}

// dropEntriesFrom forgets the active file's entries from position k on:
// buffered ones are cut off, written ones are zeroed in the file so that
// "unwritten means zero" stays true for recovery. No flush may be running
// (Store.flushMu is held).
func (f *file) dropEntriesFrom(k int32) error {
	if k >= f.written {
		f.pending = f.pending[:int(k-f.written)*EntrySize]
		return nil
	}
	if err := f.writeEntries(make([]byte, int(f.written-k)*EntrySize), k); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	f.written = k
	f.pending = f.pending[:0]
	f.dirty.Store(true)
	return nil
}

// rebuildSlots recomputes the slot table from entries 1..n-1 and returns
// the number of slots in use.
func (f *file) rebuildSlots(n int32) int32 {
	if f.slots != nil {
		clear(f.slots)
	} else {
		clear(f.data[HeaderSize:f.entBase])
	}
	var used int32
	for i := int32(1); i < n; i++ {
		hash := f.entry(i).KeyHash
		if hash < 0 {
			continue // damaged entry: unreachable, as no key hashes below 0
		}
		s := f.slotOf(hash)
		if f.slot(s) == 0 {
			used++
		}
		f.setSlot(s, i)
	}
	f.dirty.Store(true)
	return used
}

// beginFlush hands the pending entries to a flush (they stay readable in
// flushing) and returns them with their first position and the header to
// write. Store.mu is held for writing.
func (f *file) beginFlush() (entries []byte, first int32, h Header) {
	if f.slots != nil && len(f.pending) > 0 {
		f.flushing, f.pending, f.spare = f.pending, f.spare[:0], nil
	}
	return f.flushing, f.written, f.hdr
}

// writeOut writes entries (from position first) and then the header into
// the file. Store.flushMu is held, Store.mu is not.
func (f *file) writeOut(entries []byte, first int32, h Header) error {
	if err := f.writeEntries(entries, first); err != nil {
		return err
	}
	var hb [HeaderSize]byte
	EncodeHeader(hb[:], h)
	if _, err := f.f.WriteAt(hb[:], 0); err != nil {
		return fmt.Errorf("write index file %s header: %w", f.path, err)
	}
	return nil
}

// writeEntries writes encoded entries into the file from position first.
func (f *file) writeEntries(entries []byte, first int32) error {
	if len(entries) == 0 {
		return nil
	}
	if _, err := f.f.WriteAt(entries, int64(f.entBase)+int64(first)*EntrySize); err != nil {
		return fmt.Errorf("write index file %s: %w", f.path, err)
	}
	return nil
}

// endFlush records that the flushing entries are in the file (ok) or puts
// them back in front of the pending ones. Store.mu is held for writing.
func (f *file) endFlush(ok bool) {
	if len(f.flushing) == 0 {
		return
	}
	if ok {
		f.written += int32(len(f.flushing) / EntrySize)
		f.spare = f.flushing[:0]
	} else {
		f.pending = append(f.flushing, f.pending...)
	}
	f.flushing = nil
}

// writePending writes the pending entries into the file. Store.mu is held
// for writing and no flush is between beginFlush and endFlush.
func (f *file) writePending() error {
	if err := f.writeEntries(f.pending, f.written); err != nil {
		return err
	}
	f.written += int32(len(f.pending) / EntrySize)
	f.pending = f.pending[:0]
	return nil
}

// writeSlots writes the active file's slot table into the file. Nothing may
// change the slots meanwhile: the file is full, or Store.mu is held.
func (f *file) writeSlots() error {
	const chunk = 64 << 10 // slots per write
	buf := make([]byte, min(len(f.slots), chunk)*SlotSize)
	for from := 0; from < len(f.slots); from += chunk {
		part := f.slots[from:min(from+chunk, len(f.slots))]
		b := buf[:len(part)*SlotSize]
		for i, v := range part {
			binary.BigEndian.PutUint32(b[i*SlotSize:], uint32(v))
		}
		if _, err := f.f.WriteAt(b, int64(HeaderSize+from*SlotSize)); err != nil {
			return fmt.Errorf("write index file %s slots: %w", f.path, err)
		}
	}
	return nil
}

// syncData makes everything written to the file durable.
func (f *file) syncData() error {
	if err := fsutil.BackgroundFdatasync(f.f); err != nil {
		return fmt.Errorf("flush index file %s: %w", f.path, err)
	}
	return nil
}

// close unmaps and closes the file without flushing.
func (f *file) close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	err := f.m.Unmap()
	if cerr := f.f.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close index file %s: %w", f.path, cerr))
	}
	return err
}

// remove closes the file and deletes it from disk.
func (f *file) remove() error {
	err := f.close()
	if rerr := os.Remove(f.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("remove index file: %w", rerr))
	}
	return err
}
