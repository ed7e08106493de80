package consumequeue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// fileNameDigits is the width of a file name: the start byte offset, zero padded.
const fileNameDigits = 20

// openFiles is how a store's segments open their files: it counts the
// descriptors they hold, against Options.MaxOpenFiles, and holds a
// descriptor of the store's root directory, relative to which the files
// under it are opened (a path walk of three names instead of the whole
// path: with many queues nearly every write opens its file).
type openFiles struct {
	n   atomic.Int64
	max int64

	root   int    // O_PATH descriptor of the root; -1: none (closed)
	prefix string // the root's cleaned path and a separator
}

func newOpenFiles(root string, max int64) (*openFiles, error) {
	var fd int
	err := fsutil.RetryEINTR(func() (err error) {
		fd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", root, err)
	}
	return &openFiles{max: max, root: fd, prefix: filepath.Clean(root) + string(filepath.Separator)}, nil
}

func (o *openFiles) over() bool { return o.n.Load() > o.max }

// open opens the file at path for reading and writing, relative to the
// root when it lies under it.
func (o *openFiles) open(path string) (int, error) {
	dir, name := unix.AT_FDCWD, path
	if o.root >= 0 && strings.HasPrefix(path, o.prefix) {
		dir, name = o.root, path[len(o.prefix):]
	}
	var fd int
	err := fsutil.RetryEINTR(func() (err error) {
		fd, err = unix.Openat(dir, name, unix.O_RDWR|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// close closes the root's descriptor once no segment can open a file any
// more (every queue is closed).
func (o *openFiles) close() error {
	if o.root < 0 {
		return nil
	}
	err := unix.Close(o.root)
	o.root = -1
	return err
}

// segment is one ConsumeQueue file. It is read and written with pread and
// pwrite through a bare descriptor, which is opened when first needed and
// closed when the file is complete and synced, or idle (see
// Queue.closeIdleLocked). A bare descriptor rather than an *os.File: with
// many queues nearly every write of a few units opens the file and closes
// it again, and an *os.File would add to each open an attempt to register
// the descriptor with the runtime's poller (a failing epoll_ctl for a
// regular file), an allocation and a cleanup.
//
// The descriptor may be opened by a reader holding the queue's mu shared or
// by a flush holding flushMu (a compare-and-swap settles a race between
// them); it is closed only by one holding both flushMu and mu exclusively,
// or once the segment has left the queue's list, so a descriptor never
// goes away (or is reused for another file) under a read or a write.
type segment struct {
	start int64 // queue offset (unit index) of the file's first unit
	units int64 // units the file holds
	path  string
	fds   *openFiles    // the store's count
	qfds  *atomic.Int64 // the queue's count
	fd    atomic.Int64  // the open descriptor + 1; 0 while closed
}

func newSeg(path string, start, units int64, q *Queue) *segment {
	return &segment{start: start, units: units, path: path, fds: q.fds, qfds: &q.open}
}

func (s *segment) end() int64 { return s.start + s.units }

func (s *segment) size() int64 { return s.units * UnitSize }

// file returns the segment's file descriptor, opening it if needed.
func (s *segment) file() (int, error) {
	if v := s.fd.Load(); v != 0 {
		return int(v - 1), nil
	}
	fd, err := s.fds.open(s.path)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", s.path, err)
	}
	if !s.fd.CompareAndSwap(0, int64(fd)+1) {
		_ = unix.Close(fd) // another opened it meanwhile
		return int(s.fd.Load() - 1), nil
	}
	s.fds.n.Add(1)
	s.qfds.Add(1)
	return fd, nil
}

// adopt makes a descriptor of f the segment's and closes f.
func (s *segment) adopt(f *os.File) error {
	var fd int
	rc, err := f.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(ofd uintptr) { fd, err = unix.FcntlInt(ofd, unix.F_DUPFD_CLOEXEC, 0) })
		err = errors.Join(err, cerr)
	}
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("take the descriptor of %s: %w", s.path, err)
	}
	s.fd.Store(int64(fd) + 1)
	s.fds.n.Add(1)
	s.qfds.Add(1)
	return nil
}

// isOpen reports whether the segment holds a descriptor.
func (s *segment) isOpen() bool { return s.fd.Load() != 0 }

// read fills b (whole units) with the units from queue offset from.
func (s *segment) read(b []byte, from int64) error {
	fd, err := s.file()
	if err != nil {
		return err
	}
	switch err := allAt(unix.Pread, fd, b, (from-s.start)*UnitSize); {
	case errors.Is(err, io.ErrNoProgress):
		return fmt.Errorf("read %s: %w: file shorter than %d bytes", s.path, ErrCorrupt, s.size())
	case err != nil:
		return fmt.Errorf("read %s: %w", s.path, err)
	}
	return nil
}

// unit reads the unit at queue offset off, which must lie in the segment.
func (s *segment) unit(off int64) (Unit, error) {
	var b [UnitSize]byte
	if err := s.read(b[:], off); err != nil {
		return Unit{}, err
	}
	return decodeUnit(b[:]), nil
}

// write stores b (whole units) at queue offset from with pwrite.
func (s *segment) write(from int64, b []byte) error {
	fd, err := s.file()
	if err != nil {
		return err
	}
	switch err := allAt(unix.Pwrite, fd, b, (from-s.start)*UnitSize); {
	case errors.Is(err, io.ErrNoProgress):
		return fmt.Errorf("write %s: %w", s.path, io.ErrShortWrite)
	case err != nil:
		return fmt.Errorf("write %s: %w", s.path, fsutil.MapNoSpace(err))
	}
	return nil
}

// allAt calls op (pread or pwrite) until all of b is done from off on,
// again after EINTR; a call that moves nothing (end of file) is
// io.ErrNoProgress.
func allAt(op func(fd int, b []byte, off int64) (int, error), fd int, b []byte, off int64) error {
	for len(b) > 0 {
		var n int
		if err := fsutil.RetryEINTR(func() (err error) { n, err = op(fd, b, off); return err }); err != nil {
			return err
		}
		if n == 0 {
			return io.ErrNoProgress
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// zero writes zeros over units [from, to).
func (s *segment) zero(from, to int64) error { return s.fill(from, to, zeroChunk[:]) }

// fill writes pattern (whole units, repeated) over units [from, to).
func (s *segment) fill(from, to int64, pattern []byte) error {
	for from < to {
		n := min(to-from, int64(len(pattern)/UnitSize))
		if err := s.write(from, pattern[:n*UnitSize]); err != nil {
			return err
		}
		from += n
	}
	return nil
}

// sync makes what was written to the segment durable, also what another
// descriptor (since closed, or a crashed process's) wrote: it opens the
// file when it is closed.
func (s *segment) sync() error {
	fd, err := s.file()
	if err != nil {
		return err
	}
	return fsutil.BackgroundFdatasyncFd(fd, s.path)
}

// closeFile closes the file descriptor; see segment for who may.
func (s *segment) closeFile() error {
	v := s.fd.Swap(0)
	if v == 0 {
		return nil
	}
	s.fds.n.Add(-1)
	s.qfds.Add(-1)
	// close is not retried on EINTR: the descriptor is gone either way.
	if err := unix.Close(int(v - 1)); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// fileName returns the name of the file whose first byte is at startByte.
func fileName(startByte int64) string {
	return fmt.Sprintf("%0*d", fileNameDigits, startByte)
}

// parseFileName returns the start byte offset encoded in a file name, and
// false for names that are not all decimal digits.
func parseFileName(name string) (int64, bool) {
	if name == "" || len(name) > fileNameDigits {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// createSegment creates (or resets) the file at path and preallocates its
// units zero units. When the disk has no room for it, spare (if set)
// supplies the file instead. The segment keeps the file open.
func createSegment(path string, start, units int64, q *Queue) (*segment, error) {
	spare := q.spare
	size := units * UnitSize
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		err = fmt.Errorf("create %s: %w", path, err)
	} else if err = fsutil.Preallocate(f, size); err == nil {
		seg := newSeg(path, start, units, q)
		if err := seg.adopt(f); err != nil {
			_ = os.Remove(path)
			return nil, err
		}
		return seg, nil
	} else {
		_ = f.Close()
		_ = os.Remove(path)
	}
	if spare == nil || !fsutil.IsNoSpace(err) {
		return nil, err
	}
	f, serr := spare(path, size)
	if serr != nil {
		return nil, fmt.Errorf("%w; no spare file either: %w", err, serr)
	}
	if st, serr := f.Stat(); serr != nil || st.Size() != size {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("%w; the spare file for %s is not %d bytes: %v", err, path, size, serr)
	}
	seg := newSeg(path, start, units, q)
	if err := seg.adopt(f); err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return seg, nil
}

// openSegment opens an existing file for recovery. A file longer than the
// layout says is refused; a shorter one (cut by a crash) loses any partial
// unit at its end and is re-extended with zeros. The segment keeps the file
// open.
func openSegment(path string, start, units int64, q *Queue) (*segment, error) {
	size := units * UnitSize
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Size() > size {
		f.Close()
		return nil, fmt.Errorf("%s is %d bytes, want %d (were UnitsPerFile or FirstFileUnits changed?): %w",
			path, st.Size(), size, ErrCorrupt)
	}
	if st.Size() < size {
		whole := st.Size() - st.Size()%UnitSize
		q.logger().Warn("consumequeue file is short; re-extending with zeros",
			zap.String("file", path), zap.Int64("size", st.Size()), zap.Int64("want", size),
			zap.Int64("keptBytes", whole))
		if err := f.Truncate(whole); err != nil {
			f.Close()
			return nil, fmt.Errorf("truncate %s to %d: %w", path, whole, err)
		}
		if err := fsutil.Preallocate(f, size); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("fsync %s: %w", path, err)
		}
	}
	seg := newSeg(path, start, units, q)
	if err := seg.adopt(f); err != nil {
		return nil, err
	}
	return seg, nil
}

var zeroChunk [64 << 10]byte

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroChunk))
		if !bytes.Equal(b[:n], zeroChunk[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
