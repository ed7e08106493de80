package topic

import (
	"testing"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

func TestCheckChange(t *testing.T) {
	for _, name := range []string{"rmq_sys_DLQ_REPLAYED", "rmq_sys_POP_LOG", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
		"TBW102", "SCHEDULE_TOPIC_XXXX", "TRANS_CHECK_MAX_TIME_TOPIC"} {
		if err := CheckChange(name); errcode.Of(err) != errcode.IllegalTopic || !message.IsSystemTopic(name) {
			t.Errorf("CheckChange(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"orders", "%RETRY%g", "%DLQ%g", "tbw102", "rmq_sysx", "BenchmarkTest"} {
		if err := CheckChange(name); err != nil || message.IsSystemTopic(name) {
			t.Errorf("CheckChange(%q) = %v", name, err)
		}
	}
}

func TestCheckSend(t *testing.T) {
	back := map[string]string{message.PropertyRetryTopic: "orders"}
	for _, tc := range []struct {
		topic string
		props map[string]string
		batch bool
		ok    bool
	}{
		{"orders", nil, false, true},
		{"orders", nil, true, true},
		{"%RETRY%g", back, false, true},
		{"%RETRY%g", nil, false, false},
		{"%RETRY%g", map[string]string{"other": "x"}, false, false},
		{"%RETRY%g", back, true, false},
		{"%DLQ%g", back, false, false},
		{"rmq_sys_DLQ_REPLAYED", nil, false, false},
		{"RMQ_SYS_TRANS_HALF_TOPIC", nil, false, false},
		{"TBW102", nil, false, false},
		{"SCHEDULE_TOPIC_XXXX", back, false, false},
	} {
		err := CheckSend(tc.topic, tc.props, tc.batch)
		if tc.ok != (err == nil) || err != nil && errcode.Of(err) != errcode.NoPermission {
			t.Errorf("CheckSend(%q, %v, %v) = %v", tc.topic, tc.props, tc.batch, err)
		}
	}
}
