package message

import (
	"net/netip"
	"strings"
)

// Message is what a producer sends: a topic, a body, a user flag and
// properties (tags, keys and everything else travel as properties, as in
// RocketMQ).
type Message struct {
	Topic      string
	Flag       int32
	Body       []byte
	Properties map[string]string
}

// Property returns the value of a property, or "".
func (m *Message) Property(key string) string { return m.Properties[key] }

// SetProperty sets a property, allocating the map on first use.
func (m *Message) SetProperty(key, value string) {
	if m.Properties == nil {
		m.Properties = make(map[string]string, 4)
	}
	m.Properties[key] = value
}

// Tags returns the TAGS property.
func (m *Message) Tags() string { return m.Properties[PropertyTags] }

// Keys returns the values of the KEYS property, split on spaces.
func (m *Message) Keys() []string { return SplitKeys(m.Properties[PropertyKeys]) }

// UniqueID returns the producer-assigned unique id (UNIQ_KEY), or "".
func (m *Message) UniqueID() string { return m.Properties[PropertyUniqueKey] }

// SplitKeys splits a KEYS property value into its keys on KeySeparator (a
// single space, as RocketMQ's IndexService does), dropping empties. Other
// whitespace is part of a key.
func SplitKeys(v string) []string {
	var keys []string
	for v != "" {
		var k string
		k, v, _ = strings.Cut(v, KeySeparator)
		if k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// Ext is a stored message: the Message plus what the producer and broker
// record about it (RocketMQ's MessageExt).
type Ext struct {
	Message
	QueueID                   int32
	StoreSize                 int32
	BodyCRC                   uint32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
}

// MsgID returns the offset message id of a stored message.
func (e *Ext) MsgID() string { return OffsetMsgID(e.StoreHost, e.PhysicalOffset) }

// TagsHash is the ConsumeQueue tag code of a tag: Java's String.hashCode, as
// RocketMQ computes it, widened to int64. An empty tag hashes to 0.
func TagsHash(tags string) int64 { return int64(JavaStringHash(tags)) }

// JavaStringHash computes Java's String.hashCode over the UTF-16 code units of
// s, with the same int32 overflow.
func JavaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
