// Package topic is a topic's configuration as a broker serves it, and the
// version of a broker's topic table. The broker keeps the table (package
// broker); replication copies it from master to slave (broker/replication).
package topic

import "strings"

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

// AttrMessageType is the topic attribute that holds its message type, as
// RocketMQ 5 keeps it ("message.type"; mqadmin sets it with
// `updateTopic -a +message.type=FIFO`).
const AttrMessageType = "message.type"

// Message types a topic accepts (RocketMQ 5's TopicMessageType).
const (
	TypeNormal      = "NORMAL"
	TypeFIFO        = "FIFO"
	TypeDelay       = "DELAY"
	TypeTransaction = "TRANSACTION"
	// TypeMixed accepts every type. A topic with no type is mixed: topics
	// made before types existed, or by clients that never name one, keep
	// accepting what they accepted.
	TypeMixed = "MIXED"
)

// MessageTypes lists the types a topic can be given.
var MessageTypes = []string{TypeNormal, TypeFIFO, TypeDelay, TypeTransaction, TypeMixed}

// ParseMessageType returns the canonical (upper-case) type named by s
// ("" is mixed), or false for an unknown one.
func ParseMessageType(s string) (string, bool) {
	if s == "" {
		return TypeMixed, true
	}
	for _, t := range MessageTypes {
		if strings.EqualFold(s, t) {
			return t, true
		}
	}
	return "", false
}

// MessageType is the topic's message type: TypeMixed when it has none.
func (t *Config) MessageType() string {
	mt, ok := ParseMessageType(t.Attributes[AttrMessageType])
	if !ok {
		return TypeMixed
	}
	return mt
}

// Accepts reports whether the topic takes messages of type mt (one of
// TypeNormal, TypeFIFO, TypeDelay, TypeTransaction).
func (t *Config) Accepts(mt string) bool {
	own := t.MessageType()
	return own == TypeMixed || own == mt
}
