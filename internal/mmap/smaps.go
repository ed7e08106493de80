package mmap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Region is one entry of /proc/PID/smaps: a range of the address space and
// what it maps.
type Region struct {
	Start, End uintptr
	Perms      string // "r-xp": read, write, execute, private or shared
	Path       string // the mapped file; "" for anonymous memory
	Rss        int64  // bytes resident
	// Anonymous is the bytes of private copies: pages written (or
	// relocated) since they were mapped, which the file does not hold.
	Anonymous int64
	VmFlags   []string // "rd", "ex", "rr", …
}

// ParseSmaps reads the regions of a /proc/PID/smaps text.
func ParseSmaps(r io.Reader) ([]Region, error) {
	var out []Region
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			// A region's header: address range, perms, offset, device,
			// inode, path (which may hold spaces: the rest of the line).
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end < start || len(f) < 5 {
				return nil, fmt.Errorf("smaps: bad region line %q", sc.Text())
			}
			reg := Region{Start: uintptr(start), End: uintptr(end), Perms: f[1]}
			if len(f) >= 6 {
				reg.Path = strings.Join(f[5:], " ")
			}
			out = append(out, reg)
			continue
		}
		if len(out) == 0 || len(f) < 2 {
			continue
		}
		cur := &out[len(out)-1]
		switch f[0] {
		case "Rss:", "Anonymous:":
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps: %q: %w", sc.Text(), err)
			}
			if f[0] == "Rss:" {
				cur.Rss = kb << 10
			} else {
				cur.Anonymous = kb << 10
			}
		case "VmFlags:":
			cur.VmFlags = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return out, nil
}

// SelfRegions reads this process's regions (/proc/self/smaps).
func SelfRegions() ([]Region, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	defer f.Close()
	return ParseSmaps(f)
}

// ResidentUnder returns how many bytes of this process's mappings of files
// under dir are resident (the sum of their Rss in /proc/self/smaps).
func ResidentUnder(dir string) (int64, error) {
	regions, err := SelfRegions()
	if err != nil {
		return 0, fmt.Errorf("resident mappings: %w", err)
	}
	var total int64
	for _, r := range regions {
		if strings.HasPrefix(r.Path, dir) {
			total += r.Rss
		}
	}
	return total, nil
}

// ReleaseRegion drops r's pages from this process's page tables (madvise
// MADV_DONTNEED over the whole region), as Mapping.Release does for a
// mapping of its own. Only for a region the file holds unchanged (not
// writable, no Anonymous bytes): the pages come back from the file at
// their next use, where private copies would be lost.
func ReleaseRegion(r Region) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.Start, r.End-r.Start, unix.MADV_DONTNEED); errno != 0 {
		return fmt.Errorf("madvise dontneed %x-%x: %w", r.Start, r.End, errno)
	}
	return nil
}
