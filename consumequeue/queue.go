package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Queue is the ConsumeQueue of one (topic, queue id): a dense array of units
// indexed by queue offset, spread over fixed-size mapped files.
//
// One goroutine writes (Put, TruncateAfter); any number read (Get, Read,
// MinOffset, MaxOffset, OffsetForTime) concurrently with it and with
// Store.DeleteBefore and Flush.
type Queue struct {
	topic string
	id    int32
	root  string // store root, synced when the topic directory is created
	dir   string // <root>/<topic>/<id>
	upf   int64  // units per file
	fsize int64  // bytes per file
	log   *zap.Logger
	// spare is Options.Spare: a file when the disk has no room for one.
	spare func(path string, size int64) (*os.File, error)

	// Lock order: wmu, then flushMu, then mu.

	// wmu serialises the writer side: Put, TruncateAfter and close.
	wmu      sync.Mutex
	lastEnd  int64       // End() of the unit at MaxOffset-1, 0 if the queue is empty
	dirReady atomic.Bool // the queue directory exists; set with wmu held

	// flushMu serialises flushes and keeps files from being removed while
	// a flush writes them; units below flushed are durable.
	flushMu sync.Mutex
	flushed int64

	// mu guards segs, written and stage and keeps the mappings alive:
	// readers hold it shared; the writer holds it exclusively to add a unit
	// or a file; unmapping holds it exclusively.
	mu   sync.RWMutex
	segs []*segment // contiguous: segs[i].start == segs[0].start + i*upf
	// Units below written are in the files (read through the mappings);
	// units [written, MaxOffset) are in stage, encoded, until a flush
	// writes them.
	written   int64
	stage     []byte
	stagePeak int // the stage's largest length since the last flush

	closed  atomic.Bool  // set with wmu, flushMu and mu held
	fileEnd atomic.Int64 // queue offset just past the last file, 0 without files; set with mu held
	minOff  atomic.Int64 // first readable queue offset
	maxOff  atomic.Int64 // next queue offset to write; published after the unit bytes
	maxPhy  atomic.Int64 // End() of the last unit, 0 if empty
}

func newQueue(root, topic string, id int32, opts Options, log *zap.Logger) *Queue {
	return &Queue{
		topic: topic,
		id:    id,
		root:  root,
		dir:   filepath.Join(root, topic, fmt.Sprint(id)),
		upf:   int64(opts.UnitsPerFile),
		fsize: opts.FileSize(),
		spare: opts.Spare,
		log:   log.With(zap.String("topic", topic), zap.Int32("queueId", id)),
	}
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
		q.fileEnd.Store(q.segs[n-1].start + q.upf)
	} else {
		q.fileEnd.Store(0)
	}
}

// segFor returns the segment holding queue offset off, or nil. mu must be held.
func (q *Queue) segFor(off int64) *segment {
	if len(q.segs) == 0 || off < q.segs[0].start {
		return nil
	}
	i := (off - q.segs[0].start) / q.upf
	if i >= int64(len(q.segs)) {
		return nil
	}
	return q.segs[i]
}

// unitBytes returns the 20 bytes of the unit at off, from the stage or from
// its file's mapping, or nil if no file holds it. mu must be held and off
// must be below the staged end.
func (q *Queue) unitBytes(off int64) []byte {
	if off >= q.written {
		i := (off - q.written) * UnitSize
		return q.stage[i : i+UnitSize : i+UnitSize]
	}
	if seg := q.segFor(off); seg != nil {
		return seg.unit(off)
	}
	return nil
}

// unitAt decodes the unit at off. mu must be held and off must lie in a
// file or in the stage.
func (q *Queue) unitAt(off int64) Unit {
	return decodeUnit(q.unitBytes(off))
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
	b := q.unitBytes(queueOffset)
	if b == nil {
		return Unit{}, q.errf("get %d: no file holds it: %w", queueOffset, ErrCorrupt)
	}
	u := decodeUnit(b)
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
			stop = min(end, seg.start+q.upf, q.written)
			b = seg.span(off, stop)
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
