package daemon

import (
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/mmap"
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
// private copy of a page (smaps' Anonymous is 0) are released
// (mmap.SelfRegions, mmap.ReleaseRegion): unmapping those loses nothing,
// since every page comes back unchanged from the file.

// startPages picks, from rs, the regions of the executable exe that can be
// released: read-only and without a private copy of any page.
func startPages(rs []mmap.Region, exe string) []mmap.Region {
	var out []mmap.Region
	for _, r := range rs {
		if r.Path != exe || len(r.Perms) < 2 || r.Perms[0] != 'r' || r.Perms[1] == 'w' || r.Anonymous != 0 {
			continue
		}
		out = append(out, r)
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
// KiB of the regions it released.
func releaseStartPages() (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("daemon: the executable's path: %w", err)
	}
	regions, err := mmap.SelfRegions()
	if err != nil {
		return 0, fmt.Errorf("daemon: %w", err)
	}
	var kib int64
	for _, r := range startPages(regions, exe) {
		if err := mmap.ReleaseRegion(r); err != nil {
			return kib, fmt.Errorf("daemon: %w", err)
		}
		kib += r.Rss >> 10
	}
	return kib, nil
}
