package offsets

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Map is consumer offsets: Key(topic, group) → queue → offset.
type Map map[string]map[int32]int64

// Key is a group's key for a topic in a Map: "topic@group".
func Key(topic, group string) string { return topic + "@" + group }

// SplitKey returns the topic and group of a Map key.
func SplitKey(k string) (topic, group string, ok bool) { return strings.Cut(k, "@") }

// Table holds consumer group offsets, persisted to a file.
type Table struct {
	mu    sync.RWMutex
	path  string
	table Map
	dirty bool
}

type file struct {
	OffsetTable Map `json:"offsetTable"`
}

// Load reads the table from path; a missing file is an empty table.
func Load(path string) (*Table, error) {
	o := &Table{path: path, table: make(Map)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load offsets: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("load offsets from %s: %w", path, err)
	}
	for k, v := range f.OffsetTable {
		if v != nil {
			o.table[k] = v
		}
	}
	return o, nil
}

// Commit records a group's offset for a queue.
func (o *Table) Commit(group, topic string, queueID int32, offset int64) {
	o.Set(group, topic, queueID, offset, false)
}

// Set records a group's offset for a queue; with forwardOnly only if it is
// beyond the one recorded. It reports whether it did.
func (o *Table) Set(group, topic string, queueID int32, offset int64, forwardOnly bool) bool {
	k := Key(topic, group)
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.table[k]
	if cur, ok := m[queueID]; forwardOnly && ok && cur >= offset {
		return false
	}
	if m == nil {
		m = make(map[int32]int64)
		o.table[k] = m
	}
	m[queueID] = offset
	o.dirty = true
	return true
}

// Query returns the committed offset, or -1.
func (o *Table) Query(group, topic string, queueID int32) int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if v, ok := o.table[Key(topic, group)][queueID]; ok {
		return v
	}
	return -1
}

// Queues returns a group's committed offsets for a topic.
func (o *Table) Queues(group, topic string) map[int32]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[int32]int64)
	for q, v := range o.table[Key(topic, group)] {
		out[q] = v
	}
	return out
}

// TopicsOf lists the topics a group has offsets for.
func (o *Table) TopicsOf(group string) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for k := range o.table {
		if t, g, ok := SplitKey(k); ok && g == group {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Groups lists every group with offsets.
func (o *Table) Groups() []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	seen := make(map[string]bool)
	for k := range o.table {
		if _, g, ok := SplitKey(k); ok {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// RemoveTopic forgets every group's offsets for a topic.
func (o *Table) RemoveTopic(topic string) {
	o.mu.Lock()
	for k := range o.table {
		if t, _, ok := SplitKey(k); ok && t == topic {
			delete(o.table, k)
			o.dirty = true
		}
	}
	o.mu.Unlock()
}

// Persist writes the table if it changed since the last write.
func (o *Table) Persist() error {
	o.mu.Lock()
	if !o.dirty {
		o.mu.Unlock()
		return nil
	}
	b, err := json.Marshal(file{OffsetTable: o.table})
	o.dirty = false
	o.mu.Unlock()
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(o.path, b, 0o644); err != nil {
		o.mu.Lock()
		o.dirty = true
		o.mu.Unlock()
		return fmt.Errorf("persist offsets: %w", err)
	}
	return nil
}

// Snapshot copies the table.
func (o *Table) Snapshot() Map {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(Map, len(o.table))
	for k, qs := range o.table {
		out[k] = maps.Clone(qs)
	}
	return out
}

// adopt replaces the table with the master's, keeping a local commit where
// it is larger than the master's offset (or the master has none).
func (o *Table) adopt(master, local Map) {
	t := make(Map, len(master))
	for k, qs := range master {
		t[k] = maps.Clone(qs)
	}
	for k, qs := range local {
		for q, v := range qs {
			if cur, ok := t[k][q]; !ok || v > cur {
				if t[k] == nil {
					t[k] = make(map[int32]int64)
				}
				t[k][q] = v
			}
		}
	}
	o.mu.Lock()
	if !reflect.DeepEqual(o.table, t) {
		o.table = t
		o.dirty = true
	}
	o.mu.Unlock()
}

// MergeLarger takes a slave's offsets where they are larger than the
// master's own (or the master has none) and reports how many it took.
func (o *Table) MergeLarger(in Map) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, qs := range in {
		for q, v := range qs {
			if cur, ok := o.table[k][q]; ok && cur >= v {
				continue
			}
			if o.table[k] == nil {
				o.table[k] = make(map[int32]int64)
			}
			o.table[k][q] = v
			o.dirty = true
			n++
		}
	}
	return n
}
