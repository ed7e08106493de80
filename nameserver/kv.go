package nameserver

import (
	"maps"
	"sync"
)

// kvConfig is RocketMQ's NameServer key-value configuration (namespace →
// key → value), which mqadmin writes for ordered topics
// (ORDER_TOPIC_CONFIG). Bolide keeps it in memory only, per NameServer, as
// a convenience for the admin tool: nothing in Bolide reads it, and routes
// never carry an orderTopicConf.
type kvConfig struct {
	mu sync.Mutex // mu protects table
	// table is namespace → key → value.
	table map[string]map[string]string
}

func newKVConfig() *kvConfig {
	return &kvConfig{table: make(map[string]map[string]string)}
}

func (kv *kvConfig) put(namespace, key, value string) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	m := kv.table[namespace]
	if m == nil {
		m = make(map[string]string)
		kv.table[namespace] = m
	}
	m[key] = value
}

func (kv *kvConfig) get(namespace, key string) (string, bool) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	v, ok := kv.table[namespace][key]
	return v, ok
}

func (kv *kvConfig) delete(namespace, key string) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if m := kv.table[namespace]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(kv.table, namespace)
		}
	}
}

// list returns a copy of a namespace, nil when it is empty.
func (kv *kvConfig) list(namespace string) map[string]string {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return maps.Clone(kv.table[namespace])
}
