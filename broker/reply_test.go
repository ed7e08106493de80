package broker_test

import (
	"testing"

	"github.com/bolide-mq/bolide/broker"
)

// TestReplyTopicCreatedAtStart: a master has its cluster's reply topic
// (one queue) from the start, as RocketMQ's broker has it.
func TestReplyTopicCreatedAtStart(t *testing.T) {
	b, _ := testBroker(t)
	name := broker.ReplyTopic(b.Options().Cluster)
	if name != "DefaultCluster_REPLY_TOPIC" {
		t.Fatalf("reply topic %q", name)
	}
	var found *broker.TopicConfig
	for _, tc := range b.TopicConfigs() {
		if tc.Name == name {
			found = &tc
		}
	}
	if found == nil || found.ReadQueueNums != 1 || found.WriteQueueNums != 1 || found.Perm != broker.PermReadWrite {
		t.Fatalf("reply topic %+v", found)
	}
}
