package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStartWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if err := StartWriteback(f, 0, 1<<20); err != nil {
		t.Fatalf("start writeback: %v", err)
	}
	if err := Fdatasync(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := StartWriteback(f, 0, 1<<20); err == nil {
		t.Fatal("start writeback of a closed file succeeded")
	}
}
