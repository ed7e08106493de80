package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// Room for dispatch (doc.go, "Full disk"). The planner walks the log ahead
// of the dispatcher and makes sure that the files the dispatcher will need
// for every record up to s.planned exist or can be taken from the reserve:
//
//   - a ConsumeQueue file: each planned record that will start a file
//     (its queue has no file at its offset yet) holds one spare
//     ConsumeQueue file until the dispatcher has passed it;
//   - index entries: the entries of the planned records not yet dispatched
//     fit in the newest IndexFile plus the spare IndexFiles.
//
// When that is not so it adds spares, and when the disk has no room for
// one it stops: Put acknowledges a message only once it is planned, and
// the dispatcher never passes s.planned, so an acknowledged message always
// has room and nothing the dispatcher consumes is left unaccounted.

// queueFile names a ConsumeQueue file a planned record will create.
type queueFile struct {
	topic string
	queue int32
	start int64 // queue offset of its first unit
}

// plannedFile is a planned record that creates a ConsumeQueue file.
type plannedFile struct {
	off  int64 // the record's CommitLog offset
	file queueFile
}

// planTo plans the records from s.planned up to limit (at most Readable).
// It returns an error wrapping commitlog.ErrDiskFull when it had to stop
// for lack of room.
func (s *Store) planTo(limit int64) error {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	defer s.plannedSig.Notify()
	for {
		from := s.planned.Load()
		if from >= limit {
			return nil
		}
		line := s.indexLine()
		next, err := s.clog.Scan(from, limit, func(off int64, rec []byte) error {
			// A record that does not decode needs nothing: the
			// dispatcher stops at it anyway.
			if d, err := message.DecodeDispatch(rec); err == nil {
				if err := s.planRecord(off, &d, &line); err != nil {
					var short *needSpare
					if errors.As(err, &short) {
						short.size, short.d = len(rec), d
					}
					return err
				}
				s.decoded.put(off, &d)
			}
			s.planned.Store(off + int64(len(rec)))
			return nil
		})
		if next > s.planned.Load() {
			s.planned.Store(next) // an end-of-segment blank
		}
		var short *needSpare
		if !errors.As(err, &short) {
			return err
		}
		// Add the spare outside the scan, which holds the log's segment
		// list, then go on from the record that was short of it.
		aerr := s.res.add(short.kind, spareBatch(short.kind))
		if aerr == nil {
			continue
		}
		// No room for one more. The dispatcher may be in the middle of a
		// record that has taken a spare but not yet released what was
		// held for it: look again between two records before giving up.
		s.dispatchMu.Lock()
		line = s.indexLine()
		err = s.planRecord(short.off, &short.d, &line)
		s.dispatchMu.Unlock()
		if errors.As(err, &short) {
			return noRoom(short.off, short.kind, aerr)
		} else if err != nil {
			return err
		}
		s.decoded.put(short.off, &short.d)
		s.planned.Store(short.off + int64(short.size))
	}
}

// needSpare stops a planning scan at a record that needs one more spare.
type needSpare struct {
	off  int64
	kind spareKind
	size int              // of the record
	d    message.Dispatch // the record, decoded
}

func (e *needSpare) Error() string {
	return fmt.Sprintf("record at %d needs a spare %s file", e.off, e.kind)
}

// planRecord finds room for one record's ConsumeQueue unit and index
// entries, or says which spare it lacks. line is the index capacity line
// (indexLine), refreshed when the record does not fit under it.
func (s *Store) planRecord(off int64, d *message.Dispatch, line *int64) error {
	n := s.indexEntries(d)
	if n > 0 && s.plannedEntries+n > *line {
		if *line = s.indexLine(); s.plannedEntries+n > *line {
			return &needSpare{off: off, kind: spareIndex}
		}
	}
	if message.Dispatchable(d.SysFlag) {
		if err := s.planQueueFile(off, d); err != nil {
			return err
		}
	}
	s.plannedEntries += n
	return nil
}

// indexLine is how many index entries the records planned since Open may
// take in all: those already dispatched, plus the positions left in the
// newest IndexFile, plus those of the spare IndexFiles. The dispatched
// count is read first, so a concurrent dispatch can only make the line
// lower than the truth, never higher.
func (s *Store) indexLine() int64 {
	if s.index == nil {
		return math.MaxInt64
	}
	settled := s.settledEntries.Load()
	room := s.index.Room()
	perFile := int64(s.opts.Index.MaxEntries - 1)
	return settled + room + s.res.ready(spareIndex)*perFile
}

// planQueueFile holds a spare ConsumeQueue file for a record that will
// start a new file.
func (s *Store) planQueueFile(off int64, d *message.Dispatch) error {
	k := touched{d.Topic, d.QueueID}
	q := s.planQueues[k]
	if q == nil || q.NeedsFile(d.QueueOffset) {
		// Not seen yet, or maybe deleted and made anew since.
		var err error
		if q, err = s.cqs.Queue(d.Topic, d.QueueID); err != nil {
			return nil // the dispatcher skips an invalid queue
		}
		s.planQueues[k] = q
	}
	if !q.NeedsFile(d.QueueOffset) {
		return nil
	}
	start, size := q.FileFor(d.QueueOffset)
	f := queueFile{d.Topic, d.QueueID, start}
	big := size > s.opts.ConsumeQueue.FirstFileSize()
	s.newMu.Lock()
	_, dup := s.newFiles[f]
	heldBig, heldSmall := s.heldBig, int64(len(s.newFiles))-s.heldBig
	s.newMu.Unlock()
	if dup {
		return nil
	}
	if big {
		heldBig++
	} else {
		heldSmall++
	}
	if kind, short := s.res.queueSpares(heldBig, heldSmall); short {
		return &needSpare{off: off, kind: kind}
	}
	// A new queue also needs its directory.
	if err := q.Prepare(); err != nil {
		if fsutil.IsNoSpace(err) {
			err = fmt.Errorf("%w: %w", commitlog.ErrDiskFull, err)
		}
		return fmt.Errorf("store: record at %d: %w", off, err)
	}
	s.newMu.Lock()
	s.newFiles[f] = big
	if big {
		s.heldBig++
	}
	s.newOrder = append(s.newOrder, plannedFile{off, f})
	if len(s.newOrder) == 1 {
		s.nextNewFile.Store(off)
	}
	s.newMu.Unlock()
	return nil
}

// CreateQueues makes the directories and first ConsumeQueue files of
// queues 0..n-1 of topic that have neither a file nor a message yet
// (consumequeue.Queue.Create), so that the first sends to a new topic do
// not make them: the dispatch planner would otherwise make each new
// queue's directory while every sender waits for the plan, and the
// dispatcher its file. It returns how many files it made. It stops at the
// first error; what it made stays (the first sends make the rest), and an
// error of a full disk wraps commitlog.ErrDiskFull.
func (s *Store) CreateQueues(topic string, n int32) (int, error) {
	made := 0
	for id := range n {
		if s.clog.QueueOffset(topic, id) != 0 {
			continue // written to already: its file is made or coming
		}
		q, err := s.cqs.Queue(topic, id)
		if err != nil {
			return made, fmt.Errorf("store: create queues of %s: %w", topic, err)
		}
		ok, err := q.Create()
		if err != nil {
			if fsutil.IsNoSpace(err) {
				err = fmt.Errorf("%w: %w", commitlog.ErrDiskFull, err)
			}
			return made, fmt.Errorf("store: create queues of %s: %w", topic, err)
		}
		if ok {
			made++
		}
	}
	return made, nil
}

// spareBatch is how many spares of kind the planner adds at a time when
// it runs short: first files come in bursts (a thousand new topics written
// at once), and a batch shares one directory sync.
func spareBatch(kind spareKind) int {
	if kind == spareQueueSmall {
		return 32
	}
	return 1
}

// settle releases what the planner held for the record at off once the
// dispatcher has passed it. Only the dispatcher calls it.
func (s *Store) settle(off int64, d *message.Dispatch) {
	if off >= s.nextNewFile.Load() {
		s.newMu.Lock()
		k := 0
		for k < len(s.newOrder) && s.newOrder[k].off <= off {
			if s.newFiles[s.newOrder[k].file] {
				s.heldBig--
			}
			delete(s.newFiles, s.newOrder[k].file)
			k++
		}
		s.newOrder = s.newOrder[:copy(s.newOrder, s.newOrder[k:])]
		if len(s.newOrder) > 0 {
			s.nextNewFile.Store(s.newOrder[0].off)
		} else {
			s.nextNewFile.Store(math.MaxInt64)
		}
		s.newMu.Unlock()
	}
	if n := s.indexEntries(d); n > 0 {
		s.settledEntries.Add(n)
	}
}

// indexEntries is how many index entries the dispatcher writes for d.
func (s *Store) indexEntries(d *message.Dispatch) int64 {
	if s.index == nil || message.TransactionType(d.SysFlag) == message.SysFlagTransRollback {
		return 0
	}
	var n int64
	if d.UniqueKey != "" {
		n++
	}
	for v := d.Keys; v != ""; {
		var k string
		k, v, _ = strings.Cut(v, message.KeySeparator)
		if k != "" {
			n++
		}
	}
	return n
}

func noRoom(off int64, kind spareKind, err error) error {
	if fsutil.IsNoSpace(err) {
		return fmt.Errorf("%w: no room for a new %s file that the record at %d may need: %w", commitlog.ErrDiskFull, kind, off, err)
	}
	return fmt.Errorf("store: no room for a new %s file that the record at %d may need: %w", kind, off, err)
}

// roomFor makes sure that the records of a PutBatch, rs (appended from
// msgs), and every record before them are planned before Put acknowledges
// them.
func (s *Store) roomFor(own ownFunc, rs []commitlog.Result) error {
	end := rs[len(rs)-1].End()
	if s.planned.Load() >= end {
		return nil
	}
	err := s.planOwn(own, rs)
	if err == nil && s.planned.Load() < end {
		err = s.planTo(max(end, s.clog.Readable()))
	}
	if s.planned.Load() >= end {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("store: room planned up to %d only", s.planned.Load())
	}
	s.setFull(err)
	return fmt.Errorf("store: the message is in the CommitLog but not acknowledged: %w", err)
}

// ownFunc fills in what a put knows of its i-th record: at least the
// topic, queue, system flag, keys and unique key, which planning needs. It
// reports whether it also set the system flag as encoded
// (Ext.RecordSysFlag) and every field DecodeDispatch takes from the
// record's properties (Dispatch.SetProperties); then, with the offsets,
// size and store time of the append, the dispatcher is handed the record's
// Dispatch and does not decode it.
//
// It returns the Dispatch by value: a pointer handed to a func value would
// move the Dispatch of every record to the heap.
type ownFunc func(i int) (d message.Dispatch, complete bool)

// planOwn plans the records before rs, then rs themselves from what Put
// knows of them (own), without decoding them, as far as they follow each
// other and fit; planTo does the rest.
func (s *Store) planOwn(own ownFunc, rs []commitlog.Result) error {
	if s.planned.Load() < rs[0].PhysicalOffset {
		if err := s.planTo(rs[0].PhysicalOffset); err != nil {
			return err
		}
	}
	s.planMu.Lock()
	defer s.planMu.Unlock()
	// No plannedSig here: the put dispatches what it planned itself
	// (dispatchInline), or putDone wakes the dispatcher.
	line := s.indexLine()
	for i, r := range rs {
		if s.planned.Load() != r.PhysicalOffset {
			return nil // planned already, or a blank ends a segment before r
		}
		d, complete := own(i)
		d.QueueOffset = r.QueueOffset
		d.PhysicalOffset, d.Size, d.StoreTimestamp = r.PhysicalOffset, r.Size, r.StoreTimestamp
		if s.planRecord(r.PhysicalOffset, &d, &line) != nil {
			return nil // short of a spare: planTo adds it
		}
		if complete {
			s.decoded.put(r.PhysicalOffset, &d)
		}
		s.planned.Store(r.End())
	}
	return nil
}

// takeSpare is the ConsumeQueues' and the index's Spare hook: a new file
// could not be allocated, so the disk is full. Puts are refused from now
// on, until the keeper has replaced the spare.
func (s *Store) takeSpare(kind spareKind, path string, size int64) (*os.File, error) {
	var f *os.File
	var err error
	if kind == spareIndex {
		f, err = s.res.take(kind, path, size)
	} else {
		f, kind, err = s.res.takeQueue(path, size)
	}
	s.setFull(fmt.Errorf("%w: a new %s file had to be taken from the reserve", commitlog.ErrDiskFull, kind))
	return f, err
}

// refusal is the error Put returns without trying while the store cannot
// promise room for what it would acknowledge, nil otherwise.
func (s *Store) refusal() error {
	if s.recovering.Load() {
		return fmt.Errorf("%w: store: recovery has not rebuilt the queues up to the end of the log yet", commitlog.ErrDiskFull)
	}
	if p := s.full.Load(); p != nil {
		return fmt.Errorf("store: refusing puts: %w", *p)
	}
	return nil
}

// setFull makes Put refuse messages until the keeper finds room again.
func (s *Store) setFull(err error) {
	if s.full.Swap(&err) == nil {
		s.log.Error("disk full: no room reserved for the queue and index files; refusing puts until there is",
			zap.Int64("plannedTo", s.planned.Load()), zap.Int64("dispatched", s.dispatched.Load()), zap.Error(err))
	}
}

// keepRoom is the keeper goroutine: it refills the reserve when a spare was
// taken and, while puts are refused, retries every DiskCheckInterval (at
// most a second apart) until the reserve is whole and everything readable
// is planned again.
func (s *Store) keepRoom() {
	defer s.wg.Done()
	t := time.NewTicker(min(s.opts.CommitLog.DiskCheckInterval, time.Second))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.res.taken:
		}
		if s.full.Load() == nil && s.res.full() {
			s.trimReserve()
			continue
		}
		s.checkRoom()
	}
}

// trimReserve gives back the spare ConsumeQueue files that planning added
// for a burst of new queue files (planQueueFile holds one spare for each
// new file planned but not yet dispatched) once those files exist: the
// reserve keeps its target, or what the files still planned hold, whichever
// is more. Without it a burst of new queues — a thousand topics created
// and written at once — would leave a spare behind for each.
func (s *Store) trimReserve() {
	if s.res.ready(spareQueue) <= int64(s.res.target[spareQueue]) &&
		s.res.ready(spareQueueSmall) <= int64(s.res.target[spareQueueSmall]) {
		return
	}
	s.planMu.Lock() // no planning counts on a spare meanwhile
	defer s.planMu.Unlock()
	s.newMu.Lock()
	big, all := int(s.heldBig), len(s.newFiles)
	s.newMu.Unlock()
	keepFull := max(big, s.res.target[spareQueue])
	n := s.res.trim(spareQueue, keepFull)
	if s.res.size[spareQueueSmall] > 0 {
		// First files come in streams (new topics being written): keep
		// twice what is held, so that the stream does not add back on its
		// send path what was just removed.
		n += s.res.trim(spareQueueSmall, 2*(all-keepFull))
	}
	if n > 0 {
		s.log.Debug("reserve: surplus spare queue files removed", zap.Int("removed", n),
			zap.Int64("leftFull", s.res.ready(spareQueue)), zap.Int64("leftFirst", s.res.ready(spareQueueSmall)))
	}
}

// checkRoom refills the reserve and lifts the refusal once there is room.
func (s *Store) checkRoom() {
	if err := s.res.fill(); err != nil {
		if fsutil.IsNoSpace(err) {
			err = fmt.Errorf("%w: the reserve of spare queue and index files cannot be kept: %w", commitlog.ErrDiskFull, err)
		}
		s.setFull(err)
		return
	}
	if s.full.Load() == nil {
		return
	}
	if err := s.planTo(s.clog.Readable()); err != nil {
		return
	}
	if p := s.full.Swap(nil); p != nil {
		s.log.Info("room on the disk again; accepting puts", zap.Int64("plannedTo", s.planned.Load()))
	}
	s.roomSig.Notify()
}

// decodedRing hands the records the planner decoded, or a put described
// (planOwn), to the dispatcher, so that each record is decoded at most
// once. The planner (under planMu) puts, the dispatcher takes, both in log
// order; a record that did not fit is decoded again by the dispatcher.
type decodedRing struct {
	buf  [decodedRingSize]decodedRecord
	head atomic.Uint64 // next to take; the dispatcher's
	tail atomic.Uint64 // next to put; the planner's
}

const decodedRingSize = 1024

type decodedRecord struct {
	off int64
	d   message.Dispatch
}

func (r *decodedRing) put(off int64, d *message.Dispatch) {
	t := r.tail.Load()
	if t-r.head.Load() == decodedRingSize {
		return // the dispatcher is far behind: it decodes for itself
	}
	r.buf[t%decodedRingSize] = decodedRecord{off, *d}
	r.tail.Store(t + 1)
}

// take returns the record at off if the planner left it, dropping any
// older ones.
func (r *decodedRing) take(off int64, d *message.Dispatch) bool {
	h, t := r.head.Load(), r.tail.Load()
	for h < t && r.buf[h%decodedRingSize].off < off {
		h++
	}
	found := h < t && r.buf[h%decodedRingSize].off == off
	if found {
		*d = r.buf[h%decodedRingSize].d
		h++
	}
	r.head.Store(h)
	return found
}
