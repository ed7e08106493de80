package delay

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// LevelOffsets is the progress of the delay levels: for each level the next
// offset of its SCHEDULE_TOPIC_XXXX queue to deliver. It is persisted in
// RocketMQ's config/delayOffset.json format.
type LevelOffsets struct {
	path  string
	mu    sync.Mutex
	table map[int]int64
	dirty bool
}

type levelOffsetsFile struct {
	OffsetTable map[string]int64 `json:"offsetTable"`
}

// LoadLevelOffsets reads path; a missing file is an empty table.
func LoadLevelOffsets(path string) (*LevelOffsets, error) {
	o := &LevelOffsets{path: path, table: make(map[int]int64)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delay offsets: %w", err)
	}
	var f levelOffsetsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("delay offsets: %s: %w", path, err)
	}
	for k, v := range f.OffsetTable {
		level, err := strconv.Atoi(k)
		if err != nil || level <= 0 || v < 0 {
			return nil, fmt.Errorf("delay offsets: %s: bad entry %q: %d", path, k, v)
		}
		o.table[level] = v
	}
	return o, nil
}

// Get returns the next offset of a level (0 if none is recorded).
func (o *LevelOffsets) Get(level int) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.table[level]
}

// Set records the next offset of a level.
func (o *LevelOffsets) Set(level int, off int64) {
	o.mu.Lock()
	if o.table[level] != off {
		o.table[level] = off
		o.dirty = true
	}
	o.mu.Unlock()
}

// Snapshot copies the table (level → next offset).
func (o *LevelOffsets) Snapshot() map[int]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.table)
}

// Adopt takes a master's table (a slave following its master, as
// RocketMQ's slave takes delayOffset.json): every level of t gets t's
// offset; levels t lacks keep theirs. It reports whether anything changed.
func (o *LevelOffsets) Adopt(t map[int]int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	changed := false
	for level, off := range t {
		if level <= 0 || off < 0 {
			continue
		}
		if cur, ok := o.table[level]; !ok || cur != off {
			o.table[level] = off
			changed = true
		}
	}
	o.dirty = o.dirty || changed
	return changed
}

// Persist writes the table (atomically: temp file, fsync, rename, fsync of
// the directory) if it changed since the last write.
func (o *LevelOffsets) Persist() error {
	o.mu.Lock()
	if !o.dirty {
		o.mu.Unlock()
		return nil
	}
	f := levelOffsetsFile{OffsetTable: make(map[string]int64, len(o.table))}
	for k, v := range o.table {
		f.OffsetTable[strconv.Itoa(k)] = v
	}
	o.dirty = false
	o.mu.Unlock()
	b, err := json.Marshal(f)
	if err == nil {
		err = fsutil.WriteFileAtomic(o.path, b, 0o644)
	}
	if err != nil {
		o.mu.Lock()
		o.dirty = true
		o.mu.Unlock()
		return fmt.Errorf("delay offsets: %w", err)
	}
	return nil
}
