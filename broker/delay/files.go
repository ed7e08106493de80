package delay

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// bfile is one bucket index file. Every field is guarded by Engine.mu.
type bfile struct {
	key bucketKey
	// n is the number of whole entries in the file.
	n int64
	// f is open while the file is in the LRU; dirty says it was written
	// since it was last synced; pins keep it open while it is being synced.
	f     *os.File
	dirty bool
	pins  int
	elem  *list.Element
	// splitting: the bucket (level ≥ 1) is being split; nothing is
	// appended to it any more. removing: its files are being deleted.
	splitting bool
	removing  bool
	// lb is the loaded level-0 bucket, nil while not loaded.
	lb *lbucket
}

// fileSet is the bucket directory: every bucket file, an LRU of open
// descriptors, and the level-0 files not loaded yet. Guarded by Engine.mu.
type fileSet struct {
	dir     string
	m       map[bucketKey]*bfile
	l0      map[int64]*bfile // level-0 files not loaded
	lru     list.List
	maxOpen int
	bytes   int64
	created bool // a file was created since the directory was last synced
	seq     int64
}

func newFileSet(dir string, maxOpen int) *fileSet {
	return &fileSet{dir: dir, m: make(map[bucketKey]*bfile), l0: make(map[int64]*bfile), maxOpen: maxOpen}
}

func (fs *fileSet) path(k bucketKey, suffix string) string {
	return filepath.Join(fs.dir, k.name()+suffix)
}

// tombstone is a split bucket file waiting to be deleted.
type tombstone struct {
	path  string
	level int
}

// scan finds the bucket files of the directory and returns the tombstones
// of splits that may not be durable; fired logs without an index file are
// removed.
func (fs *fileSet) scan() ([]tombstone, error) {
	des, err := os.ReadDir(fs.dir)
	if err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	var tombs []tombstone
	fired := make(map[bucketKey]string)
	for _, de := range des {
		if base, ok := strings.CutSuffix(de.Name(), splitSuffix); ok && de.Type().IsRegular() {
			if i := strings.LastIndexByte(base, '.'); i > 0 {
				if n, err := strconv.ParseInt(base[i+1:], 10, 64); err == nil {
					fs.seq = max(fs.seq, n)
				}
				if k, _, ok := parseBucketName(base[:i] + idxSuffix); ok {
					tombs = append(tombs, tombstone{filepath.Join(fs.dir, de.Name()), k.level})
				}
			}
			continue
		}
		k, suffix, ok := parseBucketName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		if suffix == firedSuffix {
			fired[k] = de.Name()
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("delay: %w", err)
		}
		bf := &bfile{key: k, n: info.Size() / EntrySize}
		fs.m[k] = bf
		fs.bytes += bf.n * EntrySize
		if k.level == 0 {
			fs.l0[k.start] = bf
		}
	}
	for k, name := range fired {
		if _, ok := fs.m[k]; !ok {
			if err := os.Remove(filepath.Join(fs.dir, name)); err != nil {
				return nil, fmt.Errorf("delay: %w", err)
			}
		}
	}
	return tombs, nil
}

// get returns the file of a bucket, creating its entry (not the file) when
// create is set.
func (fs *fileSet) get(k bucketKey, create bool) *bfile {
	bf := fs.m[k]
	if bf == nil && create {
		bf = &bfile{key: k}
		fs.m[k] = bf
		if k.level == 0 {
			fs.l0[k.start] = bf
		}
	}
	return bf
}

// open makes sure bf has an open descriptor, creating the file if needed
// and cutting a torn last entry. Callers that may not block under the
// engine lock open the file first (openBucketFile) and install it.
func (fs *fileSet) open(bf *bfile) error {
	if bf.f != nil {
		fs.lru.MoveToFront(bf.elem)
		return nil
	}
	f, err := openBucketFile(fs.path(bf.key, idxSuffix))
	if err != nil {
		return err
	}
	return fs.install(bf, f)
}

// openBucketFile opens (creating) a bucket file.
func openBucketFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("delay: open bucket: %w", err)
	}
	return f, nil
}

// install gives bf an open descriptor of its file.
func (fs *fileSet) install(bf *bfile, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("delay: %w", err)
	}
	if st.Size() == 0 && bf.n == 0 {
		fs.created = true
	}
	if rem := st.Size() % EntrySize; rem != 0 {
		// A torn append (crash mid-write): drop the partial entry.
		if err := f.Truncate(st.Size() - rem); err != nil {
			_ = f.Close()
			return fmt.Errorf("delay: truncate torn bucket entry: %w", err)
		}
	}
	fs.bytes += st.Size()/EntrySize*EntrySize - bf.n*EntrySize
	bf.n = st.Size() / EntrySize
	bf.f = f
	bf.elem = fs.lru.PushFront(bf)
	return nil
}

// evict closes the least recently used clean, unpinned descriptors while
// more than maxOpen are open. Dirty ones stay open until they are synced
// (the limit is soft between two checkpoints).
func (fs *fileSet) evict() {
	for e := fs.lru.Back(); e != nil && fs.lru.Len() > fs.maxOpen; {
		prev := e.Prev()
		bf := e.Value.(*bfile)
		if !bf.dirty && bf.pins == 0 {
			_ = bf.f.Close()
			bf.f = nil
			fs.lru.Remove(e)
			bf.elem = nil
		}
		e = prev
	}
}

// tombstone renames a split bucket's file out of the way (a new bucket of
// the same key may be created at once) and forgets it.
func (fs *fileSet) tombstone(bf *bfile) (string, error) {
	if bf.f != nil {
		_ = bf.f.Close()
		bf.f = nil
		fs.lru.Remove(bf.elem)
		bf.elem = nil
	}
	fs.seq++
	path := fmt.Sprintf("%s.%d%s", filepath.Join(fs.dir, bf.key.name()), fs.seq, splitSuffix)
	if err := os.Rename(fs.path(bf.key, idxSuffix), path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("delay: %w", err)
	}
	delete(fs.m, bf.key)
	fs.bytes -= bf.n * EntrySize
	return path, nil
}

// startRemove closes a bucket's descriptor and marks it removing: nothing
// is appended to it (appenders wait) until finishRemove, called after
// deleteBucketFiles without the lock, forgets it.
func (fs *fileSet) startRemove(bf *bfile) {
	if bf.f != nil {
		_ = bf.f.Close()
		bf.f = nil
		fs.lru.Remove(bf.elem)
		bf.elem = nil
	}
	bf.removing = true
}

func (fs *fileSet) finishRemove(bf *bfile) {
	delete(fs.m, bf.key)
	if bf.key.level == 0 {
		delete(fs.l0, bf.key.start)
	}
	fs.bytes -= bf.n * EntrySize
}

// deleteBucketFiles deletes a bucket's index file and fired log.
func (fs *fileSet) deleteBucketFiles(k bucketKey) error {
	var errs []error
	for _, s := range []string{idxSuffix, firedSuffix} {
		if err := os.Remove(fs.path(k, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (fs *fileSet) closeAll() error {
	var errs []error
	for e := fs.lru.Front(); e != nil; e = e.Next() {
		bf := e.Value.(*bfile)
		if bf.dirty {
			errs = append(errs, fsutil.Fdatasync(bf.f))
		}
		errs = append(errs, bf.f.Close())
		bf.f = nil
		bf.elem = nil
	}
	fs.lru.Init()
	return errors.Join(errs...)
}

// readEntries reads entries [from, to) of a bucket file with its own
// descriptor, so callers need not hold the engine lock. Entries that fail
// their checksum are skipped.
func readEntries(path string, from, to int64, fn func(i int64, e Entry)) error {
	if to <= from {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	defer f.Close()
	return readEntriesFrom(f, path, from, to, fn)
}

// readEntriesFrom is readEntries with an open descriptor (pread: its
// offset is not used).
func readEntriesFrom(f *os.File, path string, from, to int64, fn func(i int64, e Entry)) error {
	const chunk = 8192
	buf := make([]byte, chunk*EntrySize)
	for i := from; i < to; {
		n := min(to-i, chunk)
		b := buf[:n*EntrySize]
		if _, err := f.ReadAt(b, i*EntrySize); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("delay: read %s: %w", path, err)
		}
		for j := int64(0); j < n; j++ {
			if e, ok := DecodeEntry(b[j*EntrySize:]); ok {
				fn(i+j, e)
			}
		}
		i += n
	}
	return nil
}

// readFired reads a fired log: the file positions of the entries already
// delivered, as a bit set. A torn last record is ignored.
func readFired(path string) ([]uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	var bits []uint64
	for i := 0; i+4 <= len(b); i += 4 {
		idx := int64(binary.BigEndian.Uint32(b[i:]))
		for idx/64 >= int64(len(bits)) {
			bits = append(bits, 0)
		}
		bits[idx/64] |= 1 << (idx % 64)
	}
	return bits, nil
}

func bitSet(bits []uint64, i int64) bool {
	return i/64 < int64(len(bits)) && bits[i/64]&(1<<(i%64)) != 0
}
