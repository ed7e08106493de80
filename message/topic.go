package message

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// System topics and prefixes.
const (
	ScheduleTopic      = "SCHEDULE_TOPIC_XXXX"
	TransHalfTopic     = "RMQ_SYS_TRANS_HALF_TOPIC"
	TransOpHalfTopic   = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	TransCheckMaxTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
	// TimerTopic holds messages to be delivered at an arbitrary time
	// (TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC) until they are due;
	// the name is RocketMQ 5's.
	TimerTopic = "rmq_sys_wheel_timer"
	// PopLogTopic holds the POP consumption state changes (broker/pop): one
	// queue, never routed or pulled.
	PopLogTopic = "rmq_sys_POP_LOG"
	// AutoCreateTopic is the topic whose route RocketMQ's producers borrow
	// for a topic that has none yet, so that a broker creating topics on
	// first send (--auto-create-topic) receives the send.
	AutoCreateTopic = "TBW102"
	// SystemTopicPrefix and SystemTopicPrefixUpper begin the names of
	// topics of the system (RocketMQ's rmq_sys_ and RMQ_SYS_ families).
	SystemTopicPrefix      = "rmq_sys_"
	SystemTopicPrefixUpper = "RMQ_SYS_"
	RetryTopicPrefix       = "%RETRY%"
	DLQTopicPrefix         = "%DLQ%"
	MaxUserTopicLen        = 127
	MaxSystemTopicLen      = 255
	MaxGroupLen            = 120
	DefaultMaxBodySize     = 4 << 20
)

// ErrBadTopic reports an illegal topic or group name.
var ErrBadTopic = errors.New("illegal topic name")

// ErrBadGroup reports an illegal consumer or producer group name.
var ErrBadGroup = errors.New("illegal group name")

// RetryTopic returns the retry topic of a consumer group.
func RetryTopic(group string) string { return RetryTopicPrefix + group }

// DLQTopic returns the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return DLQTopicPrefix + group }

// IsRetryTopic reports whether topic is a %RETRY% topic.
func IsRetryTopic(topic string) bool { return strings.HasPrefix(topic, RetryTopicPrefix) }

// IsDLQTopic reports whether topic is a %DLQ% topic.
func IsDLQTopic(topic string) bool { return strings.HasPrefix(topic, DLQTopicPrefix) }

// IsSystemTopic reports whether topic is one the system owns: every name
// beginning with rmq_sys_ or RMQ_SYS_ (the half-message, timer, POP log and
// replay-mark topics among them), TBW102, SCHEDULE_TOPIC_XXXX,
// TRANS_CHECK_MAX_TIME_TOPIC and the other names RocketMQ's broker keeps
// for itself (SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, CHECKPOINT_TOPIC), so
// that a RocketMQ tool sees the same set. Retry and dead-letter topics are
// not system topics: they belong to their consumer group (see
// broker/topic for who may write them).
func IsSystemTopic(topic string) bool {
	switch topic {
	case ScheduleTopic, TransCheckMaxTopic, AutoCreateTopic,
		"SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC":
		return true
	}
	return strings.HasPrefix(topic, SystemTopicPrefix) || strings.HasPrefix(topic, SystemTopicPrefixUpper)
}

func legalNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '%' || c == '|'
}

// illegalChar describes the first character of s outside the name
// alphabet ("" when there is none): the character itself, not its first
// byte, and its byte offset.
func illegalChar(s string) string {
	for i := 0; i < len(s); i++ {
		if legalNameChar(s[i]) {
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Sprintf("invalid UTF-8 byte 0x%02X at byte %d", s[i], i)
		}
		return fmt.Sprintf("illegal character %q (%U) at byte %d", r, r, i)
	}
	return ""
}

// ValidateTopic checks a topic name: characters [A-Za-z0-9_%|-], at most 127
// bytes (255 for retry and DLQ topics).
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty", ErrBadTopic)
	}
	max := MaxUserTopicLen
	if IsRetryTopic(topic) || IsDLQTopic(topic) {
		max = MaxSystemTopicLen
	}
	if len(topic) > max {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadTopic, len(topic), max)
	}
	if bad := illegalChar(topic); bad != "" {
		return fmt.Errorf("%w: %q has %s (allowed: A-Z a-z 0-9 _ - %% |)", ErrBadTopic, topic, bad)
	}
	return nil
}

// ValidateGroup checks a group name: the topic characters, at most 120 bytes.
func ValidateGroup(group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty", ErrBadGroup)
	}
	if len(group) > MaxGroupLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadGroup, len(group), MaxGroupLen)
	}
	if bad := illegalChar(group); bad != "" {
		return fmt.Errorf("%w: %q has %s (allowed: A-Z a-z 0-9 _ - %% |)", ErrBadGroup, group, bad)
	}
	return nil
}
