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

// recoverChunk is how many units recovery reads from a file at a time.
const recoverChunk = 4096

// recover loads the queue's files from disk and finds MinOffset and
// MaxOffset. It runs before the queue is shared, so it takes no locks. It
// leaves every file closed: they are opened again when used.
func (q *Queue) recover() error {
	q.dirReady.Store(true)
	if err := q.loadSegments(); err != nil {
		q.closeAll()
		return err
	}
	if len(q.segs) == 0 {
		return nil
	}
	if err := q.findBounds(); err != nil {
		q.closeAll()
		return err
	}
	for _, seg := range q.segs {
		if err := seg.closeFile(); err != nil {
			q.closeAll()
			return q.errf("recover: %w", err)
		}
	}
	return nil
}

// loadSegments lists and opens the queue's files, checks that they lie on
// the layout's boundaries and are contiguous, and drops an empty tail.
func (q *Queue) loadSegments() error {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return q.errf("recover: %w", err)
	}
	var starts []int64
	var firstSize int64 = -1
	for _, e := range entries {
		startByte, ok := parseFileName(e.Name())
		if !ok || e.IsDir() {
			q.logger().Warn("consumequeue: skipping stray entry", zap.String("path", filepath.Join(q.dir, e.Name())))
			continue
		}
		if startByte%UnitSize != 0 {
			return q.errf("recover: file %s does not start on a unit boundary: %w", e.Name(), ErrCorrupt)
		}
		if startByte == 0 {
			if st, err := e.Info(); err == nil {
				firstSize = st.Size()
			}
		}
		starts = append(starts, startByte/UnitSize)
	}
	if len(starts) == 0 {
		return nil
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	if firstSize > q.lay.first*UnitSize && q.lay.first < q.lay.upf {
		// Written whole by a version without growing files: the queue's
		// first file holds UnitsPerFile units, and the later files, all
		// full-size, lie where the layout puts them.
		q.logger().Info("consumequeue: the queue's first file is full-size; keeping it so",
			zap.Int64("bytes", firstSize))
		q.lay.first = q.lay.upf
	}
	for i, start := range starts {
		if !q.lay.isFileStart(start) {
			return q.errf("recover: file %s does not start on a file boundary (were UnitsPerFile or FirstFileUnits changed?): %w",
				fileName(start*UnitSize), ErrCorrupt)
		}
		if i > 0 && start != q.lay.fileEnd(starts[i-1]) {
			return q.errf("recover: files %s and %s are not contiguous: %w",
				fileName(starts[i-1]*UnitSize), fileName(start*UnitSize), ErrCorrupt)
		}
	}
	for _, start := range starts {
		seg, err := openSegment(filepath.Join(q.dir, fileName(start*UnitSize)), start, q.lay.fileUnits(start), q)
		if err != nil {
			return q.errf("recover: %w", err)
		}
		q.segs = append(q.segs, seg)
	}
	return q.dropEmptyTail()
}

// findBounds finds the end of data in the last file (zeroing stale units
// past it), MinOffset past the pre-blank units of the first file, and the
// queue's last unit.
func (q *Queue) findBounds() error {
	last := q.segs[len(q.segs)-1]
	end, err := last.scan(last.start, func(u Unit) bool { return !u.valid() })
	if err != nil {
		return q.errf("recover: %w", err)
	}
	// Units past the first hole are unreachable; zero them so that later
	// appends can never be followed by stale units at the next recovery.
	nz, err := last.scan(end, func(u Unit) bool { return u != (Unit{}) })
	if err != nil {
		return q.errf("recover: %w", err)
	}
	if nz < last.end() {
		q.logger().Warn("consumequeue: zeroing stale units past the end of data",
			zap.String("file", last.path), zap.Int64("fromQueueOffset", end))
		err := last.zero(end, last.end())
		if err == nil {
			err = last.sync()
		}
		if err != nil {
			return q.errf("recover: %w", err)
		}
	}
	for _, seg := range q.segs[:len(q.segs)-1] {
		if u, err := seg.unit(seg.end() - 1); err != nil {
			return q.errf("recover: %w", err)
		} else if !u.valid() {
			q.logger().Warn("consumequeue: earlier file does not end with a unit; trusting it anyway",
				zap.String("file", seg.path))
		}
	}
	first := q.segs[0]
	minOff, err := first.scan(first.start, func(u Unit) bool { return u != blankUnit })
	if err != nil {
		return q.errf("recover: %w", err)
	}
	minOff = min(minOff, end)
	q.segsChanged()
	q.minOff.Store(minOff)
	q.maxOff.Store(end)
	q.written = end
	if end > minOff {
		u, err := q.unitAt(end - 1)
		if err != nil {
			return q.errf("recover: %w", err)
		}
		q.lastEnd = u.End()
	}
	q.maxPhy.Store(q.lastEnd)
	q.flushed.Store(first.start) // the page cache may hold unsynced units of a crashed process
	q.logger().Debug("consumequeue recovered", zap.Int("files", len(q.segs)),
		zap.Int64("minOffset", minOff), zap.Int64("maxOffset", end))
	return nil
}

// scan returns the first queue offset in [from, end()) whose unit
// satisfies stop, or end() when none does, reading the file in chunks.
func (s *segment) scan(from int64, stop func(Unit) bool) (int64, error) {
	buf := make([]byte, min(s.end()-from, recoverChunk)*UnitSize)
	for off := from; off < s.end(); {
		n := min(s.end()-off, recoverChunk)
		b := buf[:n*UnitSize]
		if err := s.read(b, off); err != nil {
			return 0, err
		}
		for i := int64(0); i < n; i++ {
			if stop(decodeUnit(b[i*UnitSize:])) {
				return off + i, nil
			}
		}
		off += n
	}
	return s.end(), nil
}

// dropEmptyTail removes trailing files whose first unit is empty (created
// but never written, or whose content was lost), keeping at least one file,
// so that the end of data is searched in the file that really holds it.
func (q *Queue) dropEmptyTail() error {
	var errs []error
	removed := false
	for len(q.segs) > 1 {
		last := q.segs[len(q.segs)-1]
		u, err := last.unit(last.start)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if u.valid() {
			break
		}
		q.logger().Warn("consumequeue: removing empty trailing file", zap.String("file", last.path))
		if err := os.Remove(last.path); err != nil {
			errs = append(errs, fmt.Errorf("remove empty file: %w", err))
			break
		}
		removed = true
		errs = append(errs, last.closeFile())
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

func (q *Queue) closeAll() {
	for _, seg := range q.segs {
		_ = seg.closeFile()
	}
	q.segs = nil
	q.segsChanged()
}
