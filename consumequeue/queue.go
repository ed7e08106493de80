package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Queue is the ConsumeQueue of one (topic, queue id): a dense array of units
// indexed by queue offset, spread over files that grow to a fixed size.
//
// One goroutine writes (Put, TruncateAfter); any number read (Get, Read,
// MinOffset, MaxOffset, OffsetForTime) concurrently with it and with
// Store.DeleteBefore and Flush.
type Queue struct {
	topic string
	id    int32
	root  string       // store root, synced when the topic directory is created
	dir   string       // <root>/<topic>/<id>
	lay   layout       // which file holds which offset
	log   *zap.Logger  // the store's; logger() adds the queue's fields
	fds   *openFiles   // the store's count of open descriptors
	open  atomic.Int64 // descriptors this queue's segments hold
	// spare is Options.Spare: a file when the disk has no room for one.
	spare func(path string, size int64) (*os.File, error)

	// Lock order: wmu, then flushMu, then mu.

	// wmu serialises the writer side: Put, TruncateAfter and close.
	wmu      sync.Mutex
	lastEnd  int64       // End() of the unit at MaxOffset-1, 0 if the queue is empty
	dirReady atomic.Bool // the queue directory exists; set with wmu held

	// flushMu serialises flushes and keeps files from being removed (and
	// descriptors from being closed) while a flush writes them; units
	// below flushed are durable. flushed is written with flushMu held.
	flushMu sync.Mutex
	flushed atomic.Int64
	// epoch counts truncations (flushMu held), so that a flush that let
	// go of flushMu between writing and syncing knows whether what it
	// wrote is still the queue's.
	epoch uint64
	// unsynced holds dirUnsynced and parentsUnsynced: directory entries
	// created since the last flush, which the flush makes durable.
	unsynced atomic.Uint32
	// used is set by puts and by reads from the files; each flush clears
	// it and closes the descriptors of a queue that was not used since the
	// previous one.
	used atomic.Bool

	// mu guards segs, written and stage: readers hold it shared; the
	// writer holds it exclusively to add a unit or a file; removing files
	// and closing descriptors hold it exclusively.
	mu   sync.RWMutex
	segs []*segment // contiguous: segs[i+1].start == segs[i].end()
	// Units below written are in the files (read with pread); units
	// [written, MaxOffset) are in stage, encoded, until a flush writes
	// them.
	written   int64
	stage     []byte
	stagePeak int // the stage's largest length since the last flush
	// The store's staging journal of generation jgen holds the queue's
	// staged units below journaled (see Store.FlushBelow).
	jgen      uint64
	journaled int64
	jcut      *atomic.Bool // the store's: set when a truncation cuts units

	closed  atomic.Bool  // set with wmu, flushMu and mu held
	fileEnd atomic.Int64 // queue offset just past the last file, 0 without files; set with mu held
	minOff  atomic.Int64 // first readable queue offset
	maxOff  atomic.Int64 // next queue offset to write; published after the unit bytes
	maxPhy  atomic.Int64 // End() of the last unit, 0 if empty
}

// Bits of Queue.unsynced.
const (
	dirUnsynced     = 1 << iota // a file was created in (or renamed into) the queue directory
	parentsUnsynced             // the queue (and maybe topic) directory was created
)

func newQueue(root, topic string, id int32, opts Options, fds *openFiles, jcut *atomic.Bool, log *zap.Logger) *Queue {
	return &Queue{
		jcut:  jcut,
		topic: topic,
		id:    id,
		root:  root,
		dir:   filepath.Join(root, topic, fmt.Sprint(id)),
		lay:   newLayout(opts),
		fds:   fds,
		spare: opts.Spare,
		log:   log,
	}
}

// logger returns the store's logger with the queue's fields. It is made
// when something is logged, which is rare: a logger kept per queue holds
// an encoder buffer, about a kilobyte for each of tens of thousands of
// queues.
func (q *Queue) logger() *zap.Logger {
	return q.log.With(zap.String("topic", q.topic), zap.Int32("queueId", q.id))
}

// Topic returns the queue's topic.
func (q *Queue) Topic() string { return q.topic }

// ID returns the queue id.
func (q *Queue) ID() int32 { return q.id }

// MinOffset returns the first queue offset that can be read.
func (q *Queue) MinOffset() int64 { return q.minOff.Load() }

// MaxOffset returns the next queue offset to be written; units
// [MinOffset, MaxOffset) are readable.
func (q *Queue) MaxOffset() int64 { return q.maxOff.Load() }

// MaxPhysicalOffset returns Offset+Size of the last unit, or 0 if the queue
// holds no unit.
func (q *Queue) MaxPhysicalOffset() int64 { return q.maxPhy.Load() }

// String returns "topic/id".
func (q *Queue) String() string { return fmt.Sprintf("%s/%d", q.topic, q.id) }

func (q *Queue) errf(format string, args ...any) error {
	return fmt.Errorf("consumequeue %s/%d: %w", q.topic, q.id, fmt.Errorf(format, args...))
}

// segsChanged republishes fileEnd after segs changed. mu is held (or the
// queue is not shared yet).
func (q *Queue) segsChanged() {
	if n := len(q.segs); n > 0 {
		q.fileEnd.Store(q.segs[n-1].end())
	} else {
		q.fileEnd.Store(0)
	}
}

// segFor returns the segment holding queue offset off, or nil. mu must be held.
func (q *Queue) segFor(off int64) *segment {
	n := len(q.segs)
	if n == 0 || off < q.segs[0].start || off >= q.segs[n-1].end() {
		return nil
	}
	i := sort.Search(n, func(i int) bool { return q.segs[i].end() > off })
	return q.segs[i]
}

// unitAt returns the unit at off, from the stage or from its file. mu must
// be held and off must be below the staged end.
func (q *Queue) unitAt(off int64) (Unit, error) {
	if off >= q.written {
		return q.stagedUnit(off), nil
	}
	seg := q.segFor(off)
	if seg == nil {
		return Unit{}, fmt.Errorf("unit %d: no file holds it: %w", off, ErrCorrupt)
	}
	return seg.unit(off)
}

// searchUnits returns the first offset in [lo, hi) whose unit satisfies
// pred (hi if none), by binary search: pred must be false and then true
// along the offsets. The staged units are looked at first: when the
// answer lies among them no file is read (a recovery cuts the staged
// tails of tens of thousands of queues). mu must be held.
func (q *Queue) searchUnits(lo, hi int64, pred func(Unit) bool) (int64, error) {
	if w := q.written; lo < w && w < hi {
		if !pred(q.stagedUnit(w)) {
			return q.binarySearchUnits(w+1, hi, pred)
		}
		// The answer is the first staged unit or below it.
		return q.binarySearchUnits(lo, w, pred)
	}
	return q.binarySearchUnits(lo, hi, pred)
}

// stagedUnit returns the staged unit at off (written <= off < MaxOffset).
func (q *Queue) stagedUnit(off int64) Unit {
	i := (off - q.written) * UnitSize
	return decodeUnit(q.stage[i : i+UnitSize])
}

// binarySearchUnits is searchUnits' binary search over [lo, hi).
func (q *Queue) binarySearchUnits(lo, hi int64, pred func(Unit) bool) (int64, error) {
	var ferr error
	i := sort.Search(int(hi-lo), func(i int) bool {
		if ferr != nil {
			return true
		}
		u, err := q.unitAt(lo + int64(i))
		if err != nil {
			ferr = err
			return true
		}
		return pred(u)
	})
	return lo + int64(i), ferr
}

// Get returns the unit at queueOffset, or an error wrapping ErrNotFound if
// queueOffset is outside [MinOffset, MaxOffset).
func (q *Queue) Get(queueOffset int64) (Unit, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed.Load() {
		return Unit{}, q.errf("get %d: %w", queueOffset, ErrClosed)
	}
	lo, hi := q.minOff.Load(), q.maxOff.Load()
	if queueOffset < lo || queueOffset >= hi {
		return Unit{}, q.errf("get %d (queue holds [%d, %d)): %w", queueOffset, lo, hi, ErrNotFound)
	}
	if queueOffset < q.written {
		q.used.Store(true)
	}
	u, err := q.unitAt(queueOffset)
	if err != nil {
		return Unit{}, q.errf("get %d: %w", queueOffset, err)
	}
	if !u.valid() {
		return Unit{}, q.errf("get %d: hole (%+v) below max offset %d: %w", queueOffset, u, hi, ErrCorrupt)
	}
	return u, nil
}

// Read appends to dst up to max units starting at queue offset from, crossing
// file boundaries, and returns the extended slice. It returns dst unchanged
// if from >= MaxOffset, and an error wrapping ErrNotFound if from < MinOffset.
func (q *Queue) Read(from int64, max int, dst []Unit) ([]Unit, error) {
	if max <= 0 {
		return dst, nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed.Load() {
		return dst, q.errf("read %d: %w", from, ErrClosed)
	}
	lo, hi := q.minOff.Load(), q.maxOff.Load()
	if from >= hi {
		return dst, nil
	}
	if from < lo {
		return dst, q.errf("read %d (queue holds [%d, %d)): %w", from, lo, hi, ErrNotFound)
	}
	end := hi
	if int64(max) < hi-from {
		end = from + int64(max)
	}
	var buf []byte
	for off := from; off < end; {
		var b []byte
		stop := end
		if off >= q.written {
			b = q.stage[(off-q.written)*UnitSize : (end-q.written)*UnitSize]
		} else {
			seg := q.segFor(off)
			if seg == nil {
				return dst, q.errf("read %d: no file holds it: %w", off, ErrCorrupt)
			}
			stop = min(end, seg.end(), q.written)
			if n := int((stop - off) * UnitSize); cap(buf) < n {
				buf = make([]byte, n)
			}
			b = buf[:(stop-off)*UnitSize]
			q.used.Store(true)
			if err := seg.read(b, off); err != nil {
				return dst, q.errf("read %d: %w", off, err)
			}
		}
		for i := 0; i < len(b); i += UnitSize {
			u := decodeUnit(b[i:])
			if !u.valid() {
				return dst, q.errf("read: hole (%+v) at %d below max offset %d: %w",
					u, off+int64(i/UnitSize), hi, ErrCorrupt)
			}
			dst = append(dst, u)
		}
		off = stop
	}
	return dst, nil
}

// OffsetForTime returns the smallest queue offset whose store time is >= ts,
// by binary search over [MinOffset, MaxOffset). storeTime returns a unit's
// store timestamp (read from the CommitLog); if it returns an error wrapping
// ErrNotFound the message is taken to be gone (older than everything). It
// returns MaxOffset if no unit is recent enough and MinOffset if ts precedes
// them all.
func (q *Queue) OffsetForTime(ts int64, storeTime func(u Unit) (int64, error)) (int64, error) {
	lo, hi := q.MinOffset(), q.MaxOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, err := q.Get(mid)
		if err != nil {
			return 0, fmt.Errorf("offset for time %d: %w", ts, err)
		}
		t, err := storeTime(u)
		switch {
		case errors.Is(err, ErrNotFound):
			lo = mid + 1
		case err != nil:
			return 0, q.errf("offset for time %d: store time of offset %d (%+v): %w", ts, mid, u, err)
		case t >= ts:
			hi = mid
		default:
			lo = mid + 1
		}
	}
	return lo, nil
}
