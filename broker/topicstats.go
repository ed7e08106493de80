package broker

import "slices"

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
	return out
}
