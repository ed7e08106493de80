package broker

import (
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// ViewMessage returns the stored record of a message, by its offset
// message id when msgID is set, else at a CommitLog offset.
func (b *Broker) ViewMessage(msgID string, commitLogOffset int64) ([]byte, error) {
	var rec []byte
	var err error
	if msgID != "" {
		var m *message.Ext
		if m, err = b.store.LookupByMsgID(msgID); err == nil {
			rec, err = b.store.ReadRecord(m.PhysicalOffset)
		}
	} else {
		rec, err = b.store.ReadRecord(commitLogOffset)
	}
	if err != nil {
		return nil, errcode.Errorf(errcode.QueryNotFound, "no message %s at offset %d: %v", msgID, commitLogOffset, err)
	}
	return rec, nil
}

// QueryMessage returns the stored records of up to max messages of topic
// with a key (a KEYS value or the unique id) stored between beginMS and
// endMS (endMS ≤ 0: up to now).
func (b *Broker) QueryMessage(topic, key string, beginMS, endMS int64, max int) ([][]byte, error) {
	if err := message.ValidateTopic(topic); err != nil {
		return nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	if key == "" {
		return nil, errcode.Errorf(errcode.InvalidParameter, "query needs a key")
	}
	if endMS <= 0 {
		endMS = time.Now().UnixMilli() + 1000
	}
	msgs, err := b.store.QueryByKey(topic, key, beginMS, endMS, max)
	if err != nil {
		return nil, storeError(err)
	}
	var recs [][]byte
	for _, m := range msgs {
		if rec, err := b.store.ReadRecord(m.PhysicalOffset); err == nil {
			recs = append(recs, rec)
		}
	}
	if len(recs) == 0 {
		return nil, errcode.Errorf(errcode.QueryNotFound, "no message of %s with key %s", topic, key)
	}
	return recs, nil
}

// QueueState is a queue's offsets and the store time of its newest message.
type QueueState struct {
	MinOffset, MaxOffset int64
	LastStoreTimestamp   int64 // ms; 0 for an empty queue
}

// QueueState reports a queue of a topic this broker serves.
func (b *Broker) QueueState(topic string, queueID int32) (QueueState, error) {
	if _, err := b.topic(topic); err != nil {
		return QueueState{}, err
	}
	minOff, maxOff := b.store.QueueOffsets(topic, queueID)
	return QueueState{MinOffset: minOff, MaxOffset: maxOff, LastStoreTimestamp: b.lastStoreTime(topic, queueID)}, nil
}

// SearchOffset returns the offset of a queue's first message stored at or
// after ts (ms).
func (b *Broker) SearchOffset(topic string, queueID int32, ts int64) (int64, error) {
	if _, err := b.topic(topic); err != nil {
		return 0, err
	}
	off, err := b.store.OffsetForTime(topic, queueID, ts)
	if err != nil {
		return 0, storeError(err)
	}
	return off, nil
}

// topic returns a topic's configuration, or TOPIC_NOT_EXIST.
func (b *Broker) topic(name string) (TopicConfig, error) {
	tc, ok := b.topics.get(name)
	if !ok {
		return TopicConfig{}, errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", name, b.opts.BrokerName)
	}
	return tc, nil
}
