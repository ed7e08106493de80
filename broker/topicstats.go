package broker

import (
	"slices"
	"strings"

	"github.com/bolide-mq/bolide/message"
)

// TopicStat is one topic on this broker: its queues, permission (as
// configured, not masked by the broker's permission) and declared message
// type, the sums of its queues' min and max offsets, and the latest store
// time over its queues (ms, 0: nothing stored).
type TopicStat struct {
	Topic                      string
	ReadQueues, WriteQueues    int32
	Perm                       int32
	MessageType                string
	MinOffsetSum, MaxOffsetSum int64
	LastStoreTimeMS            int64
}

// TopicStats reports the topics named, or every topic (system ones too)
// when names is empty; unknown names are left out. It reads the queues'
// offsets from memory and, per queue holding messages, the store time of
// its last one (one CommitLog read), so a table of hundreds of topics
// costs one call.
//
// System topics the topic table does not hold (SCHEDULE_TOPIC_XXXX, the
// transaction and POP topics: queues of the store only) are reported from
// the store's queues: queue counts cover their queue ids (delay level L is
// queue L-1), permission 0 (no client reads or writes them) and no
// message type.
func (b *Broker) TopicStats(names []string) []TopicStat {
	topics := b.topics.all()
	if len(names) > 0 {
		topics = slices.DeleteFunc(topics, func(tc TopicConfig) bool { return !slices.Contains(names, tc.Name) })
	}
	out := make([]TopicStat, 0, len(topics))
	for i := range topics {
		tc := &topics[i]
		st := TopicStat{Topic: tc.Name, ReadQueues: tc.ReadQueueNums, WriteQueues: tc.WriteQueueNums,
			Perm: tc.Perm, MessageType: tc.MessageType()}
		for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
			minOff, maxOff := b.store.QueueOffsets(tc.Name, q)
			st.MinOffsetSum += minOff
			st.MaxOffsetSum += maxOff
			if maxOff > minOff {
				st.LastStoreTimeMS = max(st.LastStoreTimeMS, b.lastStoreTime(tc.Name, q))
			}
		}
		out = append(out, st)
	}
	out = append(out, b.storeOnlySystemTopicStats(names)...)
	slices.SortFunc(out, func(x, y TopicStat) int { return strings.Compare(x.Topic, y.Topic) })
	return out
}

// storeOnlySystemTopicStats reports the system topics that have queues in
// the store and no entry in the topic table (those named, or all when names
// is empty).
func (b *Broker) storeOnlySystemTopicStats(names []string) []TopicStat {
	byTopic := map[string]*TopicStat{}
	var out []TopicStat
	for _, q := range b.store.Queues() {
		if !message.IsSystemTopic(q.Topic) || len(names) > 0 && !slices.Contains(names, q.Topic) {
			continue
		}
		st, ok := byTopic[q.Topic]
		if !ok {
			if _, inTable := b.topics.get(q.Topic); inTable {
				continue
			}
			st = &TopicStat{Topic: q.Topic}
			byTopic[q.Topic] = st
		}
		st.ReadQueues = max(st.ReadQueues, q.QueueID+1)
		st.WriteQueues = st.ReadQueues
		st.MinOffsetSum += q.MinOffset
		st.MaxOffsetSum += q.MaxOffset
		if q.MaxOffset > q.MinOffset {
			st.LastStoreTimeMS = max(st.LastStoreTimeMS, b.lastStoreTime(q.Topic, q.QueueID))
		}
	}
	for _, st := range byTopic {
		out = append(out, *st)
	}
	return out
}
