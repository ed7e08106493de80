package indexfile

import (
	"fmt"

	"go.uber.org/zap"
)

// checkHeader reports why h cannot be the header of a file made with opts.
// An all-zero header is fine: it is a file that was created but never
// written (RocketMQ also reads indexCount 0 as 1).
func (o Options) checkHeader(h Header) error {
	switch {
	case h.IndexCount == 0:
		if h != (Header{}) {
			return fmt.Errorf("indexCount 0 with non-zero fields %+v: %w", h, ErrCorrupt)
		}
	case int(h.IndexCount) > o.MaxEntries:
		return fmt.Errorf("indexCount %d exceeds MaxEntries %d: %w", h.IndexCount, o.MaxEntries, ErrCorrupt)
	case int(h.SlotCount) > o.SlotCount || h.SlotCount > h.IndexCount-1:
		return fmt.Errorf("hashSlotCount %d exceeds slots %d or entries %d: %w",
			h.SlotCount, o.SlotCount, h.IndexCount-1, ErrCorrupt)
	case h.IndexCount > 1 && (h.BeginPhyOffset < 0 || h.EndPhyOffset < h.BeginPhyOffset):
		return fmt.Errorf("phy offsets [%d, %d] out of order: %w", h.BeginPhyOffset, h.EndPhyOffset, ErrCorrupt)
	}
	return nil
}

// loadFile opens an existing index file. A file whose header is broken is
// reset to empty. When verify is set, or the file was cut short, its entries
// are checked and the file is cut back to its longest valid prefix (see
// repair).
func loadFile(root, name string, opts Options, verify bool, log *zap.Logger) (*file, error) {
	f, short, err := mapExisting(root, name, opts)
	if err != nil {
		return nil, err
	}
	if short {
		log.Warn("index file was shorter than its full size; re-extended", zap.String("file", f.path))
	}
	h, err := DecodeHeader(f.data)
	if err == nil {
		err = opts.checkHeader(h)
	}
	switch {
	case err != nil:
		log.Error("index file header is broken; resetting the file to empty",
			zap.String("file", f.path), zap.Error(err))
		f.reset()
	case h.IndexCount == 0:
		f.reset()
	default:
		f.hdr = h
		if verify || short {
			if r := f.repair(verify); r.changed() {
				log.Warn("index file repaired",
					zap.String("file", f.path),
					zap.Int32("headerIndexCount", r.headerCount),
					zap.Int32("validIndexCount", r.validCount),
					zap.Int("slotsFixed", r.slotsFixed),
					zap.Int("entriesZeroed", r.entriesZeroed))
			}
		}
	}
	if verify && f.slots == nil {
		f.activate(nil)
	}
	return f, nil
}

// reset makes f an empty file: zero header, slots and any written entries.
func (f *file) reset() {
	clear(f.data[:f.entBase])
	f.zeroTail(1, 1)
	f.setHeader(Header{IndexCount: 1})
}

// zeroTail zeroes entries from position from: all of them below n, then
// onwards while they are non-zero. Entries past the valid ones are never
// read, but zeroing them keeps "unwritten means zero" true for later
// recoveries.
func (f *file) zeroTail(from, n int32) int {
	zeroed := 0
	for i := from; int(i) < f.opts.MaxEntries; i++ {
		b := f.entryBytes(i)
		if isZero(b) {
			if i >= n {
				break
			}
			continue
		}
		clear(b)
		zeroed++
	}
	if zeroed > 0 {
		f.dirty.Store(true)
	}
	return zeroed
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

type repairReport struct {
	headerCount, validCount int32
	slotsFixed              int
	entriesZeroed           int
	headerFixed             bool
}

func (r repairReport) changed() bool {
	return r.headerCount != r.validCount || r.slotsFixed > 0 || r.entriesZeroed > 0 || r.headerFixed
}

// repair checks entries 1..IndexCount-1 in order and keeps the longest
// prefix in which every entry is plausible: non-negative fields, the first
// entry at the header's begin offset with time difference 0, physical
// offsets non-decreasing, and each PrevIndex equal to the slot head that the
// entries before it produce. The slot table is rebuilt from that prefix
// (stale or torn slots are rewritten), entries past it are zeroed and the
// header is made to match. It costs one sequential pass over the entries,
// one pass over the slots and SlotCount*4 bytes of memory. With activate the
// rebuilt table becomes the file's in-memory one (f becomes the active
// file) instead of being written into the mapping.
func (f *file) repair(activate bool) repairReport {
	h := f.hdr
	n := h.IndexCount
	r := repairReport{headerCount: n}
	heads := make([]int32, f.opts.SlotCount)
	var used int32
	lastPhy := int64(-1)
	var lastDiff int32
	k := int32(1)
	for ; k < n; k++ {
		e := f.entry(k)
		if e.KeyHash < 0 || e.PhyOffset < 0 || e.TimeDiff < 0 || e.PhyOffset < lastPhy {
			break
		}
		if k == 1 && (e.PhyOffset != h.BeginPhyOffset || e.TimeDiff != 0) {
			break
		}
		s := f.slotOf(e.KeyHash)
		if e.PrevIndex != heads[s] {
			break
		}
		if heads[s] == 0 {
			used++
		}
		heads[s] = k
		lastPhy, lastDiff = e.PhyOffset, e.TimeDiff
	}
	r.validCount = k
	if !activate {
		// The active file's slots are not kept in the file, so only an
		// older file's can be stale.
		for s, want := range heads {
			if f.mappedSlot(s) != want {
				f.setSlot(s, want)
				r.slotsFixed++
			}
		}
	}
	r.entriesZeroed = f.zeroTail(k, n)

	nh := h
	if k <= 1 {
		nh = Header{IndexCount: 1}
	} else {
		nh.IndexCount = k
		nh.SlotCount = used
		if k != n || nh.EndPhyOffset != lastPhy {
			nh.EndPhyOffset = lastPhy
			nh.EndTimestamp = nh.BeginTimestamp + int64(lastDiff)*1000
		}
		if t := nh.BeginTimestamp + int64(lastDiff)*1000; nh.EndTimestamp < t {
			nh.EndTimestamp = t
		}
	}
	if nh != h {
		r.headerFixed = true
		f.setHeader(nh)
	}
	if activate {
		f.activate(heads)
	}
	return r
}
