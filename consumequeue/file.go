package consumequeue

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/mmap"
	"go.uber.org/zap"
)

// fileNameDigits is the width of a file name: the start byte offset, zero padded.
const fileNameDigits = 20

// segment is one mapped ConsumeQueue file. The mapping is only read: bytes
// reach the file with pwrite through f, which is opened when first needed
// and closed once the file is complete and synced (or unmapped).
type segment struct {
	start int64 // queue offset (unit index) of the file's first unit
	path  string
	m     *mmap.Mapping
	f     *os.File // nil until written to
}

// unit returns the 20 bytes of queue offset off, which must lie in the segment.
func (s *segment) unit(off int64) []byte {
	pos := (off - s.start) * UnitSize
	return s.m.Data[pos : pos+UnitSize : pos+UnitSize]
}

// span returns the bytes of units [from, to), which must lie in the segment.
func (s *segment) span(from, to int64) []byte {
	return s.m.Data[(from-s.start)*UnitSize : (to-s.start)*UnitSize]
}

// file returns the segment's file descriptor, opening it if needed.
func (s *segment) file() (*os.File, error) {
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", s.path, err)
		}
		s.f = f
	}
	return s.f, nil
}

// write stores b (whole units) at queue offset from with pwrite.
func (s *segment) write(from int64, b []byte) error {
	f, err := s.file()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, (from-s.start)*UnitSize); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
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

// sync makes what was written to the segment durable.
func (s *segment) sync() error {
	if s.f == nil {
		return nil // never written through this segment
	}
	if err := fsutil.BackgroundFdatasync(s.f); err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	return nil
}

// closeFile closes the file descriptor (the mapping stays).
func (s *segment) closeFile() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

func (s *segment) unmap() error {
	cerr := s.closeFile()
	if err := s.m.Unmap(); err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	return cerr
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

// createSegment creates (or resets) the file at path, preallocates size
// zero bytes and maps it. When the disk has no room for it, spare (if
// set) supplies the file instead.
func createSegment(path string, start, size int64, spare func(string, int64) (*os.File, error)) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		err = fmt.Errorf("create %s: %w", path, err)
	} else if seg, merr := mapFile(f, start, size); merr == nil {
		return seg, nil
	} else {
		err = merr
		_ = os.Remove(path)
	}
	if spare == nil || !fsutil.IsNoSpace(err) {
		return nil, err
	}
	f, serr := spare(path, size)
	if serr != nil {
		return nil, fmt.Errorf("%w; no spare file either: %v", err, serr)
	}
	seg, err := mapFile(f, start, size)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return seg, nil
}

// mapFile preallocates f to size bytes and maps it read-only; the segment
// keeps f for writing.
func mapFile(f *os.File, start, size int64) (*segment, error) {
	if err := fsutil.Preallocate(f, size); err != nil {
		f.Close()
		return nil, err
	}
	m, err := mmap.Map(f, int(size), false)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segment{start: start, path: f.Name(), m: m, f: f}, nil
}

// openSegment maps an existing file for recovery. A file longer than size
// means UnitsPerFile changed and is refused; a shorter one (cut by a crash)
// loses any partial unit at its end and is re-extended with zeros.
func openSegment(path string, start, size int64, log *zap.Logger) (*segment, error) {
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
		return nil, fmt.Errorf("%s is %d bytes, want %d (was UnitsPerFile changed?): %w",
			path, st.Size(), size, ErrCorrupt)
	}
	if st.Size() < size {
		whole := st.Size() - st.Size()%UnitSize
		log.Warn("consumequeue file is short; re-extending with zeros",
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
	return mapFile(f, start, size)
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
