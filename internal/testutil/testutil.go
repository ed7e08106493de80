// Package testutil holds small helpers shared by the tests of several
// packages. Only test files import it.
package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it returns nil, and fails the test
// with cond's last error (naming what was awaited) when d passes first.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
