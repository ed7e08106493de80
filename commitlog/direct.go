package commitlog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cold reads with O_DIRECT.
//
// Bytes more than CacheWindow behind the flushed end have been dropped from
// the page cache (dropBehind). Read back through the page cache, every
// 4 KiB of them makes the kernel allocate a page, submit its read and put
// it on its lists, in the reader's context: on this project's test machine
// 1.4 CPU seconds per GiB, most of a core at the disk's sequential rate.
// Read with O_DIRECT, the disk writes into the reader's buffer and the page
// cache is left alone. ReadSpan reads a span below CacheFrom that way, into
// a buffer aligned to directAlign and covering whole blocks, and copies the
// span out; a file system that refuses O_DIRECT (tmpfs) makes it fall back
// to pread through the page cache for that segment.

// directAlign is the alignment O_DIRECT asks of offsets, lengths and
// buffers on the file systems a broker runs on (the logical block size is
// 512 or 4096 bytes).
const directAlign = 4096

// errNoDirect: the segment's file system does not take O_DIRECT.
var errNoDirect = errors.New("commitlog: O_DIRECT not supported")

// directFile returns the segment's file opened with O_DIRECT, opening it
// on first use.
func (s *segment) directFile() (*os.File, error) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.dfile != nil {
		return s.dfile, nil
	}
	if s.dfailed {
		return nil, errNoDirect
	}
	f, err := os.OpenFile(s.path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		s.dfailed = true
		return nil, fmt.Errorf("%w: open %s: %v", errNoDirect, s.path, err)
	}
	s.dfile = f
	return f, nil
}

// closeDirect closes the O_DIRECT file, if one was opened.
func (s *segment) closeDirect() error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.dfile == nil {
		return nil
	}
	err := s.dfile.Close()
	s.dfile = nil
	return err
}

// readDirect fills dst with the bytes of seg at off (absolute), reading
// the whole blocks around them with O_DIRECT. The caller holds segMu.
func (s *segment) readDirect(off int64, dst []byte) error {
	f, err := s.directFile()
	if err != nil {
		return err
	}
	rel := off - s.start
	lo := rel &^ (directAlign - 1)
	hi := (rel + int64(len(dst)) + directAlign - 1) &^ (directAlign - 1)
	p := getAligned(int(hi - lo))
	defer putAligned(p)
	buf := (*p)[:hi-lo]
	if _, err := f.ReadAt(buf, lo); err != nil {
		if errors.Is(err, unix.EINVAL) {
			s.dmu.Lock()
			s.dfailed = true
			s.dmu.Unlock()
			return fmt.Errorf("%w: read %s: %v", errNoDirect, s.path, err)
		}
		return fmt.Errorf("read %s at %d with O_DIRECT: %w", s.path, lo, err)
	}
	copy(dst, buf[rel-lo:])
	return nil
}

// alignedPool keeps directAlign-aligned buffers for readDirect; one
// larger than alignedKeepMax is not kept.
var alignedPool sync.Pool

const alignedKeepMax = 8 << 20

// getAligned returns a buffer of at least n bytes whose first byte is
// aligned to directAlign.
func getAligned(n int) *[]byte {
	if p, ok := alignedPool.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	raw := make([]byte, n+directAlign)
	skip := 0
	if r := int(uintptrOf(raw) % directAlign); r != 0 {
		skip = directAlign - r
	}
	b := raw[skip : skip+n : skip+n]
	return &b
}

// uintptrOf is the address of b's first byte (Go's heap does not move
// objects, so its alignment holds for the buffer's life).
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func putAligned(p *[]byte) {
	if cap(*p) <= alignedKeepMax {
		alignedPool.Put(p)
	}
}
