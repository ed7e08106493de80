package consumequeue

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"go.uber.org/zap"
)

// JournalPosition says how far the staging journal goes: its generation
// and the bytes of whole blocks after its header. A caller that records
// it with a checkpoint learns at the next Open (JournalState) whether
// every block it relied on is still there.
type JournalPosition struct {
	Gen uint64 // 0: there is no journal file
	End int64
}

// JournalState is what Open found in the staging journal and put back.
type JournalState struct {
	JournalPosition       // as found: Gen 0 when there was no readable journal
	Units           int64 // units put back into their queues (staged)
	// Lost reports a journaled unit that could not be put back: its queue
	// is gone, or it contradicts the queue's files. The caller must then
	// rebuild the queues from below every unit it had left staged.
	Lost bool
}

// Covers reports whether the journal found at Open holds everything a
// checkpoint that recorded at relied on. A journal whose generation
// differs from at's was reset after at was taken, which only happens once
// every queue has been flushed.
func (st JournalState) Covers(at JournalPosition) bool {
	if st.Lost {
		return false
	}
	if at.End == 0 {
		return true
	}
	return st.Gen != 0 && (st.Gen != at.Gen || st.End >= at.End)
}

// journal is the staging journal's file. The store's jmu guards it.
type journal struct {
	path string
	f    *os.File // nil until the first reset when no readable file was found
	gen  uint64   // the file's generation; the last one known when f is nil
	end  int64    // bytes of whole blocks after the header
	buf  []byte   // the encoding buffer, reused
}

// openJournal reads the journal under root and returns it with the
// payloads of its whole, valid blocks, in order. A missing or unreadable
// journal is not an error: the journal starts again at the next reset,
// and the state says Gen 0. Bytes after the last valid block (a write cut
// by a crash) are cut off.
func openJournal(root string, log *zap.Logger) (*journal, [][]byte, error) {
	j := &journal{path: filepath.Join(root, journalName)}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("consumequeue journal: %w", err)
	}
	gen, err := decodeJournalHeader(data)
	if err != nil {
		log.Warn("consumequeue: unreadable staging journal; starting a new one", zap.String("path", j.path), zap.Error(err))
		return j, nil, nil
	}
	var payloads [][]byte
	rest := data[journalHeaderSize:]
	for {
		p, n, ok := nextBlock(rest, gen)
		if !ok {
			break
		}
		payloads = append(payloads, p)
		rest = rest[n:]
		j.end += int64(n)
	}
	f, err := os.OpenFile(j.path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("consumequeue journal: %w", err)
	}
	j.f, j.gen = f, gen
	if len(rest) > 0 {
		log.Warn("consumequeue: staging journal cut after its last whole block",
			zap.Int64("blockBytes", j.end), zap.Int("cut", len(rest)))
		if err := j.f.Truncate(journalHeaderSize + j.end); err == nil {
			err = fsutil.Fdatasync(j.f)
		}
		if err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("consumequeue journal: cut its torn tail: %w", err)
		}
	}
	return j, payloads, nil
}

// position returns the journal's generation and end.
func (j *journal) position() JournalPosition {
	if j.f == nil {
		return JournalPosition{}
	}
	return JournalPosition{Gen: j.gen, End: j.end}
}

// append writes one encoded block after the last. It does not sync: the
// flush that follows ends in a syncfs of the file system that holds it.
func (j *journal) append(block []byte) error {
	if _, err := j.f.WriteAt(block, journalHeaderSize+j.end); err != nil {
		// Whatever part was written fails its checksum or is overwritten.
		return fmt.Errorf("consumequeue journal: append: %w", err)
	}
	j.end += int64(len(block))
	return nil
}

// reset empties the journal under a new generation, creating the file if
// there is none, and makes that durable. Only call it once every unit the
// journal holds is durable in its queue's files.
func (j *journal) reset() error {
	if j.f != nil && j.end == 0 {
		return nil
	}
	gen := j.gen + 1
	if j.f == nil {
		f, err := os.OpenFile(j.path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
		if err != nil {
			return fmt.Errorf("consumequeue journal: create: %w", err)
		}
		if _, err := f.WriteAt(encodeJournalHeader(gen), 0); err == nil {
			err = errors.Join(fsutil.Fdatasync(f), fsutil.SyncDir(filepath.Dir(j.path)))
		}
		if err != nil {
			_ = f.Close()
			_ = os.Remove(j.path) // no half-made journal
			return fmt.Errorf("consumequeue journal: create: %w", err)
		}
		j.f, j.gen, j.end = f, gen, 0
		return nil
	}
	// A crash before the sync leaves either header with either length:
	// the old blocks then fail the new generation's checksum, or hold
	// units that are in their files already.
	if _, err := j.f.WriteAt(encodeJournalHeader(gen), 0); err != nil {
		return fmt.Errorf("consumequeue journal: reset: %w", err)
	}
	if err := j.f.Truncate(journalHeaderSize); err != nil {
		return fmt.Errorf("consumequeue journal: reset: %w", err)
	}
	if err := fsutil.Fdatasync(j.f); err != nil {
		return fmt.Errorf("consumequeue journal: reset: %w", err)
	}
	j.gen, j.end = gen, 0
	if cap(j.buf) > 4<<20 {
		j.buf = nil // a burst is over
	}
	return nil
}

func (j *journal) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// replayJournal puts the journaled units back into their queues, staged,
// and records them as journaled. Units below a queue's MinOffset are
// ignored and those already in its files must match (Put's rules). A
// queue's entries that follow each other are joined into one run first,
// so that each run is checked against the files with one read: a journal
// of a minute at 10 000 topics holds a million entries of a unit or two.
func (s *Store) replayJournal(payloads [][]byte) {
	st := JournalState{JournalPosition: s.j.position()}
	type key struct {
		topic string
		id    int32
	}
	type run struct {
		q     *Queue
		from  int64
		units []byte
	}
	runs := make(map[key]*run)
	var scratch []Unit
	apply := func(r *run) error {
		if err := r.q.putBack(r.from, r.units, &scratch); err != nil {
			return err
		}
		n := int64(len(r.units) / UnitSize)
		st.Units += n
		r.q.mu.Lock()
		r.q.jgen, r.q.journaled = s.j.gen, max(r.q.journaled, r.from+n)
		r.q.mu.Unlock()
		return s.closeOver(r.q) // comparing with the files opened them
	}
	var err error
	for _, p := range payloads {
		err = decodeJournalEntries(p, func(e journalEntry) error {
			k := key{e.Topic, e.QueueID}
			r := runs[k]
			if r != nil && e.From == r.from+int64(len(r.units)/UnitSize) {
				r.units = append(r.units, e.Units...)
				return nil
			}
			if r != nil {
				// A gap: the units between are in the files. The run
				// before it goes first.
				if err := apply(r); err != nil {
					return err
				}
			} else {
				q, ok := s.Lookup(e.Topic, e.QueueID)
				if !ok {
					return fmt.Errorf("journal entry for %s/%d, which has no files: %w", e.Topic, e.QueueID, ErrCorrupt)
				}
				r = &run{q: q}
				runs[k] = r
			}
			r.from, r.units = e.From, append(r.units[:0], e.Units...)
			return nil
		})
		if err != nil {
			break
		}
	}
	if err == nil {
		for _, r := range runs {
			if err = apply(r); err != nil {
				break
			}
		}
	}
	if err != nil {
		// Later entries may depend on the one that failed: stop there.
		s.log.Error("consumequeue: staging journal could not be put back; the caller rebuilds the queues",
			zap.Error(err), zap.Int64("unitsPutBack", st.Units))
		st.Lost = true
	}
	s.jstate = st
}

// putBack puts encoded units back from queue offset from on, with Put's
// rules; the ones the queue holds already are compared in one read
// rather than one a unit. scratch is reused between calls.
func (q *Queue) putBack(from int64, units []byte, scratch *[]Unit) error {
	n := int64(len(units) / UnitSize)
	if held := min(n, q.MaxOffset()-from); held > 0 {
		start := max(from, q.MinOffset()) // units below MinOffset are ignored
		if start < from+held {
			got, err := q.Read(start, int(from+held-start), (*scratch)[:0])
			*scratch = got
			if err != nil {
				return err
			}
			if int64(len(got)) != from+held-start {
				return q.errf("put back %d: read %d of %d units: %w", start, len(got), from+held-start, ErrCorrupt)
			}
			for i, u := range got {
				off := start + int64(i)
				want := decodeUnit(units[(off-from)*UnitSize:])
				if u == want {
					continue
				}
				if err := q.dropTorn(off, u, want); err != nil {
					return err
				}
				held = off - from // the journaled units from off on are put
				break
			}
		}
		from, units, n = from+held, units[held*UnitSize:], n-held
	}
	for i := range n {
		if err := q.Put(from+i, decodeUnit(units[i*UnitSize:])); err != nil {
			return err
		}
	}
	return nil
}

// dropTorn removes the files' last unit, at off, when it is want cut
// short by a crash in the middle of its write, and otherwise reports the
// difference as ErrCorrupt. Journaled units are written to their files
// later, at a flush; a process killed during that pwrite leaves a prefix
// of it (the kernel stops a buffered write at a page boundary once a
// fatal signal is pending), so the unit that spans the boundary holds
// want's bytes up to it and the file's zeros after. Such a unit passes
// for data when its offset and size were written.
func (q *Queue) dropTorn(off int64, got, want Unit) error {
	q.mu.RLock()
	last := off == q.written-1 && off == q.maxOff.Load()-1 // the files' last, none staged
	q.mu.RUnlock()
	page := int64(os.Getpagesize())
	pos := (off - q.lay.fileStart(off)) * UnitSize // in its file
	if !last || got.Offset != want.Offset || !tornAt(got, want, page-pos%page) {
		return q.errf("put back %d: stored unit %+v differs from %+v: %w", off, got, want, ErrCorrupt)
	}
	q.logger().Warn("consumequeue: the files' last unit was cut short by a crash during its write; putting the journaled one in its place",
		zap.Int64("queueOffset", off), zap.Any("stored", got), zap.Any("journaled", want))
	if err := q.TruncateAfter(got.Offset); err != nil {
		return err
	}
	if m := q.MaxOffset(); m != off {
		return q.errf("put back %d: cutting the torn unit left max offset %d: %w", off, m, ErrCorrupt)
	}
	return nil
}

// tornAt reports whether got is want's first p bytes followed by zeros,
// with the cut inside the unit.
func tornAt(got, want Unit, p int64) bool {
	if p <= 0 || p >= UnitSize {
		return false
	}
	var g, w [UnitSize]byte
	EncodeUnit(g[:], got)
	EncodeUnit(w[:], want)
	return bytes.Equal(g[:p], w[:p]) && allZero(g[p:])
}

// Journal returns the staging journal's position now: a checkpoint
// records it after a flush (see JournalState.Covers).
func (s *Store) Journal() JournalPosition {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	return s.j.position()
}

// Replayed returns what Open found in the staging journal.
func (s *Store) Replayed() JournalState { return s.jstate }

// journalStaged is flushAllJournaled's look at one queue, under one
// shared lock: whether its staged units may stay staged at keepFrom (see
// deferrableLocked), and if so dst with the entry of those the journal of
// generation gen does not hold yet, and the queue offset they run to (0
// when the journal holds them all).
func (q *Queue) journalStaged(dst []byte, gen uint64, keepFrom int64) (out []byte, off int64, staged int, to int64, ok bool) {
	if q.unsynced.Load() != 0 {
		return dst, 0, 0, 0, false // a new file: write it out with the rest
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	off, ok = q.deferrableLocked(keepFrom)
	if !ok {
		return dst, 0, 0, 0, false
	}
	from := q.written
	if q.jgen == gen {
		from = max(from, q.journaled)
	}
	end := q.maxOff.Load()
	if end <= from {
		return dst, off, len(q.stage), 0, true
	}
	units := q.stage[(from-q.written)*UnitSize : (end-q.written)*UnitSize]
	return appendJournalEntry(dst, q.topic, q.id, from, units), off, len(q.stage), end, true
}

// setJournaled records that the journal of generation gen holds the
// queue's units up to queue offset to.
func (q *Queue) setJournaled(gen uint64, to int64) {
	q.mu.Lock()
	if q.jgen != gen {
		q.jgen, q.journaled = gen, 0
	}
	q.journaled = max(q.journaled, min(to, q.maxOff.Load()))
	q.mu.Unlock()
}

// flushAllJournaled is FlushBelow's path for many dirty queues with the
// journal: queues deferrable at keepFrom stay staged and their new units
// go to the journal in one block, written before the flush's syncfs makes
// it durable with the rest. jmu is held.
func (s *Store) flushAllJournaled(qs []*Queue, keepFrom int64) (int64, error) {
	kept := int64(math.MaxInt64)
	gen := s.j.gen
	type mark struct {
		q  *Queue
		to int64
	}
	var marks []mark
	flush := qs[:0:0]
	b := beginBlock(s.j.buf[:0])
	var staged int64
	for _, q := range qs {
		if !q.dirty() {
			if q.open.Load() > 0 || q.used.Load() {
				flush = append(flush, q) // for flushAll to close its descriptors when idle
			}
			continue
		}
		var (
			off, to int64
			n       int
			ok      bool
		)
		b, off, n, to, ok = q.journalStaged(b, gen, keepFrom)
		if !ok {
			flush = append(flush, q)
			continue
		}
		kept = min(kept, off)
		staged += int64(n)
		if to > 0 {
			marks = append(marks, mark{q, to})
		}
	}
	if limit := s.opts.maxStagedBytes(); limit >= 0 && staged > limit {
		// Too much would stay in memory (and in the journal): write it all.
		s.j.buf = b[:0]
		return math.MaxInt64, s.flushEverythingLocked()
	}
	if len(b) > blockHeaderSize {
		b = finishBlock(b, gen)
		if err := s.j.append(b); err != nil {
			// A full disk, say: the queue files need no new space.
			s.log.Warn("consumequeue: staging journal not written; flushing every queue instead", zap.Error(err))
			s.j.buf = nil
			return math.MaxInt64, s.flushEverythingLocked()
		}
	}
	s.j.buf = b[:0]
	if err := s.flushAll(flush); err != nil {
		return kept, err
	}
	for _, m := range marks {
		m.q.setJournaled(gen, m.to)
	}
	return kept, nil
}

// flushEverythingLocked flushes every queue and, once all of it is
// durable, empties the journal. jmu is held.
func (s *Store) flushEverythingLocked() error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return fmt.Errorf("consumequeue flush: %w", ErrClosed) // Close flushed and emptied it
	}
	qs := s.all()
	if err := s.flushQueues(qs, countDirty(qs)); err != nil {
		return err
	}
	s.jcut.Store(false)
	if err := s.j.reset(); err != nil {
		if s.j.f == nil {
			// The journal could not be made (a full disk, say): the
			// queues are durable all the same, and FlushBelow flushes
			// everything until it exists.
			s.log.Warn("consumequeue: staging journal not created", zap.Error(err))
			return nil
		}
		return fmt.Errorf("consumequeue flush: %w", err)
	}
	return nil
}
