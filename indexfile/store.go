package indexfile

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Store is a directory of index files, oldest first; only the newest one
// takes new entries. One goroutine (the dispatcher) calls Put,
// TruncateAfter and DeleteBefore; any number may call Query,
// MaxPhysicalOffset and Files concurrently; Flush and Close may be called
// from any goroutine.
type Store struct {
	root string
	opts Options
	log  *zap.Logger

	// flushMu serialises flushes with unmapping: Flush, the rollover flush,
	// and anything that closes or removes files hold it. Order: flushMu
	// before mu.
	flushMu sync.Mutex
	// mu guards files, closed and the contents of the files.
	mu     sync.RWMutex
	files  []*file
	closed bool
	// room is what Room returns, published under mu by what changes it.
	room atomic.Int64

	// noSync skips fsync and fdatasync; tests that do not test durability set
	// it right after Open to run at memory speed.
	noSync bool
}

// maxPending is how many bytes of entries the active file buffers before
// Put writes them itself (a flush normally comes long before).
const maxPending = 4 << 20

// Open loads the index files under root (creating root if needed) in name
// order. Every header is checked; a file with a broken header is reset to
// empty, and an empty file other than the newest is removed. The newest
// file, and any file shorter than its full size, is verified entry by entry
// and cut back to its longest valid prefix (see doc.go, "Recovery"). No file
// is created until the first Put. A nil log discards logs.
func Open(root string, opts Options, log *zap.Logger) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("open index store: %w", err)
	}
	names, ignored, err := listFiles(root)
	if err != nil {
		return nil, fmt.Errorf("open index store: %w", err)
	}
	if len(ignored) > 0 {
		log.Warn("ignoring entries that are not index files", zap.String("dir", root), zap.Strings("names", ignored))
	}
	s := &Store{root: root, opts: opts, log: log}
	for i, name := range names {
		newest := i == len(names)-1
		f, err := loadFile(root, name, opts, newest, log)
		if err != nil {
			_ = s.closeFiles()
			return nil, fmt.Errorf("open index store %s: %w", root, err)
		}
		if f.empty() && !newest {
			log.Warn("removing empty index file that is not the newest", zap.String("file", f.path))
			if err := f.remove(); err != nil {
				_ = s.closeFiles()
				return nil, fmt.Errorf("open index store %s: %w", root, err)
			}
			continue
		}
		s.files = append(s.files, f)
	}
	s.publishRoom()
	log.Info("index store opened", zap.String("dir", root), zap.Int("files", len(s.files)),
		zap.Int64("maxPhyOffset", s.MaxPhysicalOffset()))
	return s, nil
}

// Dir returns the directory the store lives in.
func (s *Store) Dir() string { return s.root }

// Options returns the options the store was opened with.
func (s *Store) Options() Options { return s.opts }

// Put indexes key (the full key, see BuildKey) for the message at phyOffset
// stored at storeTimestamp (ms). Entries must come in non-decreasing
// phyOffset order (several keys of one message share its offset); a smaller
// offset than MaxPhysicalOffset fails with ErrOutOfOrder. When the newest
// file is full, it is flushed and a new file is created for the entry.
func (s *Store) Put(key string, phyOffset int64, storeTimestamp int64) error {
	if err := s.PutHash(KeyHash(key), phyOffset, storeTimestamp); err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	return nil
}

// PutHash is Put of a key known by its hash (KeyHash, TopicKeyHash).
func (s *Store) PutHash(hash int32, phyOffset int64, storeTimestamp int64) error {
	if phyOffset < 0 {
		return fmt.Errorf("index put: negative physical offset %d", phyOffset)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publishRoom()
	for {
		if s.closed {
			return fmt.Errorf("index put: %w", ErrClosed)
		}
		if f := s.newestWithEntries(); f != nil && phyOffset < f.hdr.EndPhyOffset {
			return fmt.Errorf("index put at %d, below max %d: %w", phyOffset, f.hdr.EndPhyOffset, ErrOutOfOrder)
		}
		f := s.newest()
		if f != nil && !f.full() {
			if err := f.put(hash, phyOffset, storeTimestamp); err != nil {
				return err
			}
			if len(f.pending) >= maxPending && f.flushing == nil {
				// Nobody flushed for a long while: write the entries
				// now rather than let the buffer grow.
				return f.writePending()
			}
			return nil
		}
		if f != nil {
			// Make the full file durable before a newer one exists, so
			// recovery only ever has to verify the newest file. Readers
			// are not blocked meanwhile.
			s.mu.Unlock()
			err := s.syncFile(f, true)
			s.mu.Lock()
			if err != nil {
				return fmt.Errorf("index put: roll over: %w", err)
			}
			if s.closed || s.newest() != f {
				continue // changed while unlocked; look again
			}
			f.deactivate()
		}
		nf, err := s.createFile()
		if err != nil {
			return fmt.Errorf("index put: roll over: %w", err)
		}
		s.files = append(s.files, nf)
		s.log.Info("index file created", zap.String("file", nf.path), zap.Int("files", len(s.files)))
	}
}

// syncFile flushes one file under flushMu. mu must not be held.
func (s *Store) syncFile(f *file, slots bool) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flushFile(f, slots)
}

// flushFile writes into f what only memory holds (entries, the header and,
// with slots, the active file's slot table) and makes the file durable
// unless syncing is off. flushMu must be held and mu must not: readers and
// Put only wait while buffers are handed over.
func (s *Store) flushFile(f *file, slots bool) error {
	s.mu.Lock()
	if f.closed || (!f.dirty.Swap(false) && !slots) {
		s.mu.Unlock()
		return nil
	}
	entries, first, h := f.beginFlush()
	s.mu.Unlock()
	err := f.writeOut(entries, first, h)
	if err == nil && slots && f.slots != nil {
		err = f.writeSlots() // the file is full: nothing changes them
	}
	s.mu.Lock()
	f.endFlush(err == nil)
	s.mu.Unlock()
	return s.finishFlush(f, err)
}

// flushLocked is flushFile for Close, which holds mu: nothing runs
// concurrently.
func (s *Store) flushLocked(f *file) error {
	if f.closed || (!f.dirty.Swap(false) && f.slots == nil) {
		return nil
	}
	entries, first, h := f.beginFlush()
	err := f.writeOut(entries, first, h)
	if err == nil && f.slots != nil {
		err = f.writeSlots()
	}
	f.endFlush(err == nil)
	return s.finishFlush(f, err)
}

// finishFlush syncs f after its writes succeeded, and marks it dirty again
// when anything failed.
func (s *Store) finishFlush(f *file, err error) error {
	if err == nil && !s.noSync {
		err = f.syncData()
	}
	if err != nil {
		f.dirty.Store(true)
	}
	return err
}

// createFile creates the next file. mu must be held for writing.
func (s *Store) createFile() (*file, error) {
	last := ""
	if f := s.newest(); f != nil {
		last = f.name
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var name string
		name, err = nextFileName(time.Now(), last)
		if err != nil {
			return nil, err
		}
		var f *file
		f, err = createFile(s.root, name, s.opts, !s.noSync)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		last = name // someone else holds the name: take the next one
	}
	return nil, err
}

func (s *Store) newest() *file {
	if len(s.files) == 0 {
		return nil
	}
	return s.files[len(s.files)-1]
}

func (s *Store) newestWithEntries() *file {
	for i := len(s.files) - 1; i >= 0; i-- {
		if !s.files[i].empty() {
			return s.files[i]
		}
	}
	return nil
}

// Query returns the physical offsets of entries whose key hash equals
// KeyHash(key) and whose time lies in [begin, end] (ms), newest first, at
// most max of them (nil when none). An entry's time is its file's
// BeginTimestamp plus its whole-second TimeDiff, so it may be up to 999 ms
// earlier than the message's store time. Files are scanned newest to
// oldest, skipping those whose [BeginTimestamp, EndTimestamp] misses the
// range.
//
// Different keys can share a hash: the caller must read each record and
// compare its keys before returning it.
func (s *Store) Query(key string, begin, end int64, max int) ([]int64, error) {
	hash := KeyHash(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("index query: %w", ErrClosed)
	}
	if max <= 0 || begin > end {
		return nil, nil
	}
	var out []int64
	for i := len(s.files) - 1; i >= 0 && len(out) < max; i-- {
		f := s.files[i]
		if f.empty() {
			continue
		}
		if f.overlaps(begin, end) {
			out = f.query(hash, begin, end, max, out)
		}
		if f.hdr.BeginTimestamp < begin {
			break // older files end before this one begins
		}
	}
	return out, nil
}

// MaxPhysicalOffset returns EndPhyOffset of the newest file with entries:
// the offset of the last indexed message, 0 when there is none.
func (s *Store) MaxPhysicalOffset() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if f := s.newestWithEntries(); f != nil {
		return f.hdr.EndPhyOffset
	}
	return 0
}

// Room returns how many entries can still be put before a new file must
// be created: the positions left in the newest file, 0 when there is none.
// It takes no lock.
func (s *Store) Room() int64 { return s.room.Load() }

// publishRoom updates what Room returns. mu is held for writing.
func (s *Store) publishRoom() {
	var n int64
	if f := s.newest(); f != nil && !s.closed {
		n = int64(s.opts.MaxEntries) - int64(max(f.hdr.IndexCount, 1))
	}
	s.room.Store(n)
}

// Files returns the number of index files.
func (s *Store) Files() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}

// TruncateAfter removes every entry whose PhyOffset >= phyOffset, newest
// first: each removed entry's slot goes back to the entry's PrevIndex, the
// entry is zeroed and indexCount drops; the header end fields then describe
// the last remaining entry (EndTimestamp rounded down to its whole second).
// Files left without entries are deleted; a file that was already empty is
// kept. Afterwards no Query returns an offset >= phyOffset and Put continues
// from MaxPhysicalOffset.
func (s *Store) TruncateAfter(phyOffset int64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publishRoom()
	if s.closed {
		return fmt.Errorf("index truncate: %w", ErrClosed)
	}
	var errs []error
	removedEntries, removedFiles := 0, 0
	for i := len(s.files) - 1; i >= 0; i-- {
		f := s.files[i]
		if f.empty() {
			continue
		}
		if f.hdr.EndPhyOffset < phyOffset {
			break
		}
		if f.slots == nil {
			f.activate(nil) // an older file becomes the newest again
		}
		n, err := f.truncateFrom(phyOffset)
		removedEntries += n
		if err != nil {
			errs = append(errs, err)
			break
		}
		if !f.empty() {
			break // it kept entries below phyOffset; older files hold only smaller offsets
		}
		if err := f.remove(); err != nil {
			errs = append(errs, err)
		}
		s.files = append(s.files[:i], s.files[i+1:]...)
		removedFiles++
	}
	if f := s.newest(); f != nil && f.slots == nil {
		f.activate(nil)
	}
	if removedEntries > 0 {
		s.log.Info("index truncated", zap.Int64("from", phyOffset), zap.Int("entries", removedEntries),
			zap.Int("filesRemoved", removedFiles))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("index truncate from %d: %w", phyOffset, err)
	}
	return nil
}

// DeleteBefore removes whole files, oldest first, whose EndPhyOffset is
// below minPhyOffset (their messages are gone from the CommitLog). The
// newest file is never removed. It returns how many files it removed.
func (s *Store) DeleteBefore(minPhyOffset int64) (int, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("index delete: %w", ErrClosed)
	}
	n := 0
	for len(s.files) > 1 {
		f := s.files[0]
		if f.hdr.EndPhyOffset >= minPhyOffset {
			break
		}
		s.files = s.files[1:]
		n++
		if err := f.remove(); err != nil {
			return n, fmt.Errorf("index delete before %d: %w", minPhyOffset, err)
		}
		s.log.Info("index file deleted", zap.String("file", f.path), zap.Int64("endPhyOffset", f.hdr.EndPhyOffset))
	}
	return n, nil
}

// Flush writes every file's buffered changes and makes them durable. It
// blocks Put and Query only while it hands buffers over, not during I/O.
func (s *Store) Flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("index flush: %w", ErrClosed)
	}
	files := append([]*file(nil), s.files...)
	s.mu.RUnlock()
	var errs []error
	for _, f := range files {
		if err := s.flushFile(f, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close flushes and unmaps every file. It is idempotent; later calls other
// than Close fail with ErrClosed.
func (s *Store) Close() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.room.Store(0)
	var errs []error
	for _, f := range s.files {
		if err := s.flushLocked(f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.closeFiles(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closeFiles unmaps and closes every file without flushing.
func (s *Store) closeFiles() error {
	var errs []error
	for _, f := range s.files {
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.files = nil
	return errors.Join(errs...)
}
