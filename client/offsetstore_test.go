package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocalOffsetStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "g.json")
	s, err := newLocalOffsetStore(path, "g")
	if err != nil {
		t.Fatal(err)
	}
	q0 := MessageQueue{Topic: "t", BrokerName: "broker-a", QueueID: 0}
	q1 := MessageQueue{Topic: "t", BrokerName: "broker-b", QueueID: 3}
	q2 := MessageQueue{Topic: "u%x", BrokerName: "broker-a", QueueID: 1}
	if off, _ := s.read(ctx, q0); off != -1 {
		t.Fatalf("empty store read %d, want -1", off)
	}
	if err := s.persist(ctx, nil); err != nil {
		t.Fatalf("persisting nothing: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("nothing to persist must not write a file (%v)", err)
	}
	s.update(q0, 10)
	s.update(q1, 0)
	s.update(q2, 7)
	if err := s.persist(ctx, []MessageQueue{q0, q1}); err != nil {
		t.Fatal(err)
	}
	s.update(q0, 12)

	s2, err := newLocalOffsetStore(path, "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    MessageQueue
		want int64
	}{{q0, 10}, {q1, 0}, {q2, -1}} {
		if got, _ := s2.read(ctx, tc.q); got != tc.want {
			t.Errorf("read %s = %d, want %d", tc.q, got, tc.want)
		}
	}
	// Persisting everything keeps offsets of queues not updated since.
	if err := s.persist(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s3, err := newLocalOffsetStore(path, "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    MessageQueue
		want int64
	}{{q0, 12}, {q1, 0}, {q2, 7}} {
		if got, _ := s3.read(ctx, tc.q); got != tc.want {
			t.Errorf("after second persist: read %s = %d, want %d", tc.q, got, tc.want)
		}
	}
	// A store that only knows one queue keeps the others in the file.
	s3.update(q1, 5)
	if err := s3.persist(ctx, []MessageQueue{q1}); err != nil {
		t.Fatal(err)
	}
	s4, _ := newLocalOffsetStore(path, "g")
	if got, _ := s4.read(ctx, q2); got != 7 {
		t.Errorf("other queue lost: %d", got)
	}
	if got, _ := s4.read(ctx, q1); got != 5 {
		t.Errorf("q1 = %d, want 5", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"group": "g"`) {
		t.Fatalf("file lacks the group: %s", data)
	}
}

func TestLocalOffsetStoreCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newLocalOffsetStore(path, "g"); err == nil {
		t.Fatal("a corrupt offset file must be an error, not a silent reset")
	}
}

func TestMemOffsetsDirty(t *testing.T) {
	m := newMemOffsets()
	q := MessageQueue{Topic: "t", BrokerName: "b", QueueID: 1}
	m.update(q, 3)
	if d := m.dirty(nil); d[q] != 3 {
		t.Fatalf("dirty = %v", d)
	}
	m.markPersisted(map[MessageQueue]int64{q: 3})
	if d := m.dirty(nil); len(d) != 0 {
		t.Fatalf("persisted offset still dirty: %v", d)
	}
	m.update(q, 4)
	if d := m.dirty([]MessageQueue{q}); d[q] != 4 {
		t.Fatalf("changed offset not dirty: %v", d)
	}
	m.forget(q)
	if m.current(q) != -1 || len(m.dirty(nil)) != 0 {
		t.Fatal("forgotten queue still tracked")
	}
}

func TestDefaultOffsetFile(t *testing.T) {
	o := defaultOptions()
	p, err := o.offsetFile("10.0.0.1@DEFAULT", "g/x")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(".bolide", "offsets", "10.0.0.1@DEFAULT", "g_x.json"); !strings.HasSuffix(p, want) {
		t.Fatalf("offset file %q, want suffix %q", p, want)
	}
	o.offsetStoreDir = "/tmp/x"
	if p, _ := o.offsetFile("id", "g"); p != "/tmp/x/g.json" {
		t.Fatalf("offset file with a directory: %q", p)
	}
}
