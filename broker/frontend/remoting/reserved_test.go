package remoting_test

import (
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker/retry"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// TestReservedSendsRefused: a RocketMQ client's send to a topic of the
// system, to a dead-letter topic, or to a retry topic other than as a
// consumer's send-back is refused NO_PERMISSION ("... is forbidden", as
// RocketMQ's broker answers), and nothing is written; a consumer's own
// send-back (RETRY_TOPIC set) is taken.
func TestReservedSendsRefused(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "work", 1)
	c := dialBroker(t, b.Addr(), nil)
	invoke(t, c, rmq.HeartBeat, nil, goHeartbeat("10.0.0.1@1", "PG", "CG", "work")) // creates %RETRY%CG
	newTopic(t, b, "%DLQ%CG", 1)
	for _, topic := range []string{retry.ReplayMarkTopic, message.PopLogTopic, "rmq_sys_x", message.TransHalfTopic,
		"RMQ_SYS_TRACE_TOPIC", message.ScheduleTopic, message.AutoCreateTopic, "%DLQ%CG", "%RETRY%CG"} {
		before := b.Store().CommitLog().MaxOffset()
		resp := invoke(t, c, rmq.SendMessage, sendExt("PG", topic, 0, 0, props("UNIQ_KEY", "F1")), []byte("forged"))
		if resp.Code != rmq.NoPermission || !strings.Contains(resp.Remark, "sending message to topic["+topic+"] is forbidden") {
			t.Errorf("send to %s: %d %q", topic, resp.Code, resp.Remark)
		}
		if after := b.Store().CommitLog().MaxOffset(); after != before {
			t.Errorf("send to %s: CommitLog grew from %d to %d", topic, before, after)
		}
	}
	ext := sendExt("CLIENT_INNER_PRODUCER", "%RETRY%CG", 0, 0, props("RETRY_TOPIC", "work", "DELAY", "1", "UNIQ_KEY", "R1"))
	ext["reconsumeTimes"], ext["maxReconsumeTimes"] = "1", "16"
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("retry")); resp.Code != rmq.Success {
		t.Fatalf("consumer's own send-back: %d %q", resp.Code, resp.Remark)
	}
}

// TestReservedTopicsAdmin: mqadmin updateTopic and deleteTopic of a topic
// of the system are refused INVALID_PARAMETER ("conflicts with a system
// topic", as RocketMQ's broker answers), and the topic table is unchanged.
func TestReservedTopicsAdmin(t *testing.T) {
	b, c := adminBroker(t)
	before := len(b.TopicConfigs())
	for _, topic := range []string{retry.ReplayMarkTopic, message.AutoCreateTopic, message.ScheduleTopic, "RMQ_SYS_x"} {
		resp := invoke(t, c, rmq.UpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": "TBW102",
			"readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}, nil)
		if resp.Code != rmq.InvalidParameter || !strings.Contains(resp.Remark, "conflicts with a system topic") {
			t.Errorf("updateTopic %s: %d %q", topic, resp.Code, resp.Remark)
		}
		resp = invoke(t, c, rmq.DeleteTopicInBroker, map[string]string{"topic": topic}, nil)
		if resp.Code != rmq.InvalidParameter {
			t.Errorf("deleteTopic %s: %d %q", topic, resp.Code, resp.Remark)
		}
	}
	if after := len(b.TopicConfigs()); after != before {
		t.Fatalf("%d topics, were %d", after, before)
	}
}
