package remoting

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/message"
)

// RocketMQ's admin bodies are its classes as fastjson writes them. Most are
// plain JSON, which encoding/json writes with the same field names; the
// exception is a map keyed by MessageQueue (TopicStatsTable, ConsumeStats,
// ResetOffsetBody), which fastjson writes — and reads — with the key
// object itself as the key:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"minOffset":0,...}}}
//
// That is not JSON, so those maps are written by mqTable.

// mqEntry is one entry of a map keyed by MessageQueue.
type mqEntry struct {
	Topic, BrokerName string
	QueueID           int32
	Value             any // written with encoding/json
}

// mqTable writes entries as a fastjson map keyed by MessageQueue, in
// (topic, broker, queue) order.
func mqTable(entries []mqEntry) ([]byte, error) {
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
	out := []byte{'{'}
	for i, e := range entries {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"brokerName":`...)
		out = adminAppendString(out, e.BrokerName)
		out = append(out, `,"queueId":`...)
		out = strconv.AppendInt(out, int64(e.QueueID), 10)
		out = append(out, `,"topic":`...)
		out = adminAppendString(out, e.Topic)
		out = append(out, "}:"...)
		v, err := json.Marshal(e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

// adminAppendString appends s as a JSON string.
func adminAppendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// adminObject writes an object of raw JSON values in the order given: the
// outer object of a body that holds an mqTable.
func adminObject(fields ...any) []byte {
	out := []byte{'{'}
	for i := 0; i+1 < len(fields); i += 2 {
		if i > 0 {
			out = append(out, ',')
		}
		out = adminAppendString(out, fields[i].(string))
		out = append(out, ':')
		switch v := fields[i+1].(type) {
		case []byte:
			out = append(out, v...)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				b = []byte("null")
			}
			out = append(out, b...)
		}
	}
	return append(out, '}')
}

// subscriptionData is RocketMQ's SubscriptionData: subString as
// registered; for a TAG expression tagsSet its tags and codeSet their hash
// codes (Java's String.hashCode), both empty for "*" and for SQL92.
type subscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	CodeSet         []int32  `json:"codeSet"`
	SubVersion      int64    `json:"subVersion"`
	ExpressionType  string   `json:"expressionType"`
}

func newSubscriptionData(sub broker.Subscription, version int64) subscriptionData {
	sd := subscriptionData{Topic: sub.Topic, SubString: strings.TrimSpace(sub.Expression), TagsSet: []string{}, CodeSet: []int32{},
		SubVersion: version, ExpressionType: broker.ExprTag}
	if t, _ := broker.NormalizeExpressionType(sub.Type); t == broker.ExprSQL92 {
		sd.ExpressionType = t
		return sd
	}
	if sd.SubString == "" || sd.SubString == "*" {
		sd.SubString = "*"
		return sd
	}
	for _, t := range strings.Split(sd.SubString, "||") {
		if t = strings.TrimSpace(t); t != "" {
			sd.TagsSet = append(sd.TagsSet, t)
			sd.CodeSet = append(sd.CodeSet, message.JavaStringHash(t))
		}
	}
	return sd
}
