// Package mmap maps files into memory and flushes mapped ranges, and reads
// this process's regions from /proc/self/smaps (smaps.go).
//
// It is a thin, Linux-first layer over mmap(2), msync(2) and madvise(2) so the
// storage packages share one implementation and one set of error messages.
package mmap

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Mapping is a shared mapping of the first Len bytes of a file.
// Data is valid until Unmap is called.
type Mapping struct {
	Data []byte
}

// Map maps size bytes of f from offset 0. When writable is true the mapping is
// PROT_READ|PROT_WRITE and MAP_SHARED, so stores reach the file.
func Map(f *os.File, size int, writable bool) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mmap %s: size %d must be positive", f.Name(), size)
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s (%d bytes): %w", f.Name(), size, err)
	}
	return &Mapping{Data: data}, nil
}

// Sync flushes the pages covering [off, off+n) to the file with msync(MS_SYNC).
func (m *Mapping) Sync(off, n int) error {
	if n <= 0 {
		return nil
	}
	page := os.Getpagesize()
	start := off &^ (page - 1)
	end := off + n
	if end > len(m.Data) {
		end = len(m.Data)
	}
	if err := unix.Msync(m.Data[start:end], unix.MS_SYNC); err != nil {
		return fmt.Errorf("msync: %w", err)
	}
	return nil
}

// Advise passes an madvise(2) hint for the whole mapping; errors are returned
// but callers may treat them as advisory.
func (m *Mapping) Advise(advice int) error {
	if err := unix.Madvise(m.Data, advice); err != nil {
		return fmt.Errorf("madvise: %w", err)
	}
	return nil
}

// AdviseRange passes an madvise(2) hint for the whole pages covering
// [off, off+n); like Advise, it is a hint.
func (m *Mapping) AdviseRange(off, n, advice int) error {
	page := os.Getpagesize()
	start := off &^ (page - 1)
	end := min(off+n, len(m.Data))
	if end <= start {
		return nil
	}
	if err := unix.Madvise(m.Data[start:end], advice); err != nil {
		return fmt.Errorf("madvise: %w", err)
	}
	return nil
}

// ErrPopulateUnsupported is returned by PopulateWrite on a kernel that does
// not know MADV_POPULATE_WRITE (Linux before 5.14).
var ErrPopulateUnsupported = errors.New("madvise populate_write: not supported by this kernel")

// PopulateWrite makes the pages covering [off, off+n) present and writable
// in this process's page tables at once (madvise MADV_POPULATE_WRITE), so
// that later stores into them take no page fault each. For a shared file
// mapping they become dirty pages of the file in the page cache, their
// content unchanged.
func (m *Mapping) PopulateWrite(off, n int) error {
	page := os.Getpagesize()
	start := off &^ (page - 1)
	end := min(off+n, len(m.Data))
	if end <= start {
		return nil
	}
	err := unix.Madvise(m.Data[start:end], unix.MADV_POPULATE_WRITE)
	switch {
	case errors.Is(err, unix.EINVAL):
		return ErrPopulateUnsupported
	case err != nil:
		return fmt.Errorf("madvise populate_write: %w", err)
	}
	return nil
}

// Release drops the pages covering whole pages of [off, off+n) from this
// process's page tables (madvise MADV_DONTNEED): they stop counting in its
// resident set. For a shared file mapping nothing is lost: the data stays in
// the file and the page cache (dirty pages keep their dirty state), and a
// later access maps the page again from the cache.
func (m *Mapping) Release(off, n int) error {
	page := os.Getpagesize()
	start := (off + page - 1) &^ (page - 1)
	end := min(off+n, len(m.Data)) &^ (page - 1)
	if end <= start {
		return nil
	}
	if err := unix.Madvise(m.Data[start:end], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("madvise dontneed: %w", err)
	}
	return nil
}

// Unmap releases the mapping. It is safe to call more than once.
func (m *Mapping) Unmap() error {
	if m == nil || m.Data == nil {
		return nil
	}
	err := unix.Munmap(m.Data)
	m.Data = nil
	if err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}
