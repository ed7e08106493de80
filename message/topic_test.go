package message

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"TopicTest", true},
		{"a", true},
		{"A-Z_a-z_0-9", true},
		{"%", true},
		{"|", true},
		{"ns%topic|x", true},
		{strings.Repeat("a", 127), true},
		{strings.Repeat("a", 128), false},
		{RetryTopic("g"), true},
		{DLQTopic("g"), true},
		{RetryTopicPrefix + strings.Repeat("g", 255-len(RetryTopicPrefix)), true},
		{RetryTopicPrefix + strings.Repeat("g", 256-len(RetryTopicPrefix)), false},
		{DLQTopicPrefix + strings.Repeat("g", 255-len(DLQTopicPrefix)), true},
		{DLQTopicPrefix + strings.Repeat("g", 256-len(DLQTopicPrefix)), false},
		{"x" + RetryTopicPrefix + strings.Repeat("g", 150), false}, // prefix must lead
		{ScheduleTopic, true},
		{TransHalfTopic, true},
		{"", false},
		{"a b", false},
		{" ", false},
		{"a/b", false},
		{"a.b", false},
		{"a:b", false},
		{"a*b", false},
		{"a\x00", false},
		{"a\x01b", false},
		{"topic\n", false},
		{"é", false},
		{"中文", false},
		{strings.Repeat("é", 10), false},
	} {
		err := ValidateTopic(tc.topic)
		if tc.ok && err != nil {
			t.Errorf("ValidateTopic(%q) = %v, want nil", tc.topic, err)
		}
		if !tc.ok && !errors.Is(err, ErrBadTopic) {
			t.Errorf("ValidateTopic(%q) = %v, want ErrBadTopic", tc.topic, err)
		}
	}
}

func TestValidateGroup(t *testing.T) {
	for _, tc := range []struct {
		group string
		ok    bool
	}{
		{"please_rename_unique_group_name", true},
		{"g", true},
		{"ns%group|1-2", true},
		{strings.Repeat("g", 120), true},
		{strings.Repeat("g", 121), false},
		{"", false},
		{"group name", false},
		{"a/b", false},
		{"a.b", false},
		{"grüppe", false},
		{"g\t", false},
	} {
		err := ValidateGroup(tc.group)
		if tc.ok && err != nil {
			t.Errorf("ValidateGroup(%q) = %v, want nil", tc.group, err)
		}
		if !tc.ok && !errors.Is(err, ErrBadGroup) {
			t.Errorf("ValidateGroup(%q) = %v, want ErrBadGroup", tc.group, err)
		}
	}
	// Every valid group gives valid retry and DLQ topics.
	g := strings.Repeat("g", MaxGroupLen)
	if err := ValidateTopic(RetryTopic(g)); err != nil {
		t.Errorf("retry topic of the longest group: %v", err)
	}
	if err := ValidateTopic(DLQTopic(g)); err != nil {
		t.Errorf("DLQ topic of the longest group: %v", err)
	}
}

// TestValidateNameReportsCharacter: an illegal name is reported by its
// first illegal character, decoded, with its byte offset — not by the
// first byte of a multi-byte character.
func TestValidateNameReportsCharacter(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"ünï", `illegal character 'ü' (U+00FC) at byte 0`},
		{"abcï", `illegal character 'ï' (U+00EF) at byte 3`},
		{"a.b", `illegal character '.' (U+002E) at byte 1`},
		{"tab\there", `illegal character '\t' (U+0009) at byte 3`},
		{"ok😀", `illegal character '😀' (U+1F600) at byte 2`},
		{"a\xffb", `invalid UTF-8 byte 0xFF at byte 1`},
	} {
		for _, err := range []error{ValidateTopic(tc.name), ValidateGroup(tc.name)} {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate %q = %v, want it to contain %q", tc.name, err, tc.want)
			}
		}
	}
}

func TestRetryAndDLQTopics(t *testing.T) {
	if got := RetryTopic("cg"); got != "%RETRY%cg" {
		t.Errorf("RetryTopic = %q", got)
	}
	if got := DLQTopic("cg"); got != "%DLQ%cg" {
		t.Errorf("DLQTopic = %q", got)
	}
	for _, tc := range []struct {
		topic      string
		retry, dlq bool
	}{
		{RetryTopic("cg"), true, false},
		{DLQTopic("cg"), false, true},
		{"%RETRY%", true, false},
		{"%DLQ%", false, true},
		{"TopicTest", false, false},
		{"%retry%cg", false, false},
		{"x%RETRY%cg", false, false},
		{"%RETRY", false, false},
		{"%DLQ", false, false},
		{"", false, false},
	} {
		if got := IsRetryTopic(tc.topic); got != tc.retry {
			t.Errorf("IsRetryTopic(%q) = %v", tc.topic, got)
		}
		if got := IsDLQTopic(tc.topic); got != tc.dlq {
			t.Errorf("IsDLQTopic(%q) = %v", tc.topic, got)
		}
	}
}

func TestIsSystemTopic(t *testing.T) {
	for _, topic := range []string{"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
		"TBW102", "rmq_sys_DLQ_REPLAYED", "rmq_sys_POP_LOG", "rmq_sys_wheel_timer", "rmq_sys_", "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_anything",
		"SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"} {
		if !IsSystemTopic(topic) {
			t.Errorf("IsSystemTopic(%q) = false", topic)
		}
	}
	for _, topic := range []string{"", "TopicTest", "schedule_topic_xxxx", RetryTopic("g"), DLQTopic("g"), "tbw102", "TBW1020",
		"rmq_sys", "Rmq_Sys_x", "my_rmq_sys_x", "BenchmarkTest", RetryTopic("rmq_sys_g")} {
		if IsSystemTopic(topic) {
			t.Errorf("IsSystemTopic(%q) = true", topic)
		}
	}
}

func TestDispatchable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tran       int32
		dispatched bool
	}{
		{"not transactional", SysFlagTransNotType, true},
		{"prepared", SysFlagTransPrepared, false},
		{"commit", SysFlagTransCommit, true},
		{"rollback", SysFlagTransRollback, false},
	} {
		// Other bits do not matter.
		for _, other := range []int32{0, SysFlagCompressed, SysFlagMultiTags, SysFlagBornHostV6 | SysFlagStoreHostV6,
			SysFlagNeedUnwrap | SysFlagInnerBatch, 3 << 8, -1 &^ 0xC} {
			sf := tc.tran | other
			if got := TransactionType(sf); got != tc.tran {
				t.Errorf("%s|%#x: TransactionType = %#x, want %#x", tc.name, other, got, tc.tran)
			}
			if got := Dispatchable(sf); got != tc.dispatched {
				t.Errorf("%s|%#x: Dispatchable = %v, want %v", tc.name, other, got, tc.dispatched)
			}
		}
	}
}

func TestSysFlagValues(t *testing.T) {
	// RocketMQ's MessageSysFlag.
	for _, tc := range []struct {
		got, want int32
	}{
		{SysFlagCompressed, 0x1}, {SysFlagMultiTags, 0x2}, {SysFlagTransNotType, 0},
		{SysFlagTransPrepared, 0x4}, {SysFlagTransCommit, 0x8}, {SysFlagTransRollback, 0xC},
		{SysFlagBornHostV6, 0x10}, {SysFlagStoreHostV6, 0x20}, {SysFlagNeedUnwrap, 0x40}, {SysFlagInnerBatch, 0x80},
	} {
		if tc.got != tc.want {
			t.Errorf("sysflag constant %#x, want %#x", tc.got, tc.want)
		}
	}
}
