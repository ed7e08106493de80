package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Topic permissions (RocketMQ's PermName).
const (
	PermPriority  int32 = 8
	PermRead      int32 = 4
	PermWrite     int32 = 2
	PermInherit   int32 = 1
	PermReadWrite       = PermRead | PermWrite
)

// TopicConfig is one topic as this broker serves it.
type TopicConfig struct {
	Name           string            `json:"topicName"`
	ReadQueueNums  int32             `json:"readQueueNums"`
	WriteQueueNums int32             `json:"writeQueueNums"`
	Perm           int32             `json:"perm"`
	Order          bool              `json:"order"`
	TopicSysFlag   int32             `json:"topicSysFlag"`
	Attributes     map[string]string `json:"attributes,omitempty"`
}

// Readable and Writable report the topic's permissions.
func (t *TopicConfig) Readable() bool { return t.Perm&PermRead != 0 }

// Writable reports whether sends are accepted.
func (t *TopicConfig) Writable() bool { return t.Perm&PermWrite != 0 }

func (t *TopicConfig) toProto() *pb.TopicConfig {
	return &pb.TopicConfig{Name: t.Name, ReadQueueNums: t.ReadQueueNums, WriteQueueNums: t.WriteQueueNums,
		Perm: t.Perm, Order: t.Order, TopicSysFlag: t.TopicSysFlag, Attributes: t.Attributes}
}

func topicFromProto(p *pb.TopicConfig) TopicConfig {
	return TopicConfig{Name: p.Name, ReadQueueNums: p.ReadQueueNums, WriteQueueNums: p.WriteQueueNums,
		Perm: p.Perm, Order: p.Order, TopicSysFlag: p.TopicSysFlag, Attributes: p.Attributes}
}

// dataVersion changes with every change of the topic table.
type dataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// topicTable holds the topics, persisted to config/topics.json.
type topicTable struct {
	mu      sync.RWMutex
	path    string
	topics  map[string]*TopicConfig
	version dataVersion
}

type topicsFile struct {
	Topics      map[string]*TopicConfig `json:"topicConfigTable"`
	DataVersion dataVersion             `json:"dataVersion"`
}

func loadTopics(path string) (*topicTable, error) {
	t := &topicTable{path: path, topics: make(map[string]*TopicConfig)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.version = dataVersion{Timestamp: time.Now().UnixMilli()}
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load topics: %w", err)
	}
	var f topicsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("load topics from %s: %w", path, err)
	}
	for name, c := range f.Topics {
		if c == nil || c.Name != name {
			return nil, fmt.Errorf("load topics from %s: entry %q is malformed", path, name)
		}
		t.topics[name] = c
	}
	t.version = f.DataVersion
	return t, nil
}

// persistLocked writes the table; t.mu must be held.
func (t *topicTable) persistLocked() error {
	b, err := json.MarshalIndent(topicsFile{Topics: t.topics, DataVersion: t.version}, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(t.path, b, 0o644)
}

func (t *topicTable) get(name string) (TopicConfig, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.topics[name]
	if !ok {
		return TopicConfig{}, false
	}
	return *c, true
}

func (t *topicTable) all() []TopicConfig {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]TopicConfig, 0, len(t.topics))
	for _, c := range t.topics {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (t *topicTable) dataVersion() dataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// validateTopicConfig checks a topic definition.
func validateTopicConfig(c *TopicConfig) error {
	if err := message.ValidateTopic(c.Name); err != nil {
		return wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if c.ReadQueueNums <= 0 || c.WriteQueueNums <= 0 || c.ReadQueueNums > 1024 || c.WriteQueueNums > 1024 {
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "topic %s: queue counts %d/%d must be in 1..1024", c.Name, c.ReadQueueNums, c.WriteQueueNums)
	}
	if c.Perm&^(PermPriority|PermRead|PermWrite|PermInherit) != 0 {
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "topic %s: unknown permission bits %#x", c.Name, c.Perm)
	}
	return nil
}

// put creates (or, with update, replaces) a topic and persists the table.
func (t *topicTable) put(c TopicConfig, update bool) error {
	if err := validateTopicConfig(&c); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.topics[c.Name]; ok && !update {
		return wire.Errorf(pb.Code_TOPIC_EXIST_ALREADY, "topic %s already exists", c.Name)
	}
	prev := t.topics[c.Name]
	t.topics[c.Name] = &c
	t.bumpLocked()
	if err := t.persistLocked(); err != nil {
		if prev == nil {
			delete(t.topics, c.Name)
		} else {
			t.topics[c.Name] = prev
		}
		return fmt.Errorf("persist topics: %w", err)
	}
	return nil
}

// remove deletes a topic; it reports whether the topic existed.
func (t *topicTable) remove(name string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.topics[name]
	if !ok {
		return false, nil
	}
	delete(t.topics, name)
	t.bumpLocked()
	if err := t.persistLocked(); err != nil {
		t.topics[name] = prev
		return false, fmt.Errorf("persist topics: %w", err)
	}
	return true, nil
}

func (t *topicTable) bumpLocked() {
	t.version.Counter++
	t.version.Timestamp = time.Now().UnixMilli()
}
