package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Start-up pages.
//
// Most of a Go daemon's executable is read once, while it starts: every
// package's initialiser, flag and configuration parsing, a broker's
// recovery of its store. The kernel maps the executable's pages into the
// process as they are first touched, and 64 KiB around each (fault-around),
// so by the time a daemon serves nearly all of its executable is mapped
// and counted in its resident set (VmRSS, RssFile), though an idle daemon
// runs a small part of it. ReleaseStartPages unmaps, once the daemon
// serves, the executable's read-only pages from the process, as the Linux
// kernel frees its own __init sections after boot: what the daemon still
// runs faults back in from the page cache at the first use (a minor fault,
// no disk read while the file stays cached), the rest is no longer the
// process's.
//
// The pages stay in the page cache, shared and reclaimable as before: a
// cgroup that was charged for reading them stays charged. What changes is
// what the process holds: its resident set, and so what ps, top and the
// OOM killer's score count, is its working set.
//
// Only mappings of the executable that cannot be written and hold no
// private copy of a page (smaps' Anonymous is 0) are released: unmapping
// those loses nothing, since every page comes back unchanged from the
// file.

// mapping is one entry of /proc/self/smaps.
type mapping struct {
	start, end uint64
	perms      string // "r-xp"
	path       string
	rssKiB     int64 // Rss
	anonKiB    int64 // Anonymous: private copies, which the file does not hold
}

// parseSmaps reads the mappings of a /proc/PID/smaps text.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end < start {
				return nil, fmt.Errorf("daemon: smaps: bad mapping line %q", line)
			}
			m := mapping{start: start, end: end, perms: f[1]}
			if len(f) >= 6 {
				// A path may hold spaces; it is the rest of the line.
				m.path = strings.Join(f[5:], " ")
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 || len(f) < 2 {
			continue
		}
		cur := &out[len(out)-1]
		switch f[0] {
		case "Rss:":
			cur.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "Anonymous:":
			cur.anonKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("daemon: smaps: %w", err)
	}
	return out, nil
}

// startPages picks, from ms, the mappings of the executable exe that can be
// released: read-only and without a private copy of any page.
func startPages(ms []mapping, exe string) []mapping {
	var out []mapping
	for _, m := range ms {
		if m.path != exe || len(m.perms) < 2 || m.perms[0] != 'r' || m.perms[1] == 'w' || m.anonKiB != 0 {
			continue
		}
		out = append(out, m)
	}
	return out
}

// ReleaseStartPages unmaps the executable's read-only pages from the
// process (see above) and logs how much of its resident set that was. A
// failure is logged, and the mappings not yet released stay as they are.
func ReleaseStartPages(lg *zap.Logger) {
	kib, err := releaseStartPages()
	if err != nil {
		lg.Debug("start-up pages kept", zap.Error(err))
		return
	}
	lg.Debug("start-up pages released", zap.Int64("resident_kib", kib))
}

// releaseStartPages does ReleaseStartPages' work and returns the resident
// KiB of the mappings it released.
func releaseStartPages() (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("daemon: the executable's path: %w", err)
	}
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("daemon: %w", err)
	}
	ms, err := parseSmaps(bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	var kib int64
	for _, m := range startPages(ms, exe) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return kib, fmt.Errorf("daemon: madvise %x-%x: %w", m.start, m.end, errno)
		}
		kib += m.rssKiB
	}
	return kib, nil
}
