// Package fsutil holds the small file-system helpers the storage packages
// share: durable metadata writes, directory syncs, preallocation and disk
// usage.
package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNoSpace reports that the file system has no room for a write or an
// allocation. It wraps ENOSPC where the kernel said so.
var ErrNoSpace = errors.New("no space left on device")

// WriteFileAtomic replaces path with data durably: it writes a temporary file
// in the same directory, fsyncs it, renames it over path and fsyncs the
// directory. A crash leaves either the old or the new content, never a mix.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmpName := tmp.Name()
	cleanup := func() { _ = os.Remove(tmpName) }
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("write %s: %w", path, mapNoSpace(err))
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("write %s: fsync: %w", path, mapNoSpace(err))
	}
	if err := tmp.Close(); err != nil {
		cleanup()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		cleanup()
		return fmt.Errorf("write %s: rename: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// Preallocate reserves size bytes for f with fallocate(2), so later writes
// into the range (including stores through a shared mapping) cannot fail for
// lack of space. File systems without fallocate fall back to writing zeros.
func Preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("preallocate %s (%d bytes): %w", f.Name(), size, mapNoSpace(err))
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("preallocate %s: %w", f.Name(), err)
	}
	// No fallocate: write zeros over the part past the current end.
	st, serr := f.Stat()
	if serr != nil {
		return fmt.Errorf("preallocate %s: %w", f.Name(), serr)
	}
	zero := make([]byte, 1<<20)
	for off := st.Size(); off < size; {
		n := int64(len(zero))
		if size-off < n {
			n = size - off
		}
		if _, err := f.WriteAt(zero[:n], off); err != nil {
			return fmt.Errorf("preallocate %s: %w", f.Name(), mapNoSpace(err))
		}
		off += n
	}
	return nil
}

// Usage reports the fraction of the file system holding path that is used,
// as a number in [0, 1], and the bytes still available to unprivileged users.
func Usage(path string) (used float64, avail uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	total := st.Blocks * uint64(st.Bsize)
	free := st.Bfree * uint64(st.Bsize)
	avail = st.Bavail * uint64(st.Bsize)
	if total == 0 {
		return 0, avail, nil
	}
	// Like df: used / (used + available to users).
	usedBytes := total - free
	denom := usedBytes + avail
	if denom == 0 {
		return 0, avail, nil
	}
	return float64(usedBytes) / float64(denom), avail, nil
}

// IsNoSpace reports whether err means the disk is full.
func IsNoSpace(err error) bool {
	return errors.Is(err, ErrNoSpace) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// MapNoSpace makes a raw ENOSPC or EDQUOT from a system call match
// ErrNoSpace (and IsNoSpace); other errors are returned as they are.
func MapNoSpace(err error) error { return mapNoSpace(err) }

func mapNoSpace(err error) error {
	if err != nil && (errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// ZeroRange makes [off, off+n) of f read as zeros while keeping its blocks
// allocated: it punches a hole and allocates the range again. File systems
// without hole punching get zeros written instead.
func ZeroRange(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
			return fmt.Errorf("zero range of %s: %w", f.Name(), mapNoSpace(err))
		}
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("zero range of %s: %w", f.Name(), err)
	}
	zero := make([]byte, 1<<20)
	for n > 0 {
		c := int64(len(zero))
		if n < c {
			c = n
		}
		if _, err := f.WriteAt(zero[:c], off); err != nil {
			return fmt.Errorf("zero range of %s: %w", f.Name(), mapNoSpace(err))
		}
		off += c
		n -= c
	}
	return nil
}

// Fdatasync flushes f's data (and the metadata needed to read it back).
func Fdatasync(f *os.File) error { return FdatasyncFd(int(f.Fd()), f.Name()) }

// FdatasyncFd is Fdatasync of a bare descriptor of the file at name.
func FdatasyncFd(fd int, name string) error {
	if err := RetryEINTR(func() error { return unix.Fdatasync(fd) }); err != nil {
		return fmt.Errorf("fdatasync %s: %w", name, mapNoSpace(err))
	}
	return nil
}

// RetryEINTR calls fn, a system call, again while it fails with EINTR.
func RetryEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// BackgroundFdatasync is Fdatasync for periodic flushes that sync many
// files in a row, off any request's path. After the call it yields the
// processor: a goroutine returning from a system call keeps its P, so a
// loop of syncs of a millisecond or more each can hold a P (and, when
// two such loops run on a two-core machine, every P) for tens of
// milliseconds while the timers and goroutines queued on it wait; the
// runtime hands a P over only when sysmon notices, which can take up to
// 10 ms per call.
func BackgroundFdatasync(f *os.File) error { return BackgroundFdatasyncFd(int(f.Fd()), f.Name()) }

// BackgroundFdatasyncFd is BackgroundFdatasync of a bare descriptor of the
// file at name.
func BackgroundFdatasyncFd(fd int, name string) error {
	err := FdatasyncFd(fd, name)
	runtime.Gosched()
	return err
}

// SyncFS makes everything written to the file system holding path durable
// with one syncfs(2): the data and metadata of every file and directory on
// it, written by this process or another. When many files are dirty it is
// far cheaper than an fdatasync of each (one journal commit and one device
// flush for all); it also writes whatever else is dirty on the file system.
// Write-back errors of the file system since the last call are reported.
func SyncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", path, mapNoSpace(err))
	}
	return nil
}

// OpenFileLimit returns the process's soft limit on open file descriptors
// (RLIMIT_NOFILE).
func OpenFileLimit() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("getrlimit nofile: %w", err)
	}
	return rl.Cur, nil
}

// MaxMapCount returns the kernel's bound on a process's memory mappings
// (/proc/sys/vm/max_map_count).
func MaxMapCount() (int64, error) {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 0, fmt.Errorf("max map count: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("max map count: %w", err)
	}
	return n, nil
}

// Unchanged reports whether two stats of a path show the same version of
// the file: the same file (not replaced by a rename), modification time and
// size. Files watched for edits (certificates, ACL files) are reloaded when
// it is false.
func Unchanged(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
