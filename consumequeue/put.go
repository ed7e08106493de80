package consumequeue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Put stores u at queueOffset.
//
//   - queueOffset == MaxOffset: append. u.Offset must not precede the end of
//     the previous unit (units follow CommitLog order), else ErrCorrupt.
//   - queueOffset < MaxOffset: an idempotent re-dispatch; nil if the stored
//     unit equals u, an error wrapping ErrCorrupt if it differs. Offsets
//     below MinOffset (deleted, or before a pre-blank start) are ignored.
//   - queueOffset > MaxOffset on a queue with no file, or whose only file
//     starts at 0 and holds no unit (Create made it, or a truncation
//     emptied it; it is kept if it holds queueOffset, else removed): the
//     queue starts there; earlier units of its first file get RocketMQ's
//     pre-blank marker and MinOffset becomes queueOffset. On any other
//     queue: ErrOffsetGap.
//
// u must have Offset >= 0 and 0 < Size < math.MaxInt32 (ErrInvalid).
func (q *Queue) Put(queueOffset int64, u Unit) error {
	if queueOffset < 0 {
		return q.errf("put %d: negative queue offset: %w", queueOffset, ErrInvalid)
	}
	if err := u.checkPut(); err != nil {
		return q.errf("put %d: %w", queueOffset, err)
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed.Load() {
		return q.errf("put %d: %w", queueOffset, ErrClosed)
	}
	hi := q.maxOff.Load()
	if queueOffset < hi {
		return q.checkExisting(queueOffset, u)
	}
	if queueOffset > hi && q.hasSegments() {
		if !q.unwritten() {
			return q.errf("put %d: max offset is %d: %w", queueOffset, hi, ErrOffsetGap)
		}
		// The queue's only file starts at 0 and holds no unit (made
		// ahead by Create, or truncated back to nothing), and the queue
		// starts further on: start it as a queue without files would,
		// in that file when it holds the offset (the dispatch planner
		// counted on it: NeedsFile), else in the file that does.
		if err := q.startLater(queueOffset); err != nil {
			return q.errf("put %d: %w", queueOffset, err)
		}
	}
	// lastEnd is 0 on an empty queue; it outlives units that DeleteBefore
	// put below MinOffset, so the order holds across them too.
	if u.Offset < q.lastEnd {
		return q.errf("put %d: physical offset %d precedes the end %d of the previous unit: %w",
			queueOffset, u.Offset, q.lastEnd, ErrCorrupt)
	}
	if err := q.appendUnit(queueOffset, u); err != nil {
		return q.errf("put %d: %w", queueOffset, err)
	}
	q.lastEnd = u.End()
	q.maxPhy.Store(q.lastEnd)
	return nil
}

func (q *Queue) hasSegments() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return len(q.segs) > 0
}

// checkExisting compares u with the unit stored at off < MaxOffset. wmu is held.
func (q *Queue) checkExisting(off int64, u Unit) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if off < q.minOff.Load() {
		return nil
	}
	got, err := q.unitAt(off)
	if err != nil {
		return q.errf("re-put %d: %w", off, err)
	}
	if got != u {
		return q.errf("re-put %d: stored unit %+v differs from %+v: %w", off, got, u, ErrCorrupt)
	}
	return nil
}

// appendUnit stages u at off == MaxOffset (or at the start offset of a
// queue without files), creating the next file when needed, and publishes
// MaxOffset. wmu is held.
func (q *Queue) appendUnit(off int64, u Unit) error {
	var b [UnitSize]byte
	EncodeUnit(b[:], u)
	q.used.Store(true)
	q.mu.Lock()
	if n := len(q.segs); n > 0 && off < q.segs[n-1].end() {
		// The common case: the last file holds off.
		q.stageLocked(off, b[:])
		q.mu.Unlock()
		return nil
	}
	first := len(q.segs) == 0
	q.mu.Unlock()

	// A new file; nobody else can see it until it joins segs. Only this
	// writer (wmu) adds files, so the check above still holds.
	start := q.lay.fileStart(off)
	seg, err := q.newSegment(start)
	if err != nil {
		return err
	}
	if first && off > start {
		if err := writeBlanks(seg, start, off); err != nil {
			_ = seg.closeFile()
			return err
		}
	}
	q.mu.Lock()
	q.segs = append(q.segs, seg)
	q.segsChanged()
	if first {
		q.startAtLocked(off)
	}
	q.stageLocked(off, b[:])
	q.mu.Unlock()
	return nil
}

// startAtLocked makes an empty queue start at off: its first readable and
// first unwritten unit. mu is held exclusively.
func (q *Queue) startAtLocked(off int64) {
	q.minOff.Store(off)
	q.written = off
	q.stage = q.stage[:0]
}

// stageLocked appends the encoded unit at off to the stage and publishes
// MaxOffset. mu is held exclusively.
func (q *Queue) stageLocked(off int64, b []byte) {
	q.stage = append(q.stage, b...)
	q.stagePeak = max(q.stagePeak, len(q.stage))
	q.maxOff.Store(off + 1) // publish after the unit is in place
}

// writeBlanks fills units [from, to) of a new first file with the
// pre-blank marker.
func writeBlanks(seg *segment, from, to int64) error {
	var blank [UnitSize]byte
	EncodeUnit(blank[:], blankUnit)
	chunk := make([]byte, min(to-from, 4096)*UnitSize)
	for i := 0; i < len(chunk); i += UnitSize {
		copy(chunk[i:], blank[:])
	}
	return seg.fill(from, to, chunk)
}

// NeedsFile reports whether a Put at queue offset off would create a new
// file: the queue has no file yet, or off lies past its last file. It takes
// no lock.
func (q *Queue) NeedsFile(off int64) bool { return off >= q.fileEnd.Load() }

// FileFor returns the queue offset of the first unit of the file that
// holds queue offset off, and the size in bytes that file has: the file a
// Put at off creates when NeedsFile(off).
func (q *Queue) FileFor(off int64) (start, size int64) {
	start = q.lay.fileStart(off)
	return start, q.lay.fileUnits(start) * UnitSize
}

// Create makes the queue's directory and its first file, starting at
// queue offset 0, as the first Put would, if the queue has no file and has
// never held a unit; it reports whether it made the file. Made when a topic
// is created, they keep the directory and file system work of a new queue
// off its first sends. The file's descriptor is closed at once (the first
// Put or read opens it again), and the next flush makes the new directory
// entries durable. A Put that finds such a file empty and starts the queue
// at a later offset starts it there (see Put).
func (q *Queue) Create() (bool, error) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed.Load() {
		return false, q.errf("create: %w", ErrClosed)
	}
	if q.hasSegments() || q.maxOff.Load() != 0 || q.lastEnd != 0 {
		return false, nil
	}
	seg, err := q.newSegment(0)
	if err != nil {
		return false, q.errf("create: %w", err)
	}
	// MaxOffset 0 leaves MinOffset, written and the stage at 0 and empty.
	err = seg.closeFile()
	q.mu.Lock()
	q.segs = append(q.segs, seg)
	q.segsChanged()
	q.mu.Unlock()
	if err != nil {
		return true, q.errf("create: %w", err)
	}
	return true, nil
}

// unwritten reports whether the queue's only file starts at 0 and holds
// no unit: a first file made ahead by Create, or one whose units were all
// truncated. wmu is held.
func (q *Queue) unwritten() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	// MinOffset and written never pass MaxOffset, and the stage holds
	// [written, MaxOffset): at MaxOffset 0 all three are 0 and empty.
	return len(q.segs) == 1 && q.segs[0].start == 0 && q.maxOff.Load() == 0 && q.lastEnd == 0
}

// startLater makes a queue that unwritten found start at off. When its
// file holds off, the units before off get the pre-blank marker and
// MinOffset becomes off, as on a new first file; otherwise the file is
// removed and the queue has no file again, so that the Put makes the one
// holding off. wmu is held.
func (q *Queue) startLater(off int64) error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	seg := q.segs[0] // unwritten: the only one; only wmu's holder adds files
	if off < seg.end() {
		if err := writeBlanks(seg, 0, off); err != nil {
			return err
		}
		q.mu.Lock()
		q.startAtLocked(off)
		q.maxOff.Store(off)
		q.mu.Unlock()
		return nil
	}
	q.mu.Lock()
	q.segs = q.segs[:0]
	q.segsChanged()
	q.mu.Unlock()
	cerr := seg.closeFile()
	if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the empty first file: %w", errors.Join(cerr, err))
	}
	q.unsynced.Or(dirUnsynced)
	return nil
}

// Prepare creates the queue's directory if it does not exist yet, so that
// creating its first file later needs no room for a directory.
func (q *Queue) Prepare() error {
	if q.dirReady.Load() {
		return nil
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed.Load() {
		return q.errf("prepare: %w", ErrClosed)
	}
	if err := q.makeDir(); err != nil {
		return q.errf("prepare: %w", err)
	}
	return nil
}

// makeDir creates the queue directory; the next flush makes the new
// directory entries durable. wmu is held.
func (q *Queue) makeDir() error {
	if q.dirReady.Load() {
		return nil
	}
	// Mkdir first: the topic directory is usually there already, and
	// MkdirAll would stat each level before creating anything.
	err := os.Mkdir(q.dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.Mkdir(filepath.Dir(q.dir), 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			err = os.Mkdir(q.dir, 0o755)
		}
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		if err = os.MkdirAll(q.dir, 0o755); err != nil { // the root is gone too
			return fmt.Errorf("create queue dir: %w", err)
		}
	}
	q.unsynced.Or(parentsUnsynced)
	q.dirReady.Store(true)
	return nil
}

// newSegment creates the file starting at queue offset start; the next
// flush makes its directory entry durable, before any checkpoint counts on
// the units in it. wmu is held.
func (q *Queue) newSegment(start int64) (*segment, error) {
	if err := q.makeDir(); err != nil {
		return nil, err
	}
	seg, err := createSegment(filepath.Join(q.dir, fileName(start*UnitSize)), start, q.lay.fileUnits(start), q)
	if err != nil {
		return nil, err
	}
	q.unsynced.Or(dirUnsynced)
	return seg, nil
}

// syncDirs makes the directory entries created since the last flush
// durable. flushMu is held.
func (q *Queue) syncDirs() error {
	bits := q.unsynced.Swap(0)
	if bits == 0 {
		return nil
	}
	dirs := []string{q.dir}
	if bits&parentsUnsynced != 0 {
		dirs = append(dirs, filepath.Dir(q.dir), q.root)
	}
	for _, d := range dirs {
		if err := fsutil.SyncDir(d); err != nil {
			q.unsynced.Or(bits)
			return err
		}
	}
	return nil
}
