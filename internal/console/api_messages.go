package console

import (
	"context"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Bounds of a message search.
const (
	defaultSearchMax = 64
	maxSearch        = 1000
)

type summaryJSON struct {
	MsgID          string   `json:"msgId"`
	OffsetMsgID    string   `json:"offsetMsgId"`
	Topic          string   `json:"topic"`
	Tags           string   `json:"tags"`
	Keys           []string `json:"keys"`
	Broker         string   `json:"broker"`
	QueueID        int32    `json:"queueId"`
	QueueOffset    int64    `json:"queueOffset"`
	StoreTime      jsTime   `json:"storeTime"`
	BornTime       jsTime   `json:"bornTime"`
	BodySize       int      `json:"bodySize"`
	ReconsumeTimes int32    `json:"reconsumeTimes"`
}

func summaryOf(m *client.MessageExt) summaryJSON {
	return summaryJSON{MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Topic: m.Topic, Tags: m.Tag, Keys: nonNil(m.Keys),
		Broker: m.BrokerName, QueueID: m.QueueID, QueueOffset: m.QueueOffset, StoreTime: jsTime(m.StoreTimestamp),
		BornTime: jsTime(m.BornTimestamp), BodySize: len(m.Body), ReconsumeTimes: m.ReconsumeTimes}
}

// fullJSON is a message with its properties and body.
type fullJSON struct {
	summaryJSON
	BornHost   string            `json:"bornHost"`
	StoreHost  string            `json:"storeHost"`
	Properties map[string]string `json:"properties"`
	Body       string            `json:"body"`
	BodyText   *string           `json:"bodyText,omitempty"`
}

func fullOf(m *client.MessageExt) fullJSON {
	f := fullJSON{summaryJSON: summaryOf(m), BornHost: m.BornHost, StoreHost: m.StoreHost, Properties: map[string]string{}}
	for k, v := range m.Properties {
		f.Properties[k] = v
	}
	// The system properties the SDK lifts into fields, shown as stored.
	if m.Tag != "" {
		f.Properties[message.PropertyTags] = m.Tag
	}
	if len(m.Keys) > 0 {
		f.Properties[message.PropertyKeys] = strings.Join(m.Keys, " ")
	}
	if m.MsgID != "" && m.MsgID != m.OffsetMsgID {
		f.Properties[message.PropertyUniqueKey] = m.MsgID
	}
	f.Body, f.BodyText = body(m.Body)
	return f
}

type messagesJSON struct {
	Messages []summaryJSON `json:"messages"`
	Capped   bool          `json:"capped"`
}

// messages searches by key, by id or by store time.
func (c *Console) messages(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	q := cl.r.URL.Query()
	topic, key, id := q.Get("topic"), q.Get("key"), q.Get("id")
	max, err := intParam(cl.r, "max", defaultSearchMax, maxSearch)
	if err != nil {
		return nil, err
	}
	if max == 0 {
		max = defaultSearchMax
	}
	if topic != "" {
		if err := message.ValidateTopic(topic); err != nil {
			return nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
		}
	}
	var msgs []*client.MessageExt
	switch {
	case id != "":
		var opts []client.ViewOption
		if topic != "" {
			opts = append(opts, client.InTopic(topic))
		}
		lk, err := cl.admin.ViewMessage(ctx, id, opts...)
		if err != nil {
			return nil, err
		}
		msgs = lk.Messages
	case topic == "":
		return nil, badRequest("a search needs id=, or topic= with key= or begin=")
	case key != "":
		if msgs, err = cl.admin.QueryMessageByKey(ctx, topic, key, time.Time{}, time.Time{}, max+1); err != nil {
			return nil, err
		}
	case q.Get("begin") != "":
		now := time.Now()
		begin, err := parseTime(q.Get("begin"), now)
		if err != nil {
			return nil, err
		}
		end := now
		if s := q.Get("end"); s != "" {
			if end, err = parseTime(s, now); err != nil {
				return nil, err
			}
		}
		if !end.After(begin) {
			return nil, badRequest("end %s is not after begin %s", end.Format(time.RFC3339), begin.Format(time.RFC3339))
		}
		if msgs, err = messagesByTime(ctx, cl.admin, topic, begin, end, max+1); err != nil {
			return nil, err
		}
	default:
		return nil, badRequest("a search by topic needs key= or begin=")
	}
	out := messagesJSON{Messages: []summaryJSON{}}
	if len(msgs) > max {
		msgs, out.Capped = msgs[:max], true
	}
	for _, m := range msgs {
		out.Messages = append(out.Messages, summaryOf(m))
	}
	return out, nil
}

type hopJSON struct {
	Kind           string `json:"kind"`
	Topic          string `json:"topic"`
	Group          string `json:"group"`
	Broker         string `json:"broker"`
	QueueID        int32  `json:"queueId"`
	QueueOffset    int64  `json:"queueOffset"`
	StoreTime      jsTime `json:"storeTime"`
	ReconsumeTimes int32  `json:"reconsumeTimes"`
	MsgID          string `json:"msgId"`
}

// message: one message, found by either id, with its trace through retry
// and dead letter.
func (c *Console) message(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	id := cl.r.PathValue("id")
	topic := cl.r.URL.Query().Get("topic")
	m, hops, err := traceMessage(ctx, cl.admin, id, topic)
	if err != nil {
		return nil, err
	}
	return struct {
		Message fullJSON  `json:"message"`
		Trace   []hopJSON `json:"trace"`
	}{Message: fullOf(m), Trace: nonNil(hops)}, nil
}

// originHop is the hop of a message where it was found.
func originHop(m *client.MessageExt) hopJSON {
	kind := "origin"
	group := ""
	switch {
	case message.IsRetryTopic(m.Topic):
		kind, group = "retry", strings.TrimPrefix(m.Topic, message.RetryTopicPrefix)
	case message.IsDLQTopic(m.Topic):
		kind, group = "dlq", strings.TrimPrefix(m.Topic, message.DLQTopicPrefix)
	}
	return hopJSON{Kind: kind, Topic: m.Topic, Group: group, Broker: m.BrokerName, QueueID: m.QueueID,
		QueueOffset: m.QueueOffset, StoreTime: jsTime(m.StoreTimestamp), ReconsumeTimes: m.ReconsumeTimes, MsgID: m.OffsetMsgID}
}
