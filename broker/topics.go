package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// Topic permissions (RocketMQ's PermName).
const (
	PermPriority  = topic.PermPriority
	PermRead      = topic.PermRead
	PermWrite     = topic.PermWrite
	PermInherit   = topic.PermInherit
	PermReadWrite = topic.PermReadWrite
)

// TopicConfig is one topic as this broker serves it.
type TopicConfig = topic.Config

// dataVersion changes with every change of the topic table.
type dataVersion = topic.DataVersion

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
	out, _ := t.snapshot()
	return out
}

// snapshot returns the topics and the data version that counts exactly
// them, read in one critical section: a version read apart from the
// topics could count a topic the list lacks, and a NameServer (or a slave)
// that stored that version would never take the topic.
func (t *topicTable) snapshot() ([]TopicConfig, dataVersion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]TopicConfig, 0, len(t.topics))
	for _, c := range t.topics {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, t.version
}

func (t *topicTable) dataVersion() dataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// validateTopicConfig checks a topic definition.
func validateTopicConfig(c *TopicConfig) error {
	if err := message.ValidateTopic(c.Name); err != nil {
		return errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	if c.ReadQueueNums <= 0 || c.WriteQueueNums <= 0 || c.ReadQueueNums > 1024 || c.WriteQueueNums > 1024 {
		return errcode.Errorf(errcode.InvalidParameter, "topic %s: queue counts %d/%d must be in 1..1024", c.Name, c.ReadQueueNums, c.WriteQueueNums)
	}
	if c.Perm&^(PermPriority|PermRead|PermWrite|PermInherit) != 0 {
		return errcode.Errorf(errcode.InvalidParameter, "topic %s: unknown permission bits %#x", c.Name, c.Perm)
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
		return errcode.Errorf(errcode.TopicExistAlready, "topic %s already exists", c.Name)
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

// bumpVersion gives the table a new data version (the topics unchanged)
// and persists it: the NameServers then take the topics again at the next
// registration (the broker's permission changed).
func (t *topicTable) bumpVersion() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bumpLocked()
	return t.persistLocked()
}

func (t *topicTable) bumpLocked() {
	t.version.Counter++
	t.version.Timestamp = time.Now().UnixMilli()
}

// replaceAll makes the table exactly topics with version v (a slave taking
// its master's table) and reports the topics that went away.
func (t *topicTable) replaceAll(topics []TopicConfig, v dataVersion) (removed []string, changed bool, err error) {
	next := make(map[string]*TopicConfig, len(topics))
	for i := range topics {
		c := topics[i]
		if err := validateTopicConfig(&c); err != nil {
			return nil, false, err
		}
		next[c.Name] = &c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.version == v && reflect.DeepEqual(t.topics, next) {
		return nil, false, nil
	}
	for name := range t.topics {
		if _, ok := next[name]; !ok {
			removed = append(removed, name)
		}
	}
	prev, prevV := t.topics, t.version
	t.topics, t.version = next, v
	if err := t.persistLocked(); err != nil {
		t.topics, t.version = prev, prevV
		return nil, false, err
	}
	return removed, true, nil
}

// CreateTopic creates a topic, or changes it when update is set (a missing
// permission means read-write). Only a master takes topic changes; the
// NameServers learn of them at once. A topic of the system is refused
// (topic.CheckChange): the broker makes its own with the table's put.
func (b *Broker) CreateTopic(tc TopicConfig, update bool) error {
	if err := b.checkWritable(); err != nil {
		return err
	}
	if tc.Perm == 0 {
		tc.Perm = PermReadWrite
	}
	if err := topic.CheckChange(tc.Name); err != nil {
		return err
	}
	if err := b.topics.put(tc, update); err != nil {
		return err
	}
	b.log.Info("topic saved", zap.String("topic", tc.Name), zap.Int32("read", tc.ReadQueueNums),
		zap.Int32("write", tc.WriteQueueNums), zap.Int32("perm", tc.Perm), zap.Bool("update", update))
	b.reg.trigger()
	return b.pushMetadata()
}

// DeleteTopic deletes a topic with its queues and consumer offsets. A
// topic of the system is refused (topic.CheckChange).
func (b *Broker) DeleteTopic(name string) error {
	if err := b.checkWritable(); err != nil {
		return err
	}
	if err := topic.CheckChange(name); err != nil {
		return err
	}
	existed, err := b.topics.remove(name)
	if err != nil {
		return err
	}
	if !existed {
		return errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", name, b.opts.BrokerName)
	}
	b.offsets.RemoveTopic(name)
	if err := b.store.DeleteTopic(name); err != nil {
		return storeError(err)
	}
	b.reg.trigger()
	return b.pushMetadata()
}

// TopicConfigs lists the topics this broker serves, by name.
func (b *Broker) TopicConfigs() []TopicConfig { return b.topics.all() }

// ensureAutoCreateTopic gives a master that creates topics on first send
// the topic TBW102, as RocketMQ's broker has it: RocketMQ's producers send
// a message for a topic without a route through TBW102's route, and the
// broker then creates the topic. Clients cannot create TBW102 themselves
// (it is a topic of the system); one kept from before stays.
func (b *Broker) ensureAutoCreateTopic() {
	if !b.opts.AutoCreateTopic || b.checkWritable() != nil {
		return
	}
	name := message.AutoCreateTopic
	if _, ok := b.topics.get(name); ok {
		return
	}
	n := int32(b.opts.DefaultQueueNums)
	if err := b.topics.put(TopicConfig{Name: name, ReadQueueNums: n, WriteQueueNums: n, Perm: PermReadWrite | PermInherit}, false); err != nil {
		if !errors.Is(err, errcode.ErrTopicExists) {
			b.log.Warn("auto-create topic not created", zap.String("topic", name), zap.Error(err))
		}
		return
	}
	b.reg.trigger()
}
