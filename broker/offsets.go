package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// offsetTable holds consumer group offsets, "topic@group" → queue → offset,
// persisted to config/consumerOffset.json (RocketMQ's layout).
type offsetTable struct {
	mu    sync.RWMutex
	path  string
	table map[string]map[int32]int64
	dirty bool
}

type offsetsFile struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
}

func offsetKey(topic, group string) string { return topic + "@" + group }

func loadOffsets(path string) (*offsetTable, error) {
	o := &offsetTable{path: path, table: make(map[string]map[int32]int64)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load offsets: %w", err)
	}
	var f offsetsFile
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

// commit records a group's offset for a queue.
func (o *offsetTable) commit(group, topic string, queueID int32, offset int64) {
	o.set(group, topic, queueID, offset, false)
}

// set records a group's offset for a queue; with forwardOnly only if it is
// beyond the one recorded. It reports whether it did.
func (o *offsetTable) set(group, topic string, queueID int32, offset int64, forwardOnly bool) bool {
	k := offsetKey(topic, group)
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

// query returns the committed offset, or -1.
func (o *offsetTable) query(group, topic string, queueID int32) int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if v, ok := o.table[offsetKey(topic, group)][queueID]; ok {
		return v
	}
	return -1
}

// queues returns a group's committed offsets for a topic.
func (o *offsetTable) queues(group, topic string) map[int32]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[int32]int64)
	for q, v := range o.table[offsetKey(topic, group)] {
		out[q] = v
	}
	return out
}

// topicsOf lists the topics a group has offsets for.
func (o *offsetTable) topicsOf(group string) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for k := range o.table {
		if t, g, ok := strings.Cut(k, "@"); ok && g == group {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// groups lists every group with offsets.
func (o *offsetTable) groups() []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	seen := make(map[string]bool)
	for k := range o.table {
		if _, g, ok := strings.Cut(k, "@"); ok {
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

// removeTopic forgets every group's offsets for a topic.
func (o *offsetTable) removeTopic(topic string) {
	o.mu.Lock()
	for k := range o.table {
		if t, _, ok := strings.Cut(k, "@"); ok && t == topic {
			delete(o.table, k)
			o.dirty = true
		}
	}
	o.mu.Unlock()
}

// persist writes the table if it changed since the last write.
func (o *offsetTable) persist() error {
	o.mu.Lock()
	if !o.dirty {
		o.mu.Unlock()
		return nil
	}
	b, err := json.Marshal(offsetsFile{OffsetTable: o.table})
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
