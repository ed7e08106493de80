// Package subgroup is the broker's table of subscription group
// configurations: what an operator declared about a consumer group
// (RocketMQ's SubscriptionGroupConfig, as mqadmin updateSubGroup sends it),
// persisted to config/subscriptionGroup.json in RocketMQ's shape. A group
// needs no entry to consume. The one declaration that gates consumption is
// ConsumeEnable: a group declared with it false is refused every pull and
// POP receive (ConsumeRefusal), as RocketMQ refuses it.
package subgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Config is one subscription group, with RocketMQ's field names.
type Config struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32             `json:"retryQueueNums"`
	RetryMaxTimes                  int32             `json:"retryMaxTimes"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIDsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32             `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int32             `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes,omitempty"`
	// GroupRetryPolicy is RocketMQ 5's per-group retry backoff (nil: the
	// customized default, DefaultBackoff).
	GroupRetryPolicy *RetryPolicy `json:"groupRetryPolicy,omitempty"`
}

// Default is a group's configuration with RocketMQ's defaults: the fields
// a request leaves out keep these.
func Default(group string) Config {
	return Config{
		GroupName: group, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIDsChangedEnable: true, ConsumeTimeoutMinute: 15,
	}
}

// Table holds the subscription groups, persisted to a file.
type Table struct {
	mu      sync.RWMutex
	path    string
	groups  map[string]*Config
	version topic.DataVersion
}

type file struct {
	Groups      map[string]*Config `json:"subscriptionGroupTable"`
	DataVersion topic.DataVersion  `json:"dataVersion"`
}

// Load reads the table from path; a missing file is an empty table.
func Load(path string) (*Table, error) {
	t := &Table{path: path, groups: make(map[string]*Config)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.version = topic.DataVersion{Timestamp: time.Now().UnixMilli()}
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load subscription groups: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("load subscription groups from %s: %w", path, err)
	}
	for name, c := range f.Groups {
		if c == nil || c.GroupName != name {
			return nil, fmt.Errorf("load subscription groups from %s: entry %q is malformed", path, name)
		}
		t.groups[name] = c
	}
	t.version = f.DataVersion
	return t, nil
}

// Get returns a group's configuration.
func (t *Table) Get(group string) (Config, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.groups[group]
	if !ok {
		return Config{}, false
	}
	return *c, true
}

// ConsumeRefusal is the error a consumer of group gets when the group is
// declared with ConsumeEnable false (nil otherwise, an undeclared group
// included): NO_PERMISSION, as RocketMQ answers "subscription group no
// permission". It reads the table without copying the declaration, so the
// pull path can ask it on every read.
func (t *Table) ConsumeRefusal(group string) error {
	t.mu.RLock()
	c, ok := t.groups[group]
	stopped := ok && !c.ConsumeEnable
	t.mu.RUnlock()
	if !stopped {
		return nil
	}
	return StoppedError(group)
}

// StoppedError is the NO_PERMISSION refusal of a consumer of a group whose
// consumption an operator disabled, naming the command that enables it again.
func StoppedError(group string) error {
	return errcode.Errorf(errcode.NoPermission,
		"consumer group %s is stopped: its consumption was disabled (bolide group update %s --consume-enable)", group, group)
}

// All lists the groups by name, with the table's version.
func (t *Table) All() ([]Config, topic.DataVersion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Config, 0, len(t.groups))
	for _, c := range t.groups {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupName < out[j].GroupName })
	return out, t.version
}

// Put creates or replaces a group's configuration and persists the table.
// The caller validates the group name.
func (t *Table) Put(c Config) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.groups[c.GroupName]
	t.groups[c.GroupName] = &c
	prevV := t.version
	t.bumpLocked()
	if err := t.persistLocked(); err != nil {
		if prev == nil {
			delete(t.groups, c.GroupName)
		} else {
			t.groups[c.GroupName] = prev
		}
		t.version = prevV
		return err
	}
	return nil
}

// Remove deletes a group's configuration; it reports whether there was
// one.
func (t *Table) Remove(group string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.groups[group]
	if !ok {
		return false, nil
	}
	delete(t.groups, group)
	prevV := t.version
	t.bumpLocked()
	if err := t.persistLocked(); err != nil {
		t.groups[group] = prev
		t.version = prevV
		return false, err
	}
	return true, nil
}

func (t *Table) bumpLocked() {
	t.version.Counter++
	t.version.Timestamp = time.Now().UnixMilli()
}

// persistLocked writes the table; t.mu must be held.
func (t *Table) persistLocked() error {
	b, err := json.MarshalIndent(file{Groups: t.groups, DataVersion: t.version}, "", "  ")
	if err != nil {
		return fmt.Errorf("persist subscription groups: %w", err)
	}
	if err := fsutil.WriteFileAtomic(t.path, b, 0o644); err != nil {
		return fmt.Errorf("persist subscription groups: %w", err)
	}
	return nil
}
