package indexfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/mmap"
)

// file is one mapped index file. Its mutable state is guarded by the Store:
// writes under Store.mu held for writing, reads under Store.mu held for
// reading; closing additionally holds Store.flushMu.
type file struct {
	name    string // base name, yyyyMMddHHmmssSSS
	path    string
	opts    Options
	entBase int // byte offset of entry position 0

	f    *os.File
	m    *mmap.Mapping
	data []byte

	// hdr mirrors data[:HeaderSize]; it is the copy readers use.
	hdr Header

	dirty  atomic.Bool // written since the last sync
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
		return fail(err)
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
	f.writeHeader(Header{IndexCount: 1})
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

func (f *file) empty() bool { return f.hdr.IndexCount <= 1 }
func (f *file) full() bool  { return int(f.hdr.IndexCount) >= f.opts.MaxEntries }

func (f *file) slotOf(hash int32) int { return int(hash) % f.opts.SlotCount }

func (f *file) slot(s int) int32 {
	return int32(binary.BigEndian.Uint32(f.data[HeaderSize+s*SlotSize:]))
}

func (f *file) setSlot(s int, v int32) {
	binary.BigEndian.PutUint32(f.data[HeaderSize+s*SlotSize:], uint32(v))
}

func (f *file) entryBytes(i int32) []byte {
	off := f.entBase + int(i)*EntrySize
	return f.data[off : off+EntrySize : off+EntrySize]
}

func (f *file) entry(i int32) Entry { return decodeEntryUnchecked(f.entryBytes(i)) }

// entryTime is the time a query compares for an entry: the header begin
// timestamp plus the stored whole seconds.
func (f *file) entryTime(diff int32) int64 {
	return f.hdr.BeginTimestamp + int64(diff)*1000
}

// writeHeader stores h in the mapping and in memory. IndexCount is stored
// last and atomically, so it is published only after everything it covers.
func (f *file) writeHeader(h Header) {
	d := f.data
	binary.BigEndian.PutUint64(d[offBeginTimestamp:], uint64(h.BeginTimestamp))
	binary.BigEndian.PutUint64(d[offEndTimestamp:], uint64(h.EndTimestamp))
	binary.BigEndian.PutUint64(d[offBeginPhyOffset:], uint64(h.BeginPhyOffset))
	binary.BigEndian.PutUint64(d[offEndPhyOffset:], uint64(h.EndPhyOffset))
	binary.BigEndian.PutUint32(d[offHashSlotCount:], uint32(h.SlotCount))
	f.storeIndexCount(h.IndexCount)
	f.hdr = h
	f.dirty.Store(true)
}

// storeIndexCount writes the header's indexCount with an atomic (hence
// ordered) store: neither the compiler nor the CPU may move the earlier
// stores to the entry and slot after it. Offset 36 of a page-aligned mapping
// is 4-aligned.
func (f *file) storeIndexCount(n int32) {
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], uint32(n))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&f.data[offIndexCount])), binary.NativeEndian.Uint32(be[:]))
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

// put appends one entry. Publish order: entry, then slot, then header with
// indexCount last.
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
	EncodeEntry(f.entryBytes(idx), Entry{KeyHash: hash, PhyOffset: phy, TimeDiff: f.timeDiff(ts), PrevIndex: head})
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
	f.writeHeader(h)
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

// truncateFrom removes every entry whose PhyOffset >= phy, newest first:
// unpublish it (indexCount), point its slot back at its PrevIndex, zero it.
// It reports how many entries it removed.
func (f *file) truncateFrom(phy int64) int {
	h := f.hdr
	removed := 0
	mismatch := false
	for i := h.IndexCount - 1; i >= 1; i-- {
		e := f.entry(i)
		if e.PhyOffset < phy {
			break
		}
		h.IndexCount = i
		f.storeIndexCount(i)
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
		clear(f.entryBytes(i))
		removed++
	}
	if removed == 0 {
		return 0
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
	f.writeHeader(h)
	return removed
}

// rebuildSlots recomputes the slot table from entries 1..n-1 and returns
// the number of slots in use.
func (f *file) rebuildSlots(n int32) int32 {
	clear(f.data[HeaderSize:f.entBase])
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

// sync flushes the whole mapping to disk if it was written since the last
// sync.
func (f *file) sync() error {
	if f.closed || !f.dirty.Swap(false) {
		return nil
	}
	if err := f.m.Sync(0, len(f.data)); err != nil {
		f.dirty.Store(true)
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
