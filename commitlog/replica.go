package commitlog

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/message"
)

// Replication support. A master ships its log with ReadChunk from the
// committed offset on (bytes in the file, flushed or not); a slave appends
// what it receives with AppendRaw, which verifies every record and keeps the
// bytes exactly as they are, so the two logs stay byte-identical. See the
// ha package for the protocol.

// RecordInfo describes what starts at an offset: a record (its size, the
// checksum in its trailer and its store timestamp) or an end-of-segment
// blank.
type RecordInfo struct {
	Offset         int64
	Blank          bool
	Size           int32
	Checksum       uint32
	StoreTimestamp int64
}

// CommittedOffset is the end of the bytes written to the segment files (or
// the mapping): what a master may ship to slaves. It is ahead of the flushed
// offset while a flush is under way, so replication and flushing overlap.
func (l *Log) CommittedOffset() int64 { return l.committed.Load() }

// CommittedChanged returns a channel closed when CommittedOffset next
// advances (and when the log closes). Take the channel, then check the
// offset, then wait.
func (l *Log) CommittedChanged() <-chan struct{} { return l.committedSig.C() }

// LastStoreTimestamp is the store timestamp of the newest record (0 when
// the log holds none or it is not known yet).
func (l *Log) LastStoreTimestamp() int64 {
	if ts := l.lastStoreTs.Load(); ts != 0 {
		return ts
	}
	if r, ok, err := l.LastRecord(); err == nil && ok {
		return r.StoreTimestamp
	}
	return 0
}

// viewCommitted calls fn with the n bytes at off, bounded by the committed
// offset rather than Readable. The range must be inside one segment.
func (l *Log) viewCommitted(off int64, n int, fn func(b []byte) error) error {
	committed := l.committed.Load()
	if off < 0 || n <= 0 || off+int64(n) > committed {
		return fmt.Errorf("%w: [%d, %d) committed up to %d", ErrOffset, off, off+int64(n), committed)
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	seg := l.segmentFor(off)
	if seg == nil || off+int64(n) > seg.end() {
		return fmt.Errorf("%w: [%d, %d) not inside one segment (min offset %d)", ErrOffset, off, off+int64(n), l.minOffsetLocked())
	}
	rel := off - seg.start
	return fn(seg.m.Data[rel : rel+int64(n)])
}

// RecordAt describes the record or blank starting at off, which must be
// below the committed offset. For a record it checks only the header and
// reads the checksum trailer; it does not verify the record.
func (l *Log) RecordAt(off int64) (RecordInfo, error) {
	info := RecordInfo{Offset: off}
	var h message.Header
	err := l.viewCommitted(off, message.BlankSize, func(b []byte) error {
		h, _ = message.PeekHeader(b)
		return nil
	})
	if err != nil {
		return info, err
	}
	switch {
	case h.IsBlank():
		info.Blank, info.Size = true, h.TotalSize
		return info, nil
	case !h.IsRecord() || h.TotalSize < message.BlankSize:
		return info, fmt.Errorf("%w: no record at %d (size %d, magic %#x)", ErrOffset, off, h.TotalSize, h.Magic)
	}
	info.Size = h.TotalSize
	err = l.viewCommitted(off, int(h.TotalSize), func(rec []byte) error {
		crc, ok := message.RecordChecksum(rec)
		if !ok {
			return fmt.Errorf("%w: record at %d has no checksum trailer", message.ErrCorrupt, off)
		}
		info.Checksum = crc
		info.StoreTimestamp = storeTimestampOf(rec)
		return nil
	})
	return info, err
}

func storeTimestampOf(rec []byte) int64 {
	if len(rec) < message.PosSysFlag+4 {
		return 0
	}
	sysFlag := int32(binary.BigEndian.Uint32(rec[message.PosSysFlag:]))
	p := message.StoreTimestampPos(sysFlag)
	if len(rec) < p+8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(rec[p:]))
}

// LastRecord describes the newest record of the log; ok is false when the
// log holds no record. The slave's replication handshake sends it so the
// master can check that both logs agree up to there.
func (l *Log) LastRecord() (RecordInfo, bool, error) {
	l.mu.Lock()
	if !l.lastKnown {
		l.findLastRecordLocked()
	}
	start, known := l.lastStart, l.lastKnown
	wpos := l.wpos
	l.mu.Unlock()
	if !known {
		return RecordInfo{}, false, nil
	}
	// The record may still be staged (pwrite, sync mode): write it out.
	if err := l.commitUpTo(wpos); err != nil {
		return RecordInfo{}, false, err
	}
	info, err := l.RecordAt(start)
	return info, err == nil, err
}

// rememberLastRecord records that the record at off is the newest one.
// Open calls it after recovery, before anything else runs.
func (l *Log) rememberLastRecord(off int64) {
	seg := l.segmentFor(off)
	if seg == nil {
		return
	}
	rec := seg.m.Data[off-seg.start:]
	h, _ := message.PeekHeader(rec)
	if !h.IsRecord() || int64(h.TotalSize) > seg.end()-off {
		return
	}
	l.lastStart, l.lastSize, l.lastKnown = off, h.TotalSize, true
	l.lastStoreTs.Store(storeTimestampOf(rec[:h.TotalSize]))
}

// findLastRecordLocked walks record headers from the start of the newest
// segment holding data to find the last record, when recovery did not pass
// one (its scan started at the end). mu is held; the bytes below wpos are
// committed or staged, and only committed ones are read, which is enough:
// appends set lastKnown themselves.
func (l *Log) findLastRecordLocked() {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	limit := l.committed.Load()
	for i := len(l.segs) - 1; i >= 0; i-- {
		seg := l.segs[i]
		if seg.start >= limit {
			continue
		}
		last := int64(-1)
		for off := seg.start; off+message.BlankSize <= min(limit, seg.end()); {
			h, _ := message.PeekHeader(seg.m.Data[off-seg.start:])
			if !h.IsRecord() || h.TotalSize < message.BlankSize || off+int64(h.TotalSize) > min(limit, seg.end()) {
				break
			}
			last = off
			off += int64(h.TotalSize)
		}
		if last >= 0 {
			l.rememberLastRecord(last)
			return
		}
	}
}

// ReadChunk appends to dst the whole records that start at off, which must
// be a record boundary: as many as fit in max bytes (at least one, however
// large), only committed ones, and never past the end of off's segment.
// When off holds an end-of-segment blank it returns just the blank's 8-byte
// header and next is the start of the following segment. next is where the
// following chunk starts; chunk is empty (next == off) when nothing is
// committed at off yet. A chunk below CacheFrom, dropped from the page
// cache, is read from the file with O_DIRECT, at most directChunkMax bytes
// of it: a slave catching up from far behind leaves the master's page
// cache and resident set alone.
func (l *Log) ReadChunk(off int64, max int, dst []byte) (chunk []byte, next int64, err error) {
	committed := l.committed.Load()
	if off >= committed {
		return dst, off, nil
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	seg := l.segmentFor(off)
	if seg == nil {
		return dst, off, fmt.Errorf("%w: %d is not in the log (min %d)", ErrOffset, off, l.minOffsetLocked())
	}
	limit := min(committed, seg.end())
	if chunk, next, ok := l.readChunkDirect(seg, off, limit, max, dst); ok {
		return chunk, next, nil
	}
	p := off
	for p < limit {
		if seg.end()-p < message.BlankSize {
			return dst, off, fmt.Errorf("%w: %d bytes left in segment at %d", message.ErrCorrupt, seg.end()-p, p)
		}
		h, _ := message.PeekHeader(seg.m.Data[p-seg.start:])
		if h.IsBlank() {
			if p == off {
				rel := off - seg.start
				return append(dst, seg.m.Data[rel:rel+message.BlankSize]...), seg.end(), nil
			}
			break
		}
		size := int64(h.TotalSize)
		if !h.IsRecord() || size < message.BlankSize || p+size > limit {
			return dst, off, fmt.Errorf("%w: bad header at %d (size %d, magic %#x)", message.ErrCorrupt, p, h.TotalSize, h.Magic)
		}
		if p > off && p+size-off > int64(max) {
			break
		}
		p += size
	}
	return append(dst, seg.m.Data[off-seg.start:p-seg.start]...), p, nil
}

// directChunkMax bounds a chunk ReadChunk reads with O_DIRECT (one read,
// into a pooled aligned buffer).
const directChunkMax = 4 << 20

// readChunkDirect is ReadChunk for a chunk that lies below CacheFrom: its
// bytes, up to max and directChunkMax, are read with O_DIRECT and the
// records walked in the copy. ok is false, with dst as it was, when the
// bytes are not all below CacheFrom, when the read fails (a file system
// that refuses O_DIRECT), when the first record does not fit in what was
// read, or when a header does not parse: ReadChunk then reads through the
// mapping, which reports what is wrong, if anything is.
func (l *Log) readChunkDirect(seg *segment, off, limit int64, max int, dst []byte) (chunk []byte, next int64, ok bool) {
	end := min(limit, off+int64(min(max, directChunkMax)))
	if end > l.cacheFrom.Load() || end-off < message.BlankSize {
		return dst, off, false
	}
	start := len(dst)
	dst = slices.Grow(dst, int(end-off))[:start+int(end-off)]
	buf := dst[start:]
	if err := seg.readDirect(off, buf); err != nil {
		return dst[:start], off, false
	}
	n := 0 // the bytes of whole records walked
	for len(buf)-n >= message.BlankSize {
		h, _ := message.PeekHeader(buf[n:])
		if h.IsBlank() {
			if n == 0 {
				return dst[:start+message.BlankSize], seg.end(), true
			}
			break
		}
		size := int(h.TotalSize)
		if !h.IsRecord() || size < message.BlankSize {
			return dst[:start], off, false
		}
		if size > len(buf)-n {
			break
		}
		n += size
	}
	if n == 0 {
		return dst[:start], off, false
	}
	return dst[:start+n], off + int64(n), true
}

// StartAt makes an empty log start at off, a multiple of the segment size:
// the next append (AppendRaw) creates the segment starting there. A slave
// that copies a master whose oldest segments were deleted starts at the
// master's minimum offset. The log must hold no record; empty segment files
// it has are removed.
func (l *Log) StartAt(off int64) error {
	if off < 0 || off%l.opts.SegmentSize != 0 {
		return fmt.Errorf("%w: start %d is not a multiple of the segment size %d", ErrOffset, off, l.opts.SegmentSize)
	}
	if l.closed.Load() {
		return ErrClosed
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.segmentsClosed || l.closed.Load() {
		return ErrClosed
	}
	l.segMu.Lock()
	first := l.wpos
	if len(l.segs) > 0 {
		first = l.segs[0].start
	}
	if l.wpos != first || l.lastKnown {
		l.segMu.Unlock()
		return fmt.Errorf("commitlog: cannot start at %d: the log holds data in [%d, %d)", off, first, l.wpos)
	}
	var errs []error
	for _, s := range l.segs {
		if err := s.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	l.segs = nil
	l.segMu.Unlock()
	l.allocMu.Lock()
	if l.next != nil {
		if err := l.next.remove(); err != nil {
			errs = append(errs, err)
		}
		l.next = nil
	}
	l.allocWant = -1
	l.allocMu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("commitlog: start at %d: %v", off, errs)
	}
	l.setActiveLocked(nil)
	l.wpos = off
	l.written.Store(off)
	l.quietEnd.Store(0)
	l.committed.Store(off)
	l.flushed.Store(off)
	l.log.Info("commitlog starts at a new offset", zap.Int64("start", off))
	return nil
}

// AppendRaw appends replicated bytes at off, which must equal MaxOffset: a
// sequence of whole records exactly as the master stored them, where an
// end-of-segment blank travels as its 8-byte header and ends the segment
// here too. Every record is verified (structure, body and record checksums,
// PHYSICALOFFSET equal to its position) and must fit in its segment as it
// did on the master. The bytes are written unchanged. It returns the new
// MaxOffset and, like Append, waits for a flush in sync mode. Records before
// a bad one stay appended; the error says where it stopped.
//
// Queue offsets come from the records: AppendRaw does not advance the map
// Append uses. A slave that becomes master sets them (SetQueueOffset) from
// its ConsumeQueues first.
func (l *Log) AppendRaw(ctx context.Context, off int64, data []byte) (int64, error) {
	end, err := l.AppendRawNoWait(off, data)
	if err != nil {
		return end, err
	}
	if l.opts.FlushMode == FlushSync && end > off {
		if err := l.WaitFlushed(ctx, end); err != nil {
			return end, err
		}
	}
	return end, nil
}

// AppendRawNoWait is AppendRaw without the sync-mode wait for the flush; the
// caller calls WaitFlushed itself (a slave applying several frames waits
// once).
func (l *Log) AppendRawNoWait(off int64, data []byte) (int64, error) {
	if l.closed.Load() {
		return l.MaxOffset(), ErrClosed
	}
	if err := l.Err(); err != nil {
		return l.MaxOffset(), err
	}
	if l.diskFull.Load() {
		return l.MaxOffset(), fmt.Errorf("%w: %.1f%% of the disk holding %s is used (limit %.0f%%)",
			ErrDiskFull, l.DiskUsage()*100, l.opts.Dir, l.opts.DiskFullRatio*100)
	}
	l.mu.Lock()
	l.waitZeroLocked(int64(len(data)))
	if l.closed.Load() {
		l.mu.Unlock()
		return l.MaxOffset(), ErrClosed
	}
	if off != l.wpos {
		wpos := l.wpos
		l.mu.Unlock()
		return wpos, fmt.Errorf("%w: replicated bytes start at %d, the log ends at %d", ErrOffset, off, wpos)
	}
	if err := l.Err(); err != nil { // a bulk write failed meanwhile
		l.mu.Unlock()
		return off, err
	}
	bulk := l.beginBulkLocked(len(data))
	err := l.appendRawLocked(data)
	if bulk {
		if werr := l.endBulkLocked(); werr != nil && err == nil {
			err = werr
		}
	}
	wpos := l.wpos
	staged := l.staged
	l.mu.Unlock()
	if wpos == off {
		return wpos, err
	}
	if cerr := l.afterAppend(wpos, staged); cerr != nil && err == nil {
		err = cerr
	}
	return wpos, err
}

// appendRawLocked writes the items of data at wpos. mu is held.
func (l *Log) appendRawLocked(data []byte) error {
	for p := 0; p < len(data); {
		at := l.wpos
		if len(data)-p < message.BlankSize {
			return fmt.Errorf("%w: %d trailing bytes at %d", message.ErrCorrupt, len(data)-p, at)
		}
		h, _ := message.PeekHeader(data[p:])
		seg := l.active
		if seg == nil {
			if h.IsBlank() {
				return fmt.Errorf("%w: blank at the start of segment %d", message.ErrCorrupt, at)
			}
			var err error
			if seg, err = l.rollLocked(); err != nil {
				return err
			}
		}
		left := seg.end() - at
		switch {
		case h.IsBlank():
			if int64(h.TotalSize) != left {
				return fmt.Errorf("%w: blank of %d bytes at %d, %d left in the segment", message.ErrCorrupt, h.TotalSize, at, left)
			}
			l.writeBlankLocked(seg)
			p += message.BlankSize
		case h.IsRecord():
			size := int64(h.TotalSize)
			if size < int64(message.MinRecordSize) || size > int64(len(data)-p) {
				return fmt.Errorf("%w: record of %d bytes at %d, %d bytes given", message.ErrCorrupt, size, at, len(data)-p)
			}
			if size+message.BlankSize > left {
				return fmt.Errorf("%w: record of %d bytes at %d does not fit the %d bytes left in its segment", message.ErrCorrupt, size, at, left)
			}
			rec := data[p : p+int(size)]
			if err := message.Verify(rec); err != nil {
				return fmt.Errorf("replicated record at %d: %w", at, err)
			}
			if phys := physicalOffsetOf(rec); phys != at {
				return fmt.Errorf("%w: replicated record at %d says it is at %d", message.ErrCorrupt, at, phys)
			}
			l.writeLocked(seg, rec)
			l.lastStart, l.lastSize, l.lastKnown = at, int32(size), true
			l.lastStoreTs.Store(storeTimestampOf(rec))
			l.wpos += size
			l.written.Store(l.wpos)
			p += int(size)
		default:
			return fmt.Errorf("%w: unknown magic %#x at %d", message.ErrCorrupt, h.Magic, at)
		}
	}
	return nil
}
