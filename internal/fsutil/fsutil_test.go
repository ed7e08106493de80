package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSyncFSAndLimits(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SyncFS(dir); err != nil {
		t.Fatalf("SyncFS: %v", err)
	}
	if err := SyncFS(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncFS of a missing path succeeded")
	}
	if n, err := OpenFileLimit(); err != nil || n == 0 {
		t.Fatalf("OpenFileLimit = %d, %v", n, err)
	}
	if n, err := MaxMapCount(); err != nil || n <= 0 {
		t.Fatalf("MaxMapCount = %d, %v", n, err)
	}
}
