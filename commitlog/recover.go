package commitlog

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// recover finds the end of the valid log by verifying every record from the
// boundary from, discards everything after it, and positions the writer
// there. Records before from are trusted.
func (l *Log) recover(from int64) error {
	info := RecoveryInfo{}
	if len(l.segs) == 0 {
		l.setRecovered(0, nil, info)
		return nil
	}
	first, last := l.segs[0], l.segs[len(l.segs)-1]
	switch {
	case from < first.start:
		from = first.start
	case from > last.end():
		l.log.Warn("recovery point is past the end of the log; scanning the last segment",
			zap.Int64("from", from), zap.Int64("logEnd", last.end()))
		from = last.start
	}
	info.From = from
	off := from
	lastRec := int64(-1)
	var reason string
	for reason == "" {
		seg := l.segmentFor(off)
		if seg == nil {
			// off is exactly the end of the last segment (it ended in a blank).
			break
		}
		rel := off - seg.start
		left := seg.end() - off
		if left < message.BlankSize {
			reason = fmt.Sprintf("%d bytes left in segment at %d", left, off)
			break
		}
		h, _ := message.PeekHeader(seg.m.Data[rel:])
		switch {
		case h.TotalSize == 0 && h.Magic == 0:
			reason = "end" // clean end of written data
		case h.IsBlank():
			if int64(h.TotalSize) != left {
				reason = fmt.Sprintf("blank of %d bytes at %d, %d left in segment", h.TotalSize, off, left)
				break
			}
			off = seg.end()
		case h.IsRecord():
			size := int64(h.TotalSize)
			if size < int64(message.MinRecordSize) || size+message.BlankSize > left {
				reason = fmt.Sprintf("record size %d at %d does not fit", size, off)
				break
			}
			rec := seg.m.Data[rel : rel+size]
			if err := message.Verify(rec); err != nil {
				reason = fmt.Sprintf("record at %d: %v", off, err)
				break
			}
			if phys := physicalOffsetOf(rec); phys != off {
				reason = fmt.Sprintf("record at %d says it is at %d", off, phys)
				break
			}
			lastRec = off
			off += size
			info.Records++
		default:
			reason = fmt.Sprintf("unknown magic %#x at %d", h.Magic, off)
		}
	}
	info.End = off
	if reason != "end" && reason != "" {
		info.Torn = true
		info.TornReason = reason
		l.log.Warn("commitlog tail is torn; truncating", zap.Int64("validEnd", off), zap.String("reason", reason))
	}
	l.setRecovered(off, l.truncateAfter(off, &info), info)
	if lastRec >= 0 {
		l.rememberLastRecord(lastRec)
	}
	return l.recoveryErr
}

func physicalOffsetOf(rec []byte) int64 {
	var v int64
	for _, b := range rec[message.PosPhysicalOffset : message.PosPhysicalOffset+8] {
		v = v<<8 | int64(b)
	}
	return v
}

// truncateAfter makes every byte from end on read as zero: the rest of the
// segment holding end is cleared and later segments are removed. It also
// makes the kept prefix durable, so nothing acknowledged later can land on
// disk before the records it follows.
func (l *Log) truncateAfter(end int64, info *RecoveryInfo) error {
	var errs []error
	keep := l.segs[:0]
	for _, s := range l.segs {
		switch {
		case s.start > end:
			if err := s.remove(); err != nil {
				errs = append(errs, err)
			}
			info.RemovedSegments++
			continue
		case s.end() > end:
			rel := end - s.start
			if err := fsutil.ZeroRange(s.f, rel, s.size-rel); err != nil {
				errs = append(errs, fmt.Errorf("commitlog: clear torn tail of %s: %w", s.path, err))
			}
		}
		if s.end() > info.From {
			if err := fsutil.Fdatasync(s.f); err != nil {
				errs = append(errs, fmt.Errorf("commitlog: sync %s: %w", s.path, err))
			}
		}
		keep = append(keep, s)
	}
	l.segs = keep
	if info.RemovedSegments > 0 {
		if err := fsutil.SyncDir(l.opts.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setRecovered positions the writer at end.
func (l *Log) setRecovered(end int64, err error, info RecoveryInfo) {
	l.recovery = info
	l.recoveryErr = err
	l.wpos = end
	l.written.Store(end)
	l.committed.Store(end)
	l.flushed.Store(end)
	l.setActiveLocked(nil)
	if n := len(l.segs); n > 0 {
		if s := l.segs[n-1]; end >= s.start && end < s.end() {
			l.setActiveLocked(s)
		}
	}
}
