package offsets

import (
	"path/filepath"
	"reflect"
	"testing"
)

func TestTablePersistsAndReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumerOffset.json")
	o, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Query("g", "orders", 0); got != -1 {
		t.Fatalf("empty table answers %d", got)
	}
	o.Commit("g", "orders", 0, 10)
	o.Commit("g", "orders", 1, 20)
	o.Commit("h", "audit", 0, 5)
	if o.Set("g", "orders", 0, 9, true) {
		t.Fatal("a forward-only set moved an offset back")
	}
	if !o.Set("g", "orders", 0, 11, true) {
		t.Fatal("a forward-only set did not move an offset forward")
	}
	if err := o.Persist(); err != nil {
		t.Fatal(err)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Queues("g", "orders"); !reflect.DeepEqual(got, map[int32]int64{0: 11, 1: 20}) {
		t.Fatalf("reloaded %v", got)
	}
	if got := again.Groups(); !reflect.DeepEqual(got, []string{"g", "h"}) {
		t.Fatalf("groups %v", got)
	}
	if got := again.TopicsOf("h"); !reflect.DeepEqual(got, []string{"audit"}) {
		t.Fatalf("topics of h %v", got)
	}
	again.RemoveTopic("orders")
	if got := again.Query("g", "orders", 1); got != -1 {
		t.Fatalf("removed topic answers %d", got)
	}
}

// TestLocalCommitsAndMasterTable: a slave's local commits reach the
// master where they are ahead; the master's table replaces the slave's
// except where a local commit the master has not taken is ahead.
func TestLocalCommitsAndMasterTable(t *testing.T) {
	dir := t.TempDir()
	master, _ := Load(filepath.Join(dir, "master.json"))
	slave, _ := Load(filepath.Join(dir, "slave.json"))
	master.Commit("g", "orders", 0, 50)
	master.Commit("g", "orders", 1, 5)

	var local Local
	local.Record(slave, "g", "orders", 0, 40, false) // behind the master
	local.Record(slave, "g", "orders", 1, 30, false) // ahead of it
	local.Record(slave, "g", "orders", 1, 20, true)  // forward-only: not taken
	pending := local.Pending()
	if want := (Map{Key("orders", "g"): {0: 40, 1: 30}}); !reflect.DeepEqual(pending, want) {
		t.Fatalf("pending %v, want %v", pending, want)
	}
	if n := master.MergeLarger(pending); n != 1 {
		t.Fatalf("master took %d offsets, want 1", n)
	}
	if got := master.Queues("g", "orders"); !reflect.DeepEqual(got, map[int32]int64{0: 50, 1: 30}) {
		t.Fatalf("master after the merge %v", got)
	}

	// A commit to the slave while the master's answer is on its way.
	local.Record(slave, "g", "orders", 2, 7, false)
	local.Adopt(slave, master.Snapshot())
	if got := slave.Queues("g", "orders"); !reflect.DeepEqual(got, map[int32]int64{0: 50, 1: 30, 2: 7}) {
		t.Fatalf("slave after adopting %v", got)
	}
	if got := local.Pending(); !reflect.DeepEqual(got, Map{Key("orders", "g"): {2: 7}}) {
		t.Fatalf("still pending %v", got)
	}
	// A reset on the master reaches the slave as it is.
	master.Commit("g", "orders", 0, 3)
	local.Adopt(slave, master.Snapshot())
	if got := slave.Query("g", "orders", 0); got != 3 {
		t.Fatalf("reset offset %d on the slave", got)
	}
}
