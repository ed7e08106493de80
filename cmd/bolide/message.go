package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bolide-mq/bolide/client"
)

// messageJSON is a message as consume, msg get, msg query and msg at print
// it with -o json. Timestamps are RFC 3339 with milliseconds in UTC. The
// body is the text of the body when it is valid UTF-8; otherwise it is
// base64 and bodyEncoding says "base64".
type messageJSON struct {
	MsgID           string            `json:"msgId"`       // the unique id (UNIQ_KEY)
	OffsetMsgID     string            `json:"offsetMsgId"` // store host + CommitLog offset
	Topic           string            `json:"topic"`
	Broker          string            `json:"broker"`
	QueueID         int32             `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	Tags            string            `json:"tags"`
	Keys            []string          `json:"keys"`
	ShardingKey     string            `json:"shardingKey,omitempty"`
	Properties      map[string]string `json:"properties"`
	Body            string            `json:"body"`
	BodyEncoding    string            `json:"bodyEncoding,omitempty"`
	BodySize        int               `json:"bodySize"`
	BornTimestamp   string            `json:"bornTimestamp"`
	StoreTimestamp  string            `json:"storeTimestamp"`
	BornHost        string            `json:"bornHost"`
	StoreHost       string            `json:"storeHost"`
	ReconsumeTimes  int32             `json:"reconsumeTimes"`
	// MatchedBy is set by msg get: "msgId" or "offsetMsgId".
	MatchedBy string `json:"matchedBy,omitempty"`
}

func toMessageJSON(m *client.MessageExt) messageJSON {
	j := messageJSON{
		MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Topic: m.Topic, Broker: m.BrokerName,
		QueueID: m.QueueID, QueueOffset: m.QueueOffset, CommitLogOffset: m.CommitLogOffset,
		Tags: m.Tag, Keys: m.Keys, ShardingKey: m.ShardingKey, Properties: m.Properties,
		BodySize:      len(m.Body),
		BornTimestamp: jsonTime(m.BornTimestamp), StoreTimestamp: jsonTime(m.StoreTimestamp),
		BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
	}
	if j.Keys == nil {
		j.Keys = []string{}
	}
	if j.Properties == nil {
		j.Properties = map[string]string{}
	}
	if utf8.Valid(m.Body) {
		j.Body = string(m.Body)
	} else {
		j.Body, j.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), "base64"
	}
	return j
}

// messageLineHeader and messageLine are consume's table output: one line
// per message, streamed as messages arrive, the body last and whole.
const messageLineFormat = "%-10s %5s %8s  %-24s  %-10s  %-20s  %s\n"

func writeMessageLineHeader(w io.Writer) {
	fmt.Fprintf(w, messageLineFormat, "BROKER", "QUEUE", "OFFSET", "STORED", "TAG", "KEYS", "BODY")
}

func writeMessageLine(w io.Writer, m *client.MessageExt) {
	fmt.Fprintf(w, messageLineFormat, m.BrokerName, fmt.Sprint(m.QueueID), fmt.Sprint(m.QueueOffset),
		formatTime(m.StoreTimestamp), cell(m.Tag), joinOrDash(m.Keys, ","), displayBody(m.Body, 0))
}

// writeMessageDetail prints every field of a message, one per line (msg
// get, msg at).
func writeMessageDetail(w io.Writer, m *client.MessageExt, matchedBy string) {
	field := func(name string, v any) { fmt.Fprintf(w, "%-17s %s\n", name+":", cell(v)) }
	if matchedBy != "" {
		field("Matched by", matchedBy)
	}
	field("Msg id", m.MsgID)
	field("Offset msg id", m.OffsetMsgID)
	field("Topic", m.Topic)
	field("Queue", fmt.Sprintf("%s#%d offset %d", m.BrokerName, m.QueueID, m.QueueOffset))
	field("CommitLog offset", m.CommitLogOffset)
	field("Tag", m.Tag)
	field("Keys", joinOrDash(m.Keys, " "))
	if m.ShardingKey != "" {
		field("Sharding key", m.ShardingKey)
	}
	props := "-"
	if len(m.Properties) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
			kv = append(kv, k+"="+m.Properties[k])
		}
		props = strings.Join(kv, " ")
	}
	field("Properties", props)
	field("Born", fmt.Sprintf("%s from %s", formatTime(m.BornTimestamp), cell(m.BornHost)))
	field("Stored", fmt.Sprintf("%s on %s", formatTime(m.StoreTimestamp), cell(m.StoreHost)))
	field("Reconsume times", m.ReconsumeTimes)
	field("Body", fmt.Sprintf("%d bytes", len(m.Body)))
	fmt.Fprintln(w, displayBody(m.Body, 0))
}
