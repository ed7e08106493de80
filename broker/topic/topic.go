// Package topic is a topic's configuration as a broker serves it, and the
// version of a broker's topic table. The broker keeps the table (package
// broker); replication copies it from master to slave (broker/replication).
package topic

// Permissions (RocketMQ's PermName).
const (
	PermPriority  int32 = 8
	PermRead      int32 = 4
	PermWrite     int32 = 2
	PermInherit   int32 = 1
	PermReadWrite       = PermRead | PermWrite
)

// Config is one topic as a broker serves it.
type Config struct {
	Name           string            `json:"topicName"`
	ReadQueueNums  int32             `json:"readQueueNums"`
	WriteQueueNums int32             `json:"writeQueueNums"`
	Perm           int32             `json:"perm"`
	Order          bool              `json:"order"`
	TopicSysFlag   int32             `json:"topicSysFlag"`
	Attributes     map[string]string `json:"attributes,omitempty"`
}

// Readable and Writable report the topic's permissions.
func (t *Config) Readable() bool { return t.Perm&PermRead != 0 }

// Writable reports whether sends are accepted.
func (t *Config) Writable() bool { return t.Perm&PermWrite != 0 }

// DataVersion changes with every change of a broker's topic table.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}
