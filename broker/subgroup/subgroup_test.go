package subgroup

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/topic"
)

func TestTablePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	tab, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := Default("G1")
	c.RetryMaxTimes = 3
	c.ConsumeMessageOrderly = true
	if err := tab.Put(c); err != nil {
		t.Fatal(err)
	}
	if err := tab.Put(Default("G2")); err != nil {
		t.Fatal(err)
	}
	_, v1 := tab.All()
	if existed, err := tab.Remove("G2"); err != nil || !existed {
		t.Fatalf("remove G2: %v %v", existed, err)
	}
	if existed, _ := tab.Remove("nope"); existed {
		t.Fatal("removed a group that was never there")
	}

	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	all, v2 := again.All()
	if len(all) != 1 || !reflect.DeepEqual(all[0], c) {
		t.Fatalf("reloaded %+v, want only %+v", all, c)
	}
	if v2.Counter != v1.Counter+1 {
		t.Fatalf("data version %+v after %+v: one removal should bump it once", v2, v1)
	}
	if got, ok := again.Get("G1"); !ok || got.RetryMaxTimes != 3 {
		t.Fatalf("Get G1 = %+v %v", got, ok)
	}
}

func TestLoadRejectsMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	if err := os.WriteFile(path, []byte(`{"subscriptionGroupTable":{"A":{"groupName":"B"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("an entry whose name differs from its key loaded")
	}
}

func TestPutFailureKeepsTable(t *testing.T) {
	dir := t.TempDir()
	tab, err := Load(filepath.Join(dir, "missing-dir", "subscriptionGroup.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Put(Default("G")); err == nil {
		t.Fatal("put into a directory that does not exist succeeded")
	}
	if _, ok := tab.Get("G"); ok {
		t.Fatal("a group that could not be persisted is in the table")
	}
}

func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	tab, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Put(Default("OLD")); err != nil {
		t.Fatal(err)
	}
	g := Default("G")
	g.ConsumeMessageOrderly = true
	g.GroupRetryPolicy = Customized([]time.Duration{time.Second, 2 * time.Second})
	v := topic.DataVersion{Timestamp: 42, Counter: 7}
	changed, err := tab.Replace([]Config{g}, v)
	if err != nil || !changed {
		t.Fatalf("Replace = %v, %v", changed, err)
	}
	if changed, err := tab.Replace([]Config{g}, v); err != nil || changed {
		t.Fatalf("the same table again: changed %v, %v", changed, err)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	all, got := again.All()
	if len(all) != 1 || !reflect.DeepEqual(all[0], g) || got != v {
		t.Fatalf("reloaded %+v at %+v, want only %+v at %+v", all, got, g, v)
	}
}
