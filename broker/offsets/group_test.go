package offsets

import (
	"path/filepath"
	"testing"
)

func TestRemoveGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumerOffset.json")
	o, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	o.Commit("G1", "T", 0, 5)
	o.Commit("G1", "U", 1, 7)
	o.Commit("G2", "T", 0, 9)
	o.RemoveGroup("G1")
	if err := o.Persist(); err != nil {
		t.Fatal(err)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Groups(); len(got) != 1 || got[0] != "G2" {
		t.Fatalf("groups after removing G1: %v", got)
	}
	if off := again.Query("G1", "T", 0); off != -1 {
		t.Fatalf("G1's offset survived: %d", off)
	}
	if off := again.Query("G2", "T", 0); off != 9 {
		t.Fatalf("G2's offset = %d, want 9", off)
	}
}
