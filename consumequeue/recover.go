package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"go.uber.org/zap"
)

// recover loads the queue's files from disk and finds MinOffset and
// MaxOffset. It runs before the queue is shared, so it takes no locks.
func (q *Queue) recover() error {
	q.dirReady.Store(true)
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return q.errf("recover: %w", err)
	}
	var starts []int64
	for _, e := range entries {
		startByte, ok := parseFileName(e.Name())
		if !ok || e.IsDir() {
			q.log.Warn("consumequeue: skipping stray entry", zap.String("path", filepath.Join(q.dir, e.Name())))
			continue
		}
		if startByte%q.fsize != 0 {
			return q.errf("recover: file %s does not start on a %d-byte boundary (was UnitsPerFile changed?): %w",
				e.Name(), q.fsize, ErrCorrupt)
		}
		starts = append(starts, startByte/UnitSize)
	}
	if len(starts) == 0 {
		return nil
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for i := 1; i < len(starts); i++ {
		if starts[i] != starts[i-1]+q.upf {
			return q.errf("recover: files %s and %s are not contiguous: %w",
				fileName(starts[i-1]*UnitSize), fileName(starts[i]*UnitSize), ErrCorrupt)
		}
	}
	for _, start := range starts {
		seg, err := openSegment(filepath.Join(q.dir, fileName(start*UnitSize)), start, q.fsize, q.log)
		if err != nil {
			q.unmapAll()
			return q.errf("recover: %w", err)
		}
		q.segs = append(q.segs, seg)
	}
	if err := q.dropEmptyTail(); err != nil {
		q.unmapAll()
		return err
	}

	last := q.segs[len(q.segs)-1]
	end := last.start
	for end < last.start+q.upf && decodeUnit(last.unit(end)).valid() {
		end++
	}
	// Units past the first hole are unreachable; zero them so that later
	// appends can never be followed by stale units at the next recovery.
	if tail := last.span(end, last.start+q.upf); !allZero(tail) {
		q.log.Warn("consumequeue: zeroing stale units past the end of data",
			zap.String("file", last.path), zap.Int64("fromQueueOffset", end))
		err := last.zero(end, last.start+q.upf)
		if err == nil {
			err = last.sync()
		}
		if err != nil {
			q.unmapAll()
			return q.errf("recover: %w", err)
		}
	}
	for _, seg := range q.segs[:len(q.segs)-1] {
		if err := seg.closeFile(); err != nil { // complete: only read
			q.unmapAll()
			return q.errf("recover: %w", err)
		}
		if !decodeUnit(seg.unit(seg.start + q.upf - 1)).valid() {
			q.log.Warn("consumequeue: earlier file does not end with a unit; trusting it anyway",
				zap.String("file", seg.path))
		}
	}

	first := q.segs[0]
	limit := min(end, first.start+q.upf)
	minOff := first.start
	for minOff < limit && decodeUnit(first.unit(minOff)) == blankUnit {
		minOff++
	}
	q.segsChanged()
	q.minOff.Store(minOff)
	q.maxOff.Store(end)
	q.written = end
	if end > minOff {
		q.lastEnd = q.unitAt(end - 1).End()
	}
	q.maxPhy.Store(q.lastEnd)
	q.flushed = first.start // the page cache may hold unsynced units of a crashed process
	q.log.Debug("consumequeue recovered", zap.Int("files", len(q.segs)),
		zap.Int64("minOffset", minOff), zap.Int64("maxOffset", end))
	return nil
}

// dropEmptyTail removes trailing files whose first unit is empty (created
// but never written, or whose content was lost), keeping at least one file,
// so that the end of data is searched in the file that really holds it.
func (q *Queue) dropEmptyTail() error {
	var errs []error
	removed := false
	for len(q.segs) > 1 {
		last := q.segs[len(q.segs)-1]
		if decodeUnit(last.unit(last.start)).valid() {
			break
		}
		q.log.Warn("consumequeue: removing empty trailing file", zap.String("file", last.path))
		if err := os.Remove(last.path); err != nil {
			errs = append(errs, fmt.Errorf("remove empty file: %w", err))
			break
		}
		removed = true
		errs = append(errs, last.unmap())
		q.segs = q.segs[:len(q.segs)-1]
		q.segsChanged()
	}
	if removed {
		errs = append(errs, fsutil.SyncDir(q.dir))
	}
	if err := errors.Join(errs...); err != nil {
		return q.errf("recover: %w", err)
	}
	return nil
}

func (q *Queue) unmapAll() {
	for _, seg := range q.segs {
		_ = seg.unmap()
	}
	q.segs = nil
	q.segsChanged()
}
