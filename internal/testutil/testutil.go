// Package testutil holds small helpers shared by the tests of several
// packages. Only test files import it.
package testutil

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// WaitFor polls cond until it returns nil, and fails the test with cond's
// last error (naming what was awaited) when d passes first. It waits 5 ms
// between calls, or as long as the last call took if that was longer, so
// a costly condition (one that runs a command) leaves the CPUs half free.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		began := time.Now()
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(max(5*time.Millisecond, time.Since(began)))
	}
}

// errNotYet is Eventually's condition not holding yet.
var errNotYet = errors.New("condition does not hold")

// Eventually is WaitFor for a condition that holds or does not, with
// nothing to say why not.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitFor(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// CrashCopy copies the tree under dir to a new temporary directory as the
// files stand now: what a process killed at this moment would leave (the
// page cache survives, the process's buffers do not). The files may stay
// open and in use.
func CrashCopy(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("crash copy of %s: %v", dir, err)
	}
	return dst
}

// MountTmpfs mounts a tmpfs of size (mount's notation: "1m", "12m") on a
// new temporary directory and unmounts it when the test ends: a small file
// system a test can fill. It skips the test where mounting is not allowed
// (not root, no CAP_SYS_ADMIN).
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (need root and CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// DropPageCache writes a file's dirty pages out and drops its pages from
// the page cache, so that the next read of it goes to the disk. It skips
// the test where the kernel refuses the hint.
func DropPageCache(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
}

// ResidentBytes returns how many bytes of [off, off+n) of a file are in
// the page cache (mincore over a read-only mapping of its own); n < 0
// means to the end of the file. It skips the test where mincore is
// refused.
func ResidentBytes(t testing.TB, path string, off, n int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n < 0 {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		n = int(st.Size()) - off
	}
	if n <= 0 {
		return 0
	}
	b, err := unix.Mmap(int(f.Fd()), 0, off+n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	page := os.Getpagesize()
	vec := make([]byte, (n+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[off])), uintptr(n),
		uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Skipf("mincore: %v", e)
	}
	r := 0
	for _, v := range vec {
		if v&1 != 0 {
			r += page
		}
	}
	return r
}

// Memory is a process's resident memory in bytes, as /proc/PID/status
// reports it (-1: not read).
type Memory struct{ RSS, Anon, File int64 }

// ProcMemory reads VmRSS, RssAnon and RssFile of a process.
func ProcMemory(pid int) Memory {
	m := Memory{RSS: -1, Anon: -1, File: -1}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			m.RSS = kb << 10
		case "RssAnon:":
			m.Anon = kb << 10
		case "RssFile:":
			m.File = kb << 10
		}
	}
	return m
}

// ProcessCPU is the CPU time (user and system) this process has used so
// far, background goroutines included: what a benchmark at a fixed rate
// reports per operation.
func ProcessCPU(t testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
