package consumequeue

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"go.uber.org/zap"
)

// maxTopicLen bounds a topic name, which is used as a directory name.
const maxTopicLen = 255

// Store holds every ConsumeQueue under one root directory.
type Store struct {
	root string
	opts Options
	log  *zap.Logger
	fds  *openFiles

	mu     sync.RWMutex
	queues map[string]map[int32]*Queue
	// list is every queue of queues, for all(); nil once a queue was
	// added or removed, and made again by the next all().
	list   []*Queue
	closed bool

	// jmu serialises the flushes that write or reset the staging journal
	// (FlushBelow, Flush, TruncateAfter, DeleteTopic, Close).
	jmu    sync.Mutex
	j      *journal
	jstate JournalState // what Open put back
	// jcut: a queue was truncated, so the journal may hold units that are
	// gone; the next FlushBelow flushes everything and resets it.
	jcut atomic.Bool
}

// Open opens (creating root if needed) the ConsumeQueues under root and
// recovers every queue directory found there: stray entries are logged and
// skipped, short files re-extended, and each queue's MaxOffset is the first
// empty unit of its last file. A nil log discards logs.
func Open(root string, opts Options, log *zap.Logger) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("consumequeue open %s: %w", root, err)
	}
	fds, err := newOpenFiles(root, opts.maxOpenFiles())
	if err != nil {
		return nil, fmt.Errorf("consumequeue open: %w", err)
	}
	start := time.Now()
	s := &Store{root: root, opts: opts, log: log, queues: make(map[string]map[int32]*Queue), fds: fds}
	topics, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("consumequeue open %s: %w", root, err)
	}
	if err := s.loadTopics(topics); err != nil {
		_ = s.Close()
		return nil, err
	}
	j, payloads, err := openJournal(root, log)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.j = j
	loaded := time.Now()
	s.replayJournal(payloads)
	log.Info("consumequeue opened", zap.Int("queues", len(s.all())),
		zap.Duration("recovered", loaded.Sub(start)), zap.Duration("journal", time.Since(loaded)),
		zap.Int64("unitsFromJournal", s.jstate.Units))
	return s, nil
}

// loadWorkers topics are recovered at once: with a cold page cache each
// queue costs a few reads at the disk's latency, so a store of tens of
// thousands of queues opens in the disk's throughput, not its latency.
const loadWorkers = 16

// loadTopics recovers the topics' queues, loadWorkers at a time, and
// returns the first error (after every worker stopped).
func (s *Store) loadTopics(entries []os.DirEntry) error {
	work := make(chan os.DirEntry)
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	failed := func() bool { errMu.Lock(); defer errMu.Unlock(); return first != nil }
	for range min(loadWorkers, len(entries)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for te := range work {
				if failed() {
					continue
				}
				if err := s.loadTopic(te); err != nil {
					errMu.Lock()
					first = cmp.Or(first, err)
					errMu.Unlock()
				}
			}
		}()
	}
	for _, te := range entries {
		work <- te
	}
	close(work)
	wg.Wait()
	return first
}

// loadTopic recovers one topic's queues and adds them to the store.
func (s *Store) loadTopic(te os.DirEntry) error {
	topic := te.Name()
	tdir := filepath.Join(s.root, topic)
	if topic == journalName && !te.IsDir() {
		return nil
	}
	if !te.IsDir() || validTopic(topic) != nil {
		s.log.Warn("consumequeue: skipping stray entry", zap.String("path", tdir))
		return nil
	}
	ids, err := os.ReadDir(tdir)
	if err != nil {
		return fmt.Errorf("consumequeue open topic %s: %w", topic, err)
	}
	qs := make(map[int32]*Queue, len(ids))
	defer func() {
		if len(qs) > 0 {
			s.mu.Lock()
			s.queues[topic] = qs // recovered queues are closed with the store
			s.list = nil
			s.mu.Unlock()
		}
	}()
	for _, ie := range ids {
		id, err := strconv.ParseInt(ie.Name(), 10, 32)
		if err != nil || id < 0 || !ie.IsDir() || strconv.FormatInt(id, 10) != ie.Name() {
			s.log.Warn("consumequeue: skipping stray entry", zap.String("path", filepath.Join(tdir, ie.Name())))
			continue
		}
		q := newQueue(s.root, topic, int32(id), s.opts, s.fds, &s.jcut, s.log)
		if err := q.recover(); err != nil {
			return err
		}
		qs[int32(id)] = q
	}
	return nil
}

// validTopic checks that topic is usable as a single directory name.
func validTopic(topic string) error {
	switch {
	case topic == "", topic == ".", topic == "..", topic == journalName:
		return fmt.Errorf("topic %q is not a valid name: %w", topic, ErrInvalid)
	case len(topic) > maxTopicLen:
		return fmt.Errorf("topic name longer than %d bytes: %w", maxTopicLen, ErrInvalid)
	case strings.ContainsAny(topic, "/\\\x00"):
		return fmt.Errorf("topic %q contains a path separator or NUL: %w", topic, ErrInvalid)
	}
	return nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// Queue returns the queue of (topic, queueID), creating it in memory if it
// does not exist; its directory and first file are created by the first Put
// (or ahead of it by Queue.Create).
func (s *Store) Queue(topic string, queueID int32) (*Queue, error) {
	s.mu.RLock()
	q, closed := s.queues[topic][queueID], s.closed
	s.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("consumequeue %s/%d: %w", topic, queueID, ErrClosed)
	}
	if q != nil {
		return q, nil // its name was checked when it was made
	}
	if err := validTopic(topic); err != nil {
		return nil, fmt.Errorf("consumequeue: %w", err)
	}
	if queueID < 0 {
		return nil, fmt.Errorf("consumequeue %s/%d: negative queue id: %w", topic, queueID, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("consumequeue %s/%d: %w", topic, queueID, ErrClosed)
	}
	if q := s.queues[topic][queueID]; q != nil {
		return q, nil
	}
	q = newQueue(s.root, topic, queueID, s.opts, s.fds, &s.jcut, s.log)
	if s.queues[topic] == nil {
		s.queues[topic] = make(map[int32]*Queue)
	}
	s.queues[topic][queueID] = q
	s.list = nil
	return q, nil
}

// Lookup returns the queue of (topic, queueID) if it exists.
func (s *Store) Lookup(topic string, queueID int32) (*Queue, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q, ok := s.queues[topic][queueID]
	return q, ok
}

// Queues returns a snapshot of every queue, sorted by topic then queue id.
func (s *Store) Queues() []*Queue {
	qs := slices.Clone(s.all())
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].topic != qs[j].topic {
			return qs[i].topic < qs[j].topic
		}
		return qs[i].id < qs[j].id
	})
	return qs
}

// all returns a snapshot of every queue in no particular order: what the
// store's own passes over all queues use (a checkpoint makes one every
// second, and with tens of thousands of queues sorting them cost more than
// the pass). The slice is shared until a queue is added or removed:
// callers must not modify it.
func (s *Store) all() []*Queue {
	s.mu.RLock()
	qs := s.list
	s.mu.RUnlock()
	if qs != nil {
		return qs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.list != nil {
		return s.list
	}
	n := 0
	for _, m := range s.queues {
		n += len(m)
	}
	qs = make([]*Queue, 0, n)
	for _, m := range s.queues {
		for _, q := range m {
			qs = append(qs, q)
		}
	}
	s.list = qs
	return qs
}

// Topics returns the sorted names of the topics that have queues.
func (s *Store) Topics() []string {
	s.mu.RLock()
	ts := make([]string, 0, len(s.queues))
	for t := range s.queues {
		ts = append(ts, t)
	}
	s.mu.RUnlock()
	sort.Strings(ts)
	return ts
}

// MaxPhysicalOffset returns the largest Offset+Size of any queue's last
// unit: the CommitLog position the dispatcher has indexed up to. 0 if empty.
func (s *Store) MaxPhysicalOffset() int64 {
	var m int64
	for _, q := range s.all() {
		m = max(m, q.MaxPhysicalOffset())
	}
	return m
}

// TruncateAfter drops, in every queue, the units whose Offset >= phyOffset
// (see Queue.TruncateAfter). Used after the CommitLog is cut back.
// When the staging journal holds units, everything is then flushed and the
// journal emptied, so that no reopen puts back a unit that was cut.
func (s *Store) TruncateAfter(phyOffset int64) error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	var errs []error
	var queues, units int64
	for _, q := range s.all() {
		before := q.MaxOffset()
		if err := q.TruncateAfter(phyOffset); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
		if after := q.MaxOffset(); after < before {
			queues++
			units += before - after
		}
		errs = append(errs, s.closeOver(q))
	}
	if queues > 0 {
		// One line, not one a queue: a recovery may cut tens of thousands.
		s.log.Info("consumequeue truncated", zap.Int64("phyOffset", phyOffset),
			zap.Int64("queues", queues), zap.Int64("units", units))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if s.j.end > 0 {
		return s.flushEverythingLocked()
	}
	return nil
}

// closeOver closes q's descriptors when the store holds more than
// MaxOpenFiles: a pass over every queue that reads their files (a
// truncation's search, DeleteBefore's, the journal's replay) would
// otherwise hold one for each of tens of thousands of queues until the
// next flush.
func (s *Store) closeOver(q *Queue) error {
	if !s.fds.over() {
		return nil
	}
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Load() {
		return nil
	}
	return q.closeIdleLocked()
}

// DeleteBefore drops, in every queue, what lies below minPhyOffset (the
// CommitLog's new minimum): the whole files whose last unit ends at or below
// it, never a queue's last file, and MinOffset moves up to the first unit at
// or above it (see Queue.DeleteBefore). It returns how many files were
// removed.
func (s *Store) DeleteBefore(minPhyOffset int64) (removedFiles int, err error) {
	var errs []error
	for _, q := range s.all() {
		n, err := q.DeleteBefore(minPhyOffset)
		removedFiles += n
		if err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
		errs = append(errs, s.closeOver(q))
	}
	return removedFiles, errors.Join(errs...)
}

// DeleteTopic closes the topic's queues (later use of them fails with
// ErrClosed) and removes its directory. Deleting an unknown topic is not an
// error.
func (s *Store) DeleteTopic(topic string) error {
	if err := validTopic(topic); err != nil {
		return fmt.Errorf("consumequeue delete topic: %w", err)
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.j.end > 0 {
		// The journal may hold units of the topic: empty it first, so that
		// a reopen cannot put them into a topic of the same name made
		// later.
		if err := s.flushEverythingLocked(); err != nil {
			return fmt.Errorf("consumequeue delete topic %s: %w", topic, err)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("consumequeue delete topic %s: %w", topic, ErrClosed)
	}
	qs := s.queues[topic]
	delete(s.queues, topic)
	s.list = nil
	s.mu.Unlock()

	var errs []error
	for _, q := range qs {
		errs = append(errs, q.close(false))
	}
	dir := filepath.Join(s.root, topic)
	if _, err := os.Stat(dir); err == nil {
		errs = append(errs, os.RemoveAll(dir), fsutil.SyncDir(s.root))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue delete topic %s: %w", topic, err)
	}
	return nil
}

// FlushBelow is Flush for a periodic checkpoint of a store of many
// queues. When more than Options.SyncFSAbove queues have something to make
// durable, a queue whose unflushed units are all staged, fill less than a
// page and point at or above CommitLog offset keepFrom stays staged, so
// that a queue written now and then is written once for several units
// instead of once a flush (RocketMQ flushes a ConsumeQueue only when it has
// two pages to write, and all of them once a minute). The units so kept
// are appended to the staging journal, made durable by the same syncfs,
// and put back by the next Open. It returns the smallest CommitLog offset
// of a unit left staged (math.MaxInt64 if none): a caller that cannot
// count on the journal (JournalState.Covers) rebuilds from there.
func (s *Store) FlushBelow(keepFrom int64) (int64, error) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	qs := s.all()
	above := s.opts.syncFSAbove()
	n := countDirty(qs)
	if above < 0 || n <= above || s.j.f == nil || s.jcut.Load() {
		// Few queues to write, no journal file yet (it is only made
		// once everything is flushed), or a truncation: flush it all.
		return math.MaxInt64, s.flushEverythingLocked()
	}
	return s.flushAllJournaled(qs, keepFrom)
}

// deferrableLocked reports whether a flush may leave the queue's unflushed
// units staged (see FlushBelow), and the CommitLog offset of the first.
// mu is held, and no directory entry waits for a flush (unsynced is 0:
// a new file is written out with the rest).
func (q *Queue) deferrableLocked(keepFrom int64) (off int64, ok bool) {
	if q.closed.Load() || len(q.stage) == 0 || len(q.stage) >= deferBytes || q.flushed.Load() < q.written {
		return 0, false
	}
	off = decodeUnit(q.stage[:UnitSize]).Offset
	return off, off >= keepFrom
}

// deferBytes: a queue with this much staged is written at every flush.
const deferBytes = 4096

// Flush writes and syncs every queue's unflushed units, and closes the
// descriptors of the queues that were idle since the last flush (see
// Options.MaxOpenFiles). When more than Options.SyncFSAbove queues have
// something to make durable, it writes them all and makes them durable
// with one syncfs of the file system.
// It then empties the staging journal.
func (s *Store) Flush() error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	return s.flushEverythingLocked()
}

// countDirty returns how many of qs have something to make durable.
func countDirty(qs []*Queue) int {
	n := 0
	for _, q := range qs {
		if q.dirty() {
			n++
		}
	}
	return n
}

// flushQueues flushes qs, of which dirty have something to make durable:
// with one syncfs when they are many, else queue by queue.
func (s *Store) flushQueues(qs []*Queue, dirty int) error {
	if above := s.opts.syncFSAbove(); above >= 0 && dirty > above {
		return s.flushAll(qs)
	}
	var errs []error
	for _, q := range qs {
		if !q.dirty() && q.open.Load() == 0 && !q.used.Load() {
			continue
		}
		if err := q.Flush(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// flushAll writes every queue's stage, makes it all durable with one
// syncfs, then marks the queues flushed.
func (s *Store) flushAll(qs []*Queue) error {
	type written struct {
		q     *Queue
		to    int64
		epoch uint64
		dirs  uint32
	}
	var ws []written
	var errs []error
	for _, q := range qs {
		if !q.dirty() {
			if q.open.Load() > 0 || q.used.Load() {
				q.flushMu.Lock()
				if !q.closed.Load() {
					errs = append(errs, q.closeIdleLocked())
				}
				q.flushMu.Unlock()
			}
			continue
		}
		q.flushMu.Lock()
		if q.closed.Load() {
			q.flushMu.Unlock()
			continue
		}
		to, _, _, err := q.writeStagedLocked()
		if err != nil {
			errs = append(errs, q.errf("flush: %w", err))
		} else {
			ws = append(ws, written{q, to, q.epoch, q.unsynced.Swap(0)})
			// Nothing needs the descriptors until the next write or read.
			errs = append(errs, q.closeIdleLocked())
		}
		q.flushMu.Unlock()
	}
	if err := fsutil.SyncFS(s.root); err != nil {
		for _, w := range ws {
			w.q.unsynced.Or(w.dirs)
		}
		return fmt.Errorf("consumequeue flush: %w", errors.Join(append(errs, err)...))
	}
	for _, w := range ws {
		w.q.flushMu.Lock()
		if w.q.epoch == w.epoch { // not truncated meanwhile
			w.q.flushed.Store(max(w.q.flushed.Load(), w.to))
		}
		w.q.flushMu.Unlock()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue flush: %w", err)
	}
	return nil
}

// Files returns how many ConsumeQueue files the store's queues have.
func (s *Store) Files() int {
	n := 0
	for _, q := range s.all() {
		q.mu.RLock()
		n += len(q.segs)
		q.mu.RUnlock()
	}
	return n
}

// MaxOpenFiles returns the bound on the descriptors the store keeps open
// between flushes (Options.MaxOpenFiles).
func (s *Store) MaxOpenFiles() int64 { return s.fds.max }

// OpenFiles returns how many file descriptors the store holds.
func (s *Store) OpenFiles() int64 { return s.fds.n.Load() }

// Close flushes and unmaps every queue. It is idempotent; later calls on the
// store or its queues fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.jmu.Lock()
	defer s.jmu.Unlock()
	var errs []error
	for _, q := range s.Queues() {
		errs = append(errs, q.close(true))
	}
	if s.j != nil {
		if err := errors.Join(errs...); err == nil {
			errs = append(errs, s.j.reset()) // every unit is in its file now
		}
		errs = append(errs, s.j.close())
	}
	errs = append(errs, s.fds.close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue close: %w", err)
	}
	return nil
}
