package grpcv5_test

import (
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/message"
)

// TestReservedSendsRefused: a RocketMQ 5 client's send to a topic of the
// system is refused ILLEGAL_TOPIC (as RocketMQ's proxy answers), one to a
// dead-letter or retry topic FORBIDDEN (the core's NO_PERMISSION), and
// nothing is written.
func TestReservedSendsRefused(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "%DLQ%g", "")
	createTopic(t, b, "%RETRY%g", "")
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	for _, tc := range []struct {
		topic string
		want  v2.Code
	}{
		{retry.ReplayMarkTopic, v2.Code_ILLEGAL_TOPIC},
		{message.PopLogTopic, v2.Code_ILLEGAL_TOPIC},
		{"rmq_sys_x", v2.Code_ILLEGAL_TOPIC},
		{message.TransHalfTopic, v2.Code_ILLEGAL_TOPIC},
		{"RMQ_SYS_TRACE_TOPIC", v2.Code_ILLEGAL_TOPIC},
		{message.ScheduleTopic, v2.Code_ILLEGAL_TOPIC},
		{message.AutoCreateTopic, v2.Code_ILLEGAL_TOPIC},
		{"%DLQ%g", v2.Code_FORBIDDEN},
		{"%RETRY%g", v2.Code_FORBIDDEN},
	} {
		before := b.Store().CommitLog().MaxOffset()
		resp := send(t, c, ctx, newMessage(tc.topic, "forged"))
		st := resp.GetStatus()
		if len(resp.GetEntries()) == 1 && st.GetCode() == v2.Code_OK {
			st = resp.Entries[0].GetStatus()
		}
		if st.GetCode() != tc.want {
			t.Errorf("send to %s: %v %q, want %v", tc.topic, st.GetCode(), st.GetMessage(), tc.want)
		}
		if after := b.Store().CommitLog().MaxOffset(); after != before {
			t.Errorf("send to %s: CommitLog grew from %d to %d", tc.topic, before, after)
		}
	}
}
