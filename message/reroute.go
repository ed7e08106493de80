package message

import (
	"fmt"
	"strconv"
)

// Reroute parks m in a broker system topic's queue (SCHEDULE_TOPIC_XXXX for
// delay levels, the timer topic, RMQ_SYS_TRANS_HALF_TOPIC for half
// messages), remembering the topic and queue it was sent to in REAL_TOPIC
// and REAL_QID. m.Properties must not be nil.
func Reroute(m *Ext, topic string, queueID int32) {
	m.Properties[PropertyRealTopic] = m.Topic
	m.Properties[PropertyRealQueueID] = strconv.Itoa(int(m.QueueID))
	m.Topic = topic
	m.QueueID = queueID
}

// RealDestination reads the topic and queue a rerouted message was sent to.
func RealDestination(m *Ext) (topic string, queueID int32, err error) {
	topic = m.Properties[PropertyRealTopic]
	if topic == "" {
		return "", 0, fmt.Errorf("message at %d of %s has no %s", m.PhysicalOffset, m.Topic, PropertyRealTopic)
	}
	v := m.Properties[PropertyRealQueueID]
	qid, err := strconv.ParseInt(v, 10, 32)
	if err != nil || qid < 0 {
		return "", 0, fmt.Errorf("message at %d of %s has a bad %s %q", m.PhysicalOffset, m.Topic, PropertyRealQueueID, v)
	}
	return topic, int32(qid), nil
}

// Restore is the inverse of Reroute: a new message for the real topic and
// queue, with m's body, flag, sysflag, born fields, reconsume times and
// prepared-transaction offset, and m's properties except REAL_TOPIC,
// REAL_QID and those named in drop. m is not changed.
func Restore(m *Ext, drop ...string) (*Ext, error) {
	topic, qid, err := RealDestination(m)
	if err != nil {
		return nil, err
	}
	props := make(map[string]string, len(m.Properties))
	for k, v := range m.Properties {
		props[k] = v
	}
	delete(props, PropertyRealTopic)
	delete(props, PropertyRealQueueID)
	for _, k := range drop {
		delete(props, k)
	}
	return &Ext{
		Message:                   Message{Topic: topic, Flag: m.Flag, Body: m.Body, Properties: props},
		QueueID:                   qid,
		SysFlag:                   m.SysFlag,
		BornTimestamp:             m.BornTimestamp,
		BornHost:                  m.BornHost,
		ReconsumeTimes:            m.ReconsumeTimes,
		PreparedTransactionOffset: m.PreparedTransactionOffset,
	}, nil
}
