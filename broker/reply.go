package broker

import (
	"errors"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/errcode"
)

// ReplyTopicSuffix names the topic request-reply replies go to:
// <cluster>_REPLY_TOPIC. RocketMQ's clients build the name from the CLUSTER
// property of the request and its broker creates the topic when it starts.
const ReplyTopicSuffix = "_REPLY_TOPIC"

// ReplyTopic is the reply topic of a cluster.
func ReplyTopic(cluster string) string { return cluster + ReplyTopicSuffix }

// ensureReplyTopic creates the cluster's reply topic (one queue) on a
// master that lacks it, as RocketMQ's broker does, so that a replier's
// producer finds its route. A slave gets it from its master.
func (b *Broker) ensureReplyTopic() {
	if b.checkWritable() != nil {
		return
	}
	name := ReplyTopic(b.opts.Cluster)
	if _, ok := b.topics.get(name); ok {
		return
	}
	if err := b.topics.put(TopicConfig{Name: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: PermReadWrite}, false); err != nil {
		if !errors.Is(err, errcode.ErrTopicExists) {
			b.log.Warn("reply topic not created", zap.String("topic", name), zap.Error(err))
		}
		return
	}
	b.reg.trigger()
	b.repl.TriggerMetadataPush()
}
