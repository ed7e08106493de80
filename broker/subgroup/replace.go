package subgroup

import (
	"fmt"
	"reflect"

	"github.com/bolide-mq/bolide/broker/topic"
)

// Replace makes the table exactly groups with version v (a slave taking its
// master's table) and persists it; it reports whether anything changed.
func (t *Table) Replace(groups []Config, v topic.DataVersion) (bool, error) {
	next := make(map[string]*Config, len(groups))
	for i := range groups {
		c := groups[i]
		if c.GroupName == "" {
			return false, fmt.Errorf("replace subscription groups: a group has no name")
		}
		next[c.GroupName] = &c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.version == v && reflect.DeepEqual(t.groups, next) {
		return false, nil
	}
	prev, prevV := t.groups, t.version
	t.groups, t.version = next, v
	if err := t.persistLocked(); err != nil {
		t.groups, t.version = prev, prevV
		return false, err
	}
	return true, nil
}
