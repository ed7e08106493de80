package broker

import (
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Queue names one queue of a topic.
type Queue struct {
	Topic string
	ID    int32
}

// QueueOffset is a consumer offset of one queue.
type QueueOffset struct {
	Queue
	Offset int64
}

func validGroup(group string) error {
	if err := message.ValidateGroup(group); err != nil {
		return errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	return nil
}

// ConsumerList returns the sorted client ids of a group's connected
// consumers.
func (b *Broker) ConsumerList(group string) ([]string, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	ids := b.clients.members(group)
	if ids == nil && !b.clients.known(group) {
		return nil, errcode.Errorf(errcode.SubscriptionGroupMissing, "consumer group %s has no connected client", group)
	}
	return ids, nil
}

// CommitOffsets stores a group's consumer offsets. Offsets of topics this
// broker does not know are skipped (a topic deleted while a consumer still
// held it), and the call fails only when none is known. A slave takes them
// all: the topic may be created on the master a moment before the slave's
// metadata sync brings it.
func (b *Broker) CommitOffsets(group string, offsets []QueueOffset) error {
	if err := validGroup(group); err != nil {
		return err
	}
	for _, o := range offsets {
		if o.Offset < 0 {
			return errcode.Errorf(errcode.InvalidParameter, "negative offset %d", o.Offset)
		}
	}
	master := b.IsMaster()
	var unknown string
	committed := 0
	for _, o := range offsets {
		if _, ok := b.topics.get(o.Topic); !ok && master {
			unknown = o.Topic
			continue
		}
		b.commitOffset(group, o.Topic, o.ID, o.Offset)
		committed++
	}
	if committed == 0 && unknown != "" {
		return errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", unknown, b.opts.BrokerName)
	}
	return nil
}

// QueryOffset returns a group's consumer offset of a queue (−1: none).
func (b *Broker) QueryOffset(group, topic string, queueID int32) (int64, error) {
	if err := validGroup(group); err != nil {
		return 0, err
	}
	return b.offsets.Query(group, topic, queueID), nil
}

// LockQueues takes or renews orderly-consumption locks of a group's queues
// for a client and returns those it now holds.
func (b *Broker) LockQueues(group, clientID string, queues []Queue) ([]Queue, error) {
	if message.ValidateGroup(group) != nil || clientID == "" {
		return nil, errcode.Errorf(errcode.InvalidParameter, "lock needs a valid group and a client id")
	}
	return b.locks.lock(group, clientID, queues, time.Now()), nil
}

// UnlockQueues releases the locks a client holds.
func (b *Broker) UnlockQueues(group, clientID string, queues []Queue) {
	b.locks.unlock(group, clientID, queues)
}

// ConsumerGroups describes every consumer group this broker knows: those
// with connected clients and those with stored offsets only.
func (b *Broker) ConsumerGroups() []GroupInfo {
	groups := b.clients.groupList()
	seen := make(map[string]bool, len(groups))
	for _, g := range groups {
		seen[g.Group] = true
	}
	for _, g := range b.offsets.Groups() {
		if !seen[g] {
			groups = append(groups, GroupInfo{Group: g})
		}
	}
	return groups
}

// QueueStats is one queue's progress for a group.
type QueueStats struct {
	Queue
	BrokerOffset, ConsumerOffset int64
	LastTimestamp                int64
}

// ConsumeStats reports a group's progress on a topic, or (topic "") on
// every topic it consumes, its retry and dead-letter topics included.
func (b *Broker) ConsumeStats(group, topic string) ([]QueueStats, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	topics := []string{topic}
	if topic == "" {
		seen := make(map[string]bool)
		topics = topics[:0]
		for _, t := range append(append(b.offsets.TopicsOf(group), b.clients.subscribedTopics(group)...), b.retry.GroupTopics(group)...) {
			if !seen[t] {
				seen[t] = true
				topics = append(topics, t)
			}
		}
	}
	var out []QueueStats
	for _, t := range topics {
		tc, ok := b.topics.get(t)
		if !ok {
			if topic != "" {
				return nil, errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", t, b.opts.BrokerName)
			}
			continue
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			_, maxOff := b.store.QueueOffsets(t, q)
			out = append(out, QueueStats{Queue: Queue{t, q}, BrokerOffset: maxOff,
				ConsumerOffset: b.offsets.Query(group, t, q), LastTimestamp: b.lastStoreTime(t, q)})
		}
	}
	return out, nil
}
