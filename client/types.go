package client

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/message"
)

// Message is what a producer sends.
type Message struct {
	Topic string
	// Tag is one tag consumers can filter on (property TAGS).
	Tag string
	// Keys are indexed for lookup by key (property KEYS, joined by " ");
	// a key must not contain a space.
	Keys []string
	Body []byte
	// Properties are user properties; names used by the system (TAGS,
	// KEYS, UNIQ_KEY, __SHARDINGKEY) are overwritten by the fields above.
	Properties map[string]string
	// ShardingKey routes ordered messages: messages with the same key go to
	// the same queue (property __SHARDINGKEY).
	ShardingKey string
	// UniqueID, on a send, is the id to send the message with (property
	// UNIQ_KEY; its MsgID). Empty: the producer makes one. The producer's
	// retries of a send keep its id, and a broker stores the sends of one
	// id within its deduplication window once (two minutes by default), so
	// an id the application derives from its own data makes a resend after a
	// crash safe too. Unset on consumed messages: see MessageExt.MsgID.
	UniqueID string
}

// MessageExt is a consumed or looked-up message: the Message plus what the
// producer and broker recorded about it. Its Body shares one buffer with the
// other messages that arrived in the same answer (each its own part of it,
// capped, so an append copies): keeping one message keeps that buffer; copy
// the body to keep a small part of a large answer for long.
type MessageExt struct {
	Message
	// MsgID is the message id, what RocketMQ's clients call MsgId: the
	// unique id the producer gave the message (property UNIQ_KEY), which
	// its retries and its dead letter keep. A message stored without one
	// (the inner messages of a batch some RocketMQ clients send) has its
	// OffsetMsgID here instead, as in RocketMQ's clients.
	MsgID string
	// OffsetMsgID is the offset message id of this stored copy: its store
	// host and CommitLog offset, as upper-case hex (32 characters for an
	// IPv4 store host). RocketMQ's getOffsetMsgId.
	OffsetMsgID     string
	BrokerName      string
	QueueID         int32
	QueueOffset     int64
	CommitLogOffset int64
	BornTimestamp   time.Time
	StoreTimestamp  time.Time
	ReconsumeTimes  int32
	// StoreHost and BornHost are "ip:port".
	StoreHost string
	BornHost  string
	// StoreSize is the size of the stored record.
	StoreSize int32
}

// Queue returns the queue the message was stored in.
func (m *MessageExt) Queue() MessageQueue {
	return MessageQueue{Topic: m.Topic, BrokerName: m.BrokerName, QueueID: m.QueueID}
}

// SendResult is where a message was stored.
type SendResult struct {
	// MsgID is the message's unique id (UNIQ_KEY), the MsgID consumers
	// see; OffsetMsgID the offset message id of the stored copy (store
	// host + CommitLog offset). RocketMQ's getMsgId and getOffsetMsgId.
	MsgID           string
	OffsetMsgID     string
	BrokerName      string
	QueueID         int32
	QueueOffset     int64
	CommitLogOffset int64
}

// Queue returns the queue the message was stored in.
func (r *SendResult) Queue(topic string) MessageQueue {
	return MessageQueue{Topic: topic, BrokerName: r.BrokerName, QueueID: r.QueueID}
}

// MessageQueue is one queue of a topic on one broker group.
type MessageQueue struct {
	Topic      string
	BrokerName string
	QueueID    int32
}

// String formats the queue as topic@broker#id.
func (q MessageQueue) String() string {
	return fmt.Sprintf("%s@%s#%d", q.Topic, q.BrokerName, q.QueueID)
}

// lessQueue orders queues by topic, broker name and queue id.
func lessQueue(a, b MessageQueue) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.BrokerName != b.BrokerName {
		return a.BrokerName < b.BrokerName
	}
	return a.QueueID < b.QueueID
}

func compareQueue(a, b MessageQueue) int {
	switch {
	case lessQueue(a, b):
		return -1
	case lessQueue(b, a):
		return 1
	}
	return 0
}

// Properties that have their own field in Message or MessageExt.
var fieldProperties = []string{
	message.PropertyTags, message.PropertyKeys, message.PropertyShardingKey, message.PropertyUniqueKey,
}

// extFromRecord decodes a stored record pulled from, or looked up on, the
// broker group brokerName. The body is not copied: rec always comes from an
// answer the client has just decoded and owns, and nothing else uses it.
func extFromRecord(rec []byte, brokerName string) (*MessageExt, error) {
	d := recordDecoder{brokerName: brokerName}
	return d.decode(rec)
}

// recordDecoder decodes the records of one answer (as extFromRecord does
// each). The records of an answer mostly share their topic, store host and
// born host: it makes each of those strings once, not once a record. It
// decodes each record into one scratch Ext, and takes the messages it
// returns from a slab made for the answer (expect).
type recordDecoder struct {
	brokerName          string
	storeHost, bornHost hostString
	scratch             message.Ext
	slab                []MessageExt
}

// expect makes room for n messages in one allocation: a message the
// application keeps keeps the slab of its answer, as it keeps the answer's
// buffer its body is a slice of.
func (d *recordDecoder) expect(n int) { d.slab = make([]MessageExt, n) }

// hostString is the last host formatted, and its string.
type hostString struct {
	ap netip.AddrPort
	s  string
}

// of returns ap as "ip:port", "" when it is not valid.
func (h *hostString) of(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return ""
	}
	if ap != h.ap { // the zero h.ap is not valid: the first call formats
		h.ap, h.s = ap, ap.String()
	}
	return h.s
}

func (d *recordDecoder) decode(rec []byte) (*MessageExt, error) {
	if err := message.DecodeSharedInto(rec, &d.scratch); err != nil {
		return nil, fmt.Errorf("decode record from %s: %w", d.brokerName, err)
	}
	return d.ext(&d.scratch), nil
}

// extFromDecoded converts a decoded record; it takes e's properties over
// (what is not a field of Message stays as its Properties), so e must not
// be used after.
func extFromDecoded(e *message.Ext, brokerName string) *MessageExt {
	d := recordDecoder{brokerName: brokerName}
	return d.ext(e)
}

// ext is extFromDecoded with d's strings.
func (d *recordDecoder) ext(e *message.Ext) *MessageExt {
	props := e.Properties
	var m *MessageExt
	if len(d.slab) > 0 {
		m, d.slab = &d.slab[0], d.slab[1:]
	} else {
		m = new(MessageExt)
	}
	*m = MessageExt{
		Message: Message{
			Topic:       e.Topic,
			Tag:         props[message.PropertyTags],
			Keys:        message.SplitKeys(props[message.PropertyKeys]),
			Body:        e.Body,
			ShardingKey: props[message.PropertyShardingKey],
		},
		MsgID:           props[message.PropertyUniqueKey],
		BrokerName:      d.brokerName,
		QueueID:         e.QueueID,
		QueueOffset:     e.QueueOffset,
		CommitLogOffset: e.PhysicalOffset,
		BornTimestamp:   time.UnixMilli(e.BornTimestamp),
		StoreTimestamp:  time.UnixMilli(e.StoreTimestamp),
		ReconsumeTimes:  e.ReconsumeTimes,
		StoreSize:       e.StoreSize,
		StoreHost:       d.storeHost.of(e.StoreHost),
		BornHost:        d.bornHost.of(e.BornHost),
	}
	if e.StoreHost.IsValid() {
		m.OffsetMsgID = e.MsgID()
	}
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	for _, f := range fieldProperties {
		delete(props, f)
	}
	if len(props) > 0 {
		m.Properties = props
	}
	e.Properties = nil
	return m
}

// uniqKey returns the message's UNIQ_KEY, "" when it was stored without
// one (and MsgID is its offset message id).
func (m *MessageExt) uniqKey() string {
	if m.MsgID == m.OffsetMsgID {
		return ""
	}
	return m.MsgID
}

// size is what the message counts for in flow control.
func (m *MessageExt) size() int64 {
	if m.StoreSize > 0 {
		return int64(m.StoreSize)
	}
	return int64(len(m.Body))
}

// ownProperties is how many properties wireProperties may add to the
// user's: tag, keys, sharding key and unique id.
const ownProperties = 4

// wirePropertiesLen returns what message.ValidPropertiesLen returns for
// wireProperties(m, shardingKey, uniqueID), without building the map: the
// user's properties but those the fields set or remove, then the fields'.
func wirePropertiesLen(m *Message, shardingKey, uniqueID string) (int, error) {
	uid := m.UniqueID
	if uid == "" {
		uid = uniqueID
	}
	n := 0
	for k, v := range m.Properties {
		switch k {
		case message.PropertyTags, message.PropertyKeys, message.PropertyShardingKey:
			continue
		case message.PropertyUniqueKey:
			if uid != "" {
				continue
			}
		}
		l, err := message.ValidPropertyLen(k, v)
		if err != nil {
			return 0, err
		}
		n += l
	}
	own := [...]struct{ name, value string }{
		{message.PropertyTags, m.Tag},
		{message.PropertyShardingKey, shardingKey},
		{message.PropertyUniqueKey, uid},
	}
	for _, p := range own {
		if p.value == "" {
			continue
		}
		l, err := message.ValidPropertyLen(p.name, p.value)
		if err != nil {
			return 0, err
		}
		n += l
	}
	if len(m.Keys) > 0 {
		// KEYS is the keys joined by KeySeparator: checked key by key.
		n += len(message.PropertyKeys) + 2 + len(message.KeySeparator)*(len(m.Keys)-1)
		for _, k := range m.Keys {
			if _, err := message.ValidPropertyLen(message.PropertyKeys, k); err != nil {
				return 0, err
			}
			n += len(k)
		}
	}
	return n, nil
}

// wireProperties builds the properties a message travels with: the user's,
// then the fields that have their own property. It does not modify m. The
// map comes from the maps of sent messages when there is one
// (recycleWireProperties).
func wireProperties(m *Message, shardingKey, uniqueID string) map[string]string {
	var props map[string]string
	if len(m.Properties)+ownProperties <= maxRecycledProperties {
		props, _ = sentProperties.Get().(map[string]string)
	}
	if props == nil {
		props = make(map[string]string, len(m.Properties)+ownProperties)
	}
	for k, v := range m.Properties {
		props[k] = v
	}
	if m.Tag != "" {
		props[message.PropertyTags] = m.Tag
	} else {
		delete(props, message.PropertyTags)
	}
	if len(m.Keys) > 0 {
		props[message.PropertyKeys] = strings.Join(m.Keys, message.KeySeparator)
	} else {
		delete(props, message.PropertyKeys)
	}
	if shardingKey != "" {
		props[message.PropertyShardingKey] = shardingKey
	} else {
		delete(props, message.PropertyShardingKey)
	}
	if m.UniqueID != "" {
		props[message.PropertyUniqueKey] = m.UniqueID
	} else if uniqueID != "" {
		props[message.PropertyUniqueKey] = uniqueID
	}
	return props
}

// sortQueues sorts queues by topic, broker name and queue id.
func sortQueues(qs []MessageQueue) {
	slices.SortFunc(qs, compareQueue)
}
