package commitlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/message"
)

var (
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("commitlog: closed")
	// ErrDiskFull is returned by Append when the disk is above DiskFullRatio
	// or out of space. The record was not written (the log may have closed
	// its current segment with a blank before a new one failed to allocate).
	ErrDiskFull = errors.New("commitlog: disk full")
	// ErrRecordTooLarge is returned for a record that cannot fit in a segment.
	ErrRecordTooLarge = errors.New("commitlog: record larger than a segment")
	// ErrFlushTimeout is returned by a sync-mode append whose flush did not
	// complete within SyncFlushTimeout. The record is in the log and may
	// still become durable.
	ErrFlushTimeout = errors.New("commitlog: flush timed out")
	// ErrOffset is returned for reads outside the readable range or not at a
	// record boundary.
	ErrOffset = errors.New("commitlog: offset out of range")
	// ErrWriteFailed wraps the first write or sync error; it is sticky: every
	// later append fails with it.
	ErrWriteFailed = errors.New("commitlog: write failed")
)

// Entry is one record to append.
type Entry struct {
	// Record is an encoded record (message.Encode). Append stamps its queue
	// offset, physical offset and store timestamp in place.
	Record []byte
	// Topic and QueueID name the ConsumeQueue whose next offset the record
	// takes.
	Topic   string
	QueueID int32
	// NoQueueOffset keeps the queue offset at 0 and does not advance it, for
	// records that never reach a ConsumeQueue (prepared or rolled-back
	// transactional records).
	NoQueueOffset bool
}

// Result says where an appended record went.
type Result struct {
	PhysicalOffset int64
	QueueOffset    int64
	Size           int32
	StoreTimestamp int64
}

// End is the offset just past the record.
func (r Result) End() int64 { return r.PhysicalOffset + int64(r.Size) }

type queueKey struct {
	topic string
	id    int32
}

// chunk is staged bytes for one segment in pwrite mode.
type chunk struct {
	seg *segment
	off int64 // offset inside the segment
	buf []byte
}

// RecoveryInfo describes what Open found.
type RecoveryInfo struct {
	// From is where the scan started and End where the valid log ends.
	From, End int64
	// Records is the number of records verified by the scan.
	Records int64
	// Torn is true when bytes past End were not a valid record and were
	// discarded; TornReason says why.
	Torn       bool
	TornReason string
	// RemovedSegments counts segment files past End that were deleted.
	RemovedSegments int
}

// Log is a segmented, append-only CommitLog. One writer lock serialises
// appends; any number of goroutines read concurrently.
type Log struct {
	opts     Options
	mode     WriteMode
	writable bool // segments mapped read-write
	log      *zap.Logger

	// Pages made writable ahead of the writer in mmap mode (mmapwrite.go):
	// populateLoop serves populateReqs; populateOff is set once the kernel
	// turns out not to know how.
	populateReqs chan populateReq
	populateOff  atomic.Bool
	// Zeros ahead of the writer (zeroahead.go): zero is set when a durable
	// writer's are written (by zeroLoop, which serves zeroReq), zeroPopulate
	// when mmap mode's populate writes them before the pages it makes
	// writable; a step claims from zeroFrom while zeroBusy (under mu) and
	// broadcasts zeroDone (on mu) when done; zeroOff is set once writing
	// them failed.
	zero         bool
	zeroPopulate bool
	zeroReq      chan struct{}
	zeroBusy     bool
	zeroFrom     int64
	zeroDone     sync.Cond
	zeroOff      atomic.Bool
	zeroDelay    time.Duration // zeroClaimDelay when the log opened
	zeroGap      int64         // populateZeroGap when the log opened
	// bulk is set while an append large enough to be written with one
	// pwrite is under way in mmap write mode (mmapwrite.go). Under mu.
	bulk bool

	// Lock order: flushMu, then commitMu, then mu, then segMu or allocMu;
	// segMu and allocMu are never held together. flush holds flushMu
	// across commit (commitMu, then mu) and takes segMu once commit has
	// returned; StartAt takes all five in this order; under mu, rollLocked
	// takes segMu and allocMu one after the other, startLoops allocMu and
	// LastRecord segMu (findLastRecordLocked). Appenders and LastRecord
	// release mu before commitUpTo, which takes commitMu. OnFlush runs
	// under flushMu. allocLoop holds allocMu while it creates and maps the
	// next segment, so a roll can wait for it under mu. View, Scan and
	// PreadRecords call fn under segMu's read lock: fn must not call the
	// Log methods that take these locks. populate and a zero step's write
	// take segMu's read lock holding no other; a zero step (zeroLoop's, or
	// populate's in mmap mode) claims and
	// releases its range under mu alone, and appenders wait for it on
	// zeroDone (on mu) before they take an offset.

	segMu sync.RWMutex
	segs  []*segment

	mu     sync.Mutex // the append lock
	wpos   int64
	active *segment
	qoff   map[queueKey]int64
	stage  []chunk
	// spareStage is the other half of a double buffer of chunk lists.
	spareStage []chunk
	staged     int
	free       [][]byte
	written    atomic.Int64 // mirror of wpos for lock-free readers

	commitMu  sync.Mutex
	committed atomic.Int64
	// flushMu serialises flushes with each other and with closing or
	// removing segments; segmentsClosed is set under it by Close.
	flushMu        sync.Mutex
	segmentsClosed bool
	flushed        atomic.Int64
	watchTicks     atomic.Int64 // quarters of SyncFlushTimeout (watchTick)
	residentFrom   atomic.Int64 // ReleaseResident dropped the mapped pages below
	cacheFrom      atomic.Int64 // dropBehind dropped the page cache below

	ra raState // read-ahead for sequential readers (Prefetch)

	readableSig  notify.Signal
	flushedSig   notify.Signal
	committedSig notify.Signal
	// quietEnd is the end of the last append whose appender dispatches it
	// itself (Options.AppendersDispatch): reaching it fires no
	// ReadableChanged. Truncation lowers it with the log's end.
	quietEnd atomic.Int64

	// The last record in the log, for replication (see replica.go):
	// lastStart and lastSize are valid when lastKnown; mu guards them.
	lastStart   int64
	lastSize    int32
	lastKnown   bool
	lastStoreTs atomic.Int64

	sticky   atomic.Pointer[error]
	diskFull atomic.Bool
	diskUsed atomic.Uint64 // float64 bits

	flushReq chan struct{}
	// syncAppends counts the appends of sync mode, gathering is set while
	// the flusher waits for them to come back and arrived wakes it
	// (groupcommit.go).
	syncAppends atomic.Int64
	gathering   atomic.Bool
	arrived     chan struct{}
	allocReq    chan struct{}
	allocMu     sync.Mutex
	allocWant   int64
	next        *segment

	recovery    RecoveryInfo
	recoveryErr error

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens the log in opts.Dir, recovers it by scanning and verifying
// records from the offset from (a record boundary known to be durable, such
// as a checkpoint; 0 scans everything), discards a torn tail, and starts the
// background flusher and segment allocator.
func Open(opts Options, from int64, log *zap.Logger) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("commitlog: %w", err)
	}
	l := &Log{
		opts:         opts,
		mode:         opts.effectiveWriteMode(),
		log:          log,
		qoff:         make(map[queueKey]int64),
		flushReq:     make(chan struct{}, 1),
		arrived:      make(chan struct{}, 1),
		allocReq:     make(chan struct{}, 1),
		allocWant:    -1,
		populateReqs: make(chan populateReq, 4),
		ra:           raState{size: opts.readAhead(), reqs: make(chan raReq, raQueue)},
	}
	l.writable = l.mode == WriteMmap
	l.zero = opts.zeroing(l.mode)
	l.zeroPopulate = opts.zeroingPopulated(l.mode)
	l.zeroReq = make(chan struct{}, 1)
	l.zeroDone.L = &l.mu
	l.zeroDelay = zeroClaimDelay
	l.zeroGap = populateZeroGap
	starts, err := listSegments(opts.Dir)
	if err != nil {
		return nil, err
	}
	if starts, err = dropEmptyTail(opts.Dir, starts, log); err != nil {
		return nil, err
	}
	for i, s := range starts {
		if s%opts.SegmentSize != 0 || (i > 0 && s != starts[i-1]+opts.SegmentSize) {
			l.closeSegments()
			return nil, fmt.Errorf("commitlog: segment %s does not follow %s with segment size %d",
				SegmentName(s), SegmentName(starts[max(i-1, 0)]), opts.SegmentSize)
		}
		seg, err := openSegment(opts.Dir, s, opts.SegmentSize, false, l.writable)
		if err != nil {
			l.closeSegments()
			return nil, fmt.Errorf("commitlog: %w", err)
		}
		l.segs = append(l.segs, seg)
	}
	if err := l.recover(from); err != nil {
		l.closeSegments()
		return nil, err
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.checkDisk()
	l.startLoops()
	if l.ra.size > 0 {
		l.ra.chunk = raChunkFor(opts.Dir)
		l.wg.Add(1)
		go l.readAheadLoop()
	}
	l.log.Info("commitlog opened",
		zap.String("dir", opts.Dir), zap.String("flush", opts.FlushMode.String()),
		zap.String("write", l.mode.String()), zap.Int64("segmentSize", opts.SegmentSize),
		zap.Int64("minOffset", l.MinOffset()), zap.Int64("maxOffset", l.MaxOffset()),
		zap.Int64("recoveredFrom", l.recovery.From), zap.Int64("records", l.recovery.Records),
		zap.Bool("torn", l.recovery.Torn))
	return l, nil
}

func (l *Log) closeSegments() {
	for _, s := range l.segs {
		_ = s.close()
	}
	l.segs = nil
}

// Recovery reports what Open found.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// Options returns the options the log runs with.
func (l *Log) Options() Options { return l.opts }

// WriteMode returns the write path in use (never WriteAuto).
func (l *Log) WriteMode() WriteMode { return l.mode }

// MinOffset is the first offset still in the log.
func (l *Log) MinOffset() int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	if len(l.segs) == 0 {
		return l.written.Load()
	}
	return l.segs[0].start
}

// MaxOffset is the offset the next record will take (records may not be
// readable or durable yet).
func (l *Log) MaxOffset() int64 { return l.written.Load() }

// FlushedOffset is the end of the durable prefix of the log.
func (l *Log) FlushedOffset() int64 { return l.flushed.Load() }

// Readable is the end of the prefix that readers and the dispatcher may see:
// the flushed offset in sync mode (consumers never see what is not durable),
// everything written in async mode.
func (l *Log) Readable() int64 {
	if l.opts.FlushMode == FlushSync {
		return l.flushed.Load()
	}
	return l.committed.Load()
}

// ReadableChanged returns a channel closed when Readable next advances.
func (l *Log) ReadableChanged() <-chan struct{} { return l.readableSig.C() }

// Err returns the sticky write error, if any.
func (l *Log) Err() error {
	if p := l.sticky.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) fail(err error) error {
	werr := fmt.Errorf("%w: %w", ErrWriteFailed, err)
	if l.sticky.CompareAndSwap(nil, &werr) {
		l.log.Error("commitlog write failed; refusing further appends", zap.Error(err))
	}
	return *l.sticky.Load()
}

// SetQueueOffset sets the next queue offset of a ConsumeQueue; the store
// calls it after recovery with each queue's max offset.
func (l *Log) SetQueueOffset(topic string, queueID int32, next int64) {
	l.mu.Lock()
	l.qoff[queueKey{topic, queueID}] = next
	l.mu.Unlock()
}

// QueueOffset returns the next queue offset the log will assign.
func (l *Log) QueueOffset(topic string, queueID int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.qoff[queueKey{topic, queueID}]
}

// DeleteQueueOffsets forgets every queue of a topic.
func (l *Log) DeleteQueueOffsets(topic string) {
	l.mu.Lock()
	for k := range l.qoff {
		if k.topic == topic {
			delete(l.qoff, k)
		}
	}
	l.mu.Unlock()
}

// Append appends one record. In sync mode it returns once the record is
// durable; in async mode once it is in the log.
func (l *Log) Append(ctx context.Context, e *Entry) (Result, error) {
	var one [1]Result
	res, err := l.AppendBatch(ctx, []*Entry{e}, one[:0])
	if len(res) == 0 {
		return Result{}, err
	}
	return res[0], err
}

// AppendBatch appends records under one acquisition of the append lock, so
// they are contiguous in the log, and (in sync mode) waits once for all of
// them to be durable. Results are appended to dst. On error the results of
// the records that were written are returned with it.
func (l *Log) AppendBatch(ctx context.Context, entries []*Entry, dst []Result) ([]Result, error) {
	res, err := l.AppendNoWait(entries, dst)
	if err != nil || len(res) == len(dst) {
		return res, err
	}
	if l.opts.FlushMode == FlushSync {
		if err := l.WaitFlushed(ctx, res[len(res)-1].End()); err != nil {
			return res, err
		}
	}
	return res, nil
}

// AppendNoWait appends records like AppendBatch but never waits for a flush;
// a caller that pipelines appends calls WaitFlushed itself.
func (l *Log) AppendNoWait(entries []*Entry, dst []Result) ([]Result, error) {
	if l.closed.Load() {
		return dst, ErrClosed
	}
	if err := l.Err(); err != nil {
		return dst, err
	}
	if l.diskFull.Load() {
		return dst, fmt.Errorf("%w: %.1f%% of the disk holding %s is used (limit %.0f%%)",
			ErrDiskFull, l.DiskUsage()*100, l.opts.Dir, l.opts.DiskFullRatio*100)
	}
	maxSize := l.opts.MaxRecordSize()
	total := 0
	for _, e := range entries {
		total += len(e.Record)
		if len(e.Record) > maxSize {
			return dst, fmt.Errorf("%w: %d bytes, segment holds at most %d", ErrRecordTooLarge, len(e.Record), maxSize)
		}
		if len(e.Record) < message.BlankSize {
			return dst, fmt.Errorf("commitlog: record of %d bytes is too short", len(e.Record))
		}
	}
	now := l.opts.Now().UnixMilli()
	l.mu.Lock()
	l.waitZeroLocked(int64(total) + message.BlankSize)
	if l.closed.Load() {
		l.mu.Unlock()
		return dst, ErrClosed
	}
	if err := l.Err(); err != nil { // a bulk write failed meanwhile
		l.mu.Unlock()
		return dst, err
	}
	bulk := l.beginBulkLocked(total)
	var err error
	for _, e := range entries {
		var r Result
		r, err = l.appendLocked(e, now)
		if err != nil {
			break
		}
		dst = append(dst, r)
	}
	if bulk {
		if werr := l.endBulkLocked(); werr != nil && err == nil {
			err = werr
		}
	}
	wpos := l.wpos
	staged := l.staged
	if l.opts.AppendersDispatch {
		l.quietEnd.Store(wpos) // its appender dispatches up to here
	}
	l.mu.Unlock()
	if cerr := l.afterAppend(wpos, staged); cerr != nil && err == nil {
		err = cerr
	}
	return dst, err
}

// afterAppend moves appended bytes (the log ends at wpos, staged bytes are
// not yet written to the file) on their way to the disk, as the write
// mode and flush mode say, and returns a write error.
func (l *Log) afterAppend(wpos int64, staged int) error {
	if l.mode == WriteMmap {
		// A failed bulk write (mmapwrite.go) left a hole below wpos: the
		// committed offset must not pass it.
		if err := l.Err(); err != nil {
			return err
		}
		l.advanceCommitted(wpos)
	}
	switch {
	case l.mode == WritePwrite && l.opts.FlushMode == FlushAsync:
		// An async acknowledgement means the bytes are in the file (the page
		// cache), so they survive a crash of this process. Appenders that
		// arrive together share one pwrite.
		return l.commitUpTo(wpos)
	case l.opts.FlushMode == FlushSync:
		var err error
		if l.mode == WritePwrite && staged >= l.opts.StageLimit {
			// Back-pressure: do not let the stage grow without bound while
			// the flusher is busy.
			err = l.commitUpTo(wpos)
		}
		l.noteArrival()
		l.requestFlush()
		return err
	}
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// advanceCommitted raises the committed offset (never lowers it) and wakes
// readers in async mode.
func (l *Log) advanceCommitted(to int64) {
	for {
		cur := l.committed.Load()
		if to <= cur {
			return
		}
		if l.committed.CompareAndSwap(cur, to) {
			break
		}
	}
	l.committedSig.Notify()
	if l.opts.FlushMode == FlushAsync && (!l.opts.AppendersDispatch || to > l.quietEnd.Load()) {
		l.readableSig.Notify()
	}
}

// appendLocked writes one record at wpos, rolling to a new segment when it
// does not fit. l.mu must be held.
func (l *Log) appendLocked(e *Entry, now int64) (Result, error) {
	size := int64(len(e.Record))
	seg := l.active
	if seg == nil || seg.end()-l.wpos < size+message.BlankSize {
		if seg != nil {
			l.writeBlankLocked(seg)
		}
		var err error
		if seg, err = l.rollLocked(); err != nil {
			return Result{}, err
		}
	}
	var qo int64
	var k queueKey
	if !e.NoQueueOffset {
		k = queueKey{e.Topic, e.QueueID}
		qo = l.qoff[k]
	}
	message.Stamp(e.Record, qo, l.wpos, now)
	l.writeLocked(seg, e.Record)
	r := Result{PhysicalOffset: l.wpos, QueueOffset: qo, Size: int32(size), StoreTimestamp: now}
	l.lastStart, l.lastSize, l.lastKnown = l.wpos, int32(size), true
	l.lastStoreTs.Store(now)
	l.wpos += size
	l.written.Store(l.wpos)
	if !e.NoQueueOffset {
		l.qoff[k] = qo + 1
	}
	return r, nil
}

// writeLocked puts b at wpos of seg: into the mapping in mmap write mode
// (unless a bulk append is under way), into the stage otherwise.
func (l *Log) writeLocked(seg *segment, b []byte) {
	rel := l.wpos - seg.start
	if l.mode == WriteMmap && !l.bulk {
		l.populateLocked(seg, rel+int64(len(b)))
		copy(seg.m.Data[rel:], b)
		return
	}
	n := len(l.stage)
	if n == 0 || l.stage[n-1].seg != seg {
		var buf []byte
		if k := len(l.free); k > 0 {
			buf, l.free = l.free[k-1][:0], l.free[:k-1]
		} else {
			buf = make([]byte, 0, l.opts.StageLimit+l.opts.StageLimit/4)
		}
		l.stage = append(l.stage, chunk{seg: seg, off: rel, buf: buf})
		n++
	}
	l.stage[n-1].buf = append(l.stage[n-1].buf, b...)
	l.staged += len(b)
	if l.zero {
		l.askZeroLocked(seg, rel+int64(len(b)))
	}
}

// writeBlankLocked fills the rest of seg with an end-of-segment blank.
func (l *Log) writeBlankLocked(seg *segment) {
	var hdr [message.BlankSize]byte
	message.EncodeBlank(hdr[:], int32(seg.end()-l.wpos))
	l.writeLocked(seg, hdr[:])
	l.wpos = seg.end()
	l.written.Store(l.wpos)
	l.setActiveLocked(nil)
}

// rollLocked makes the segment starting at wpos the active one, taking the
// one the allocator prepared when it is ready.
func (l *Log) rollLocked() (*segment, error) {
	start := l.wpos
	l.allocMu.Lock()
	seg := l.next
	l.next = nil
	l.allocWant = -1 // keep the allocator off the file we may create below
	if seg != nil && seg.start != start {
		_ = seg.remove()
		seg = nil
	}
	l.allocMu.Unlock()
	if seg == nil {
		var err error
		seg, err = openSegment(l.opts.Dir, start, l.opts.SegmentSize, true, l.writable)
		if err != nil {
			if fsutil.IsNoSpace(err) {
				return nil, fmt.Errorf("%w: cannot allocate segment %s: %w", ErrDiskFull, SegmentName(start), err)
			}
			return nil, fmt.Errorf("commitlog: create segment %s: %w", SegmentName(start), err)
		}
	}
	l.segMu.Lock()
	l.segs = append(l.segs, seg)
	l.segMu.Unlock()
	l.setActiveLocked(seg)
	l.allocMu.Lock()
	l.allocWant = seg.end()
	l.allocMu.Unlock()
	signal(l.allocReq)
	return seg, nil
}

// segmentFor returns the segment holding off. segMu must be held.
func (l *Log) segmentFor(off int64) *segment {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end() > off })
	if i == len(l.segs) || l.segs[i].start > off {
		return nil
	}
	return l.segs[i]
}

// View calls fn with the n bytes at off, straight from the mapping. The slice
// is valid only during fn and must not be modified. The range must be
// readable and inside one segment.
func (l *Log) View(off int64, n int, fn func(b []byte) error) error {
	return l.inSegment(off, int64(n), func(seg *segment, rel int64) error {
		return fn(seg.m.Data[rel : rel+int64(n)])
	})
}

// inSegment calls fn with the segment holding the n bytes at off and
// their offset in it, under the segment list's read lock (so retention
// cannot close the segment meanwhile). The range must be readable and
// inside one segment.
func (l *Log) inSegment(off, n int64, fn func(seg *segment, rel int64) error) error {
	if off < 0 || n <= 0 || off+n > l.Readable() {
		return fmt.Errorf("%w: [%d, %d) readable up to %d", ErrOffset, off, off+n, l.Readable())
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	seg := l.segmentFor(off)
	if seg == nil || off+n > seg.end() {
		return fmt.Errorf("%w: [%d, %d) not inside one segment (min offset %d)", ErrOffset, off, off+n, l.minOffsetLocked())
	}
	return fn(seg, off-seg.start)
}

func (l *Log) minOffsetLocked() int64 {
	if len(l.segs) == 0 {
		return l.written.Load()
	}
	return l.segs[0].start
}

// ReadRecord appends the record at off to dst. off must be the start of a
// record.
func (l *Log) ReadRecord(off int64, dst []byte) ([]byte, error) {
	var size int32
	err := l.View(off, message.BlankSize, func(b []byte) error {
		h, _ := message.PeekHeader(b)
		if !h.IsRecord() {
			return fmt.Errorf("%w: no record at offset %d", ErrOffset, off)
		}
		size = h.TotalSize
		return nil
	})
	if err != nil {
		return dst, err
	}
	if size < message.BlankSize {
		return dst, fmt.Errorf("%w: bad record size %d at offset %d", ErrOffset, size, off)
	}
	err = l.View(off, int(size), func(b []byte) error {
		dst = append(dst, b...)
		return nil
	})
	return dst, err
}

// PreadRecord appends the record at off to dst like ReadRecord, but reads
// it from the file with pread instead of through the mapping: for a record
// behind the resident tail (see ReleaseResident) this costs one system call
// and leaves the process's page tables alone, where a read through the
// mapping takes a page fault and maps the page back into the resident set.
// A record below CacheFrom is read with O_DIRECT, as ReadSpan reads a span.
// cap(dst)-len(dst), if at least a header, is taken as the expected size.
func (l *Log) PreadRecord(off int64, dst []byte) ([]byte, error) {
	readable := l.Readable()
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	seg := l.segmentFor(off)
	if off < 0 || seg == nil {
		return dst, fmt.Errorf("%w: no record at offset %d (min offset %d)", ErrOffset, off, l.minOffsetLocked())
	}
	want := cap(dst) - len(dst)
	if want < message.BlankSize {
		want = preadGuess
	}
	return l.preadRecord(seg, off, min(seg.end(), readable), want, dst)
}

// ReadSpan fills dst with the bytes of the log at off, read from the file
// with one pread: for a run of records one after another (a queue's share
// of a batch), one system call and one copy instead of a page fault per
// page of the mapping. A span below CacheFrom, dropped from the page
// cache, is read with O_DIRECT (direct.go). The range must be readable and
// inside one segment.
func (l *Log) ReadSpan(off int64, dst []byte) error {
	return l.inSegment(off, int64(len(dst)), func(seg *segment, _ int64) error {
		return l.readFile(seg, off, dst)
	})
}

// readFile fills dst with the bytes of seg at off (absolute) with one
// read: with O_DIRECT when they all lie below CacheFrom, dropped from the
// page cache (direct.go), through the page cache otherwise.
func (l *Log) readFile(seg *segment, off int64, dst []byte) error {
	if off+int64(len(dst)) <= l.cacheFrom.Load() {
		if err := seg.readDirect(off, dst); err == nil {
			return nil
		}
		// Refused (the file system) or failed: the page cache's way
		// reports what is wrong, if anything still is.
	}
	rel := off - seg.start
	if _, err := seg.f.ReadAt(dst, rel); err != nil {
		return fmt.Errorf("read %s at %d: %w", seg.path, rel, err)
	}
	return nil
}

// CacheFrom is the offset below which the log dropped its bytes from the
// page cache (Options.CacheWindow); ReadSpan, PreadRecord(s) and
// ReadChunk read below it with O_DIRECT, so a reader of them need not ask
// for read-ahead.
func (l *Log) CacheFrom() int64 { return l.cacheFrom.Load() }

// Spans of PreadRecords: records at most preadGap apart are read together,
// up to preadSpan bytes per read; a record is assumed to be at most
// preadGuess bytes until its header says otherwise.
const (
	preadGap   = 16 << 10
	preadSpan  = 1 << 20
	preadGuess = 2048
)

// preadSpans holds PreadRecords' span buffers, each large enough for any
// span (its first record starts less than preadSpan before its last, which
// is read preadGuess long): reading due timer messages back a megabyte at
// a time would otherwise allocate and zero a megabyte for each batch.
var preadSpans = sync.Pool{New: func() any {
	b := make([]byte, preadSpan+preadGuess)
	return &b
}}

// PreadRecords reads the records starting at offs (in any order) with
// pread, as PreadRecord does, but reads records that lie close together in
// one call: due timer messages stored together are read 1 MiB at a time,
// scattered ones one by one. A span or a record below CacheFrom is read
// with O_DIRECT, as ReadSpan reads one. fn is called once per offset, with
// its index in offs and the record or an error; rec is valid only during
// fn.
func (l *Log) PreadRecords(offs []int64, fn func(i int, rec []byte, err error)) {
	order := make([]int, len(offs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return offs[order[a]] < offs[order[b]] })
	readable := l.Readable()
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var one []byte
	var buf *[]byte // a span's bytes, from preadSpans once needed
	defer func() {
		if buf != nil {
			preadSpans.Put(buf)
		}
	}()
	for k := 0; k < len(order); {
		off := offs[order[k]]
		seg := l.segmentFor(off)
		if off < 0 || seg == nil {
			fn(order[k], nil, fmt.Errorf("%w: no record at offset %d (min offset %d)", ErrOffset, off, l.minOffsetLocked()))
			k++
			continue
		}
		limit := min(seg.end(), readable)
		j := k + 1
		for j < len(order) && offs[order[j]]-offs[order[j-1]] <= preadGap && offs[order[j]]-off < preadSpan && offs[order[j]] < limit {
			j++
		}
		if j == k+1 { // alone
			var err error
			one, err = l.preadRecord(seg, off, limit, preadGuess, one[:0])
			fn(order[k], one, err)
			k = j
			continue
		}
		end := min(limit, offs[order[j-1]]+preadGuess)
		if buf == nil {
			buf = preadSpans.Get().(*[]byte)
		}
		span := (*buf)[:end-off]
		if err := l.readFile(seg, off, span); err != nil {
			for ; k < j; k++ {
				fn(order[k], nil, err)
			}
			continue
		}
		for ; k < j; k++ {
			o := offs[order[k]]
			b := span[o-off:]
			h, _ := message.PeekHeader(b)
			switch size := int(h.TotalSize); {
			case !h.IsRecord() || size < message.BlankSize:
				fn(order[k], nil, fmt.Errorf("%w: no record at offset %d", ErrOffset, o))
			case size <= len(b):
				fn(order[k], b[:size], nil)
			default: // runs past the span
				var err error
				one, err = l.preadRecord(seg, o, limit, size, one[:0])
				fn(order[k], one, err)
			}
		}
	}
}

// preadRecord reads the record at off, which lies in seg before limit,
// with one read of want bytes (two if the record is longer), appending it
// to dst: with O_DIRECT below CacheFrom, with pread above (readFile).
// segMu is held.
func (l *Log) preadRecord(seg *segment, off, limit int64, want int, dst []byte) ([]byte, error) {
	avail := limit - off
	if avail < message.BlankSize {
		return dst, fmt.Errorf("%w: no record at offset %d, readable up to %d", ErrOffset, off, limit)
	}
	start := len(dst)
	read := func(from, to int64) error {
		dst = slices.Grow(dst, int(to-from))[:start+int(to)]
		return l.readFile(seg, off+from, dst[start+int(from):])
	}
	first := min(int64(want), avail)
	if err := read(0, first); err != nil {
		return dst[:start], err
	}
	h, _ := message.PeekHeader(dst[start:])
	if !h.IsRecord() {
		return dst[:start], fmt.Errorf("%w: no record at offset %d", ErrOffset, off)
	}
	size := int64(h.TotalSize)
	if size < message.BlankSize || size > avail {
		return dst[:start], fmt.Errorf("%w: bad record size %d at offset %d", ErrOffset, size, off)
	}
	if size > first {
		if err := read(first, size); err != nil {
			return dst[:start], err
		}
	}
	return dst[:start+int(size)], nil
}

// Scan calls fn for every record from the record boundary from up to limit
// (at most Readable), skipping end-of-segment blanks. rec aliases the
// mapping and is valid only during fn. It returns the offset after the last
// record handed to fn. A record that does not parse stops the scan with an
// error wrapping message.ErrCorrupt.
func (l *Log) Scan(from, limit int64, fn func(off int64, rec []byte) error) (int64, error) {
	limit = min(limit, l.Readable())
	off := from
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	for off < limit {
		seg := l.segmentFor(off)
		if seg == nil {
			return off, fmt.Errorf("%w: %d is not in the log (min %d)", ErrOffset, off, l.minOffsetLocked())
		}
		segLimit := min(limit, seg.end())
		for off < segLimit {
			rel := off - seg.start
			if seg.end()-off < message.BlankSize {
				return off, fmt.Errorf("%w: %d bytes left in segment at %d", message.ErrCorrupt, seg.end()-off, off)
			}
			h, _ := message.PeekHeader(seg.m.Data[rel:])
			if h.IsBlank() {
				off = seg.end()
				break
			}
			if !h.IsRecord() || h.TotalSize < message.BlankSize || off+int64(h.TotalSize) > segLimit {
				if h.IsRecord() && off+int64(h.TotalSize) > limit && off+int64(h.TotalSize) <= seg.end() {
					return off, fmt.Errorf("%w: record at %d ends past limit %d", message.ErrCorrupt, off, limit)
				}
				return off, fmt.Errorf("%w: bad header at %d (size %d, magic %#x)", message.ErrCorrupt, off, h.TotalSize, h.Magic)
			}
			if err := fn(off, seg.m.Data[rel:rel+int64(h.TotalSize)]); err != nil {
				return off, err
			}
			off += int64(h.TotalSize)
		}
	}
	return off, nil
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	Start, End int64
	Path       string
}

// Segments lists the segment files, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Start: s.start, End: s.end(), Path: s.path}
	}
	return out
}

// DiskUsage is the last sampled used fraction of the disk holding the log.
func (l *Log) DiskUsage() float64 { return float64frombits(l.diskUsed.Load()) }

// Close stops the background work, writes and flushes everything appended,
// and unmaps and closes the segments. It is idempotent.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed.Store(true)
		l.mu.Unlock()
		l.cancel()
		l.wg.Wait()
		var errs []error
		if err := l.flush(); err != nil {
			errs = append(errs, err)
		}
		l.allocMu.Lock()
		if l.next != nil {
			if err := l.next.remove(); err != nil {
				errs = append(errs, err)
			}
			l.next = nil
		}
		l.allocMu.Unlock()
		l.flushMu.Lock()
		l.segmentsClosed = true
		l.segMu.Lock()
		for _, s := range l.segs {
			if err := s.close(); err != nil {
				errs = append(errs, err)
			}
		}
		l.segs = nil
		l.segMu.Unlock()
		l.flushMu.Unlock()
		l.flushedSig.Notify()
		l.readableSig.Notify()
		l.committedSig.Notify()
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}
