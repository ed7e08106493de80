package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/mmap"
	"go.uber.org/zap"
)

// segment is one preallocated, mapped CommitLog file.
type segment struct {
	start int64 // absolute offset of the first byte
	size  int64
	path  string
	f     *os.File
	m     *mmap.Mapping

	// populated is where the pages made writable ahead of the writer end,
	// relative to start (mmap write mode, mmapwrite.go). Under Log.mu, or
	// the allocator's before the writer sees the segment.
	populated int64
	// zeroed is where the zeros written ahead of a durable writer end,
	// relative to start (zeroahead.go). Under Log.mu.
	zeroed int64

	// The file opened with O_DIRECT for cold reads (direct.go), opened on
	// first use; dfailed once the file system refused it.
	dmu     sync.Mutex
	dfile   *os.File
	dfailed bool
}

func (s *segment) end() int64 { return s.start + s.size }

// SegmentName is the file name of the segment starting at offset: the offset
// as 20 zero-padded decimal digits.
func SegmentName(offset int64) string { return fmt.Sprintf("%020d", offset) }

// parseSegmentName returns the start offset encoded in a segment file name.
func parseSegmentName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// openSegment opens (create=false) or creates (create=true) the segment
// starting at start, makes sure it is allocated to its full size and maps it.
func openSegment(dir string, start, size int64, create, writable bool) (*segment, error) {
	path := filepath.Join(dir, SegmentName(start))
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat segment %s: %w", path, err)
	}
	if st.Size() > size {
		_ = f.Close()
		return nil, fmt.Errorf("segment %s is %d bytes, larger than the segment size %d", path, st.Size(), size)
	}
	// A new file, or one cut short (a simulated power loss, a crash during
	// creation): allocate the full size so stores into the mapping cannot
	// fault for lack of space.
	if err := fsutil.Preallocate(f, size); err != nil {
		_ = f.Close()
		if create {
			_ = os.Remove(path)
		}
		return nil, err
	}
	if create {
		if err := fsutil.SyncDir(dir); err != nil {
			_ = f.Close()
			_ = os.Remove(path)
			return nil, err
		}
	}
	m, err := mmap.Map(f, int(size), writable)
	if err != nil {
		_ = f.Close()
		if create {
			_ = os.Remove(path)
		}
		return nil, err
	}
	return &segment{start: start, size: size, path: path, f: f, m: m}, nil
}

// willNeed asks the kernel to start reading [off, off+n) of the file into
// the page cache (posix_fadvise WILLNEED): it returns once the reads are
// queued, without waiting for them.
func (s *segment) willNeed(off, n int64) error {
	if err := unix.Fadvise(int(s.f.Fd()), off, n, unix.FADV_WILLNEED); err != nil {
		return fmt.Errorf("fadvise willneed %s at %d: %w", s.path, off, err)
	}
	return nil
}

// close unmaps and closes the segment.
func (s *segment) close() error {
	return errors.Join(s.m.Unmap(), s.f.Close(), s.closeDirect())
}

// remove closes the segment and deletes its file.
func (s *segment) remove() error {
	err := s.close()
	if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("remove segment: %w", rerr))
	}
	return err
}

// listSegments returns the start offsets of the segment files in dir, sorted.
// Other files are ignored.
// dropEmptyTail removes the trailing segment files that are empty: a
// crash between creating the next file and preallocating it leaves one.
// It holds nothing, and on a full disk its preallocation would keep the
// log from opening. It returns the starts that remain.
func dropEmptyTail(dir string, starts []int64, log *zap.Logger) ([]int64, error) {
	removed := false
	for len(starts) > 0 {
		path := filepath.Join(dir, SegmentName(starts[len(starts)-1]))
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("commitlog: %w", err)
		}
		if st.Size() != 0 {
			break
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("commitlog: remove an empty last segment: %w", err)
		}
		log.Warn("removed an empty last segment file (a crash while it was being made)", zap.String("path", path))
		starts = starts[:len(starts)-1]
		removed = true
	}
	if removed {
		if err := fsutil.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("commitlog: %w", err)
		}
	}
	return starts, nil
}

func listSegments(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments in %s: %w", dir, err)
	}
	var starts []int64
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if v, ok := parseSegmentName(e.Name()); ok {
			starts = append(starts, v)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	return starts, nil
}
