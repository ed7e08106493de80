package console

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Topic kinds.
const (
	kindNormal = "normal"
	kindRetry  = "retry"
	kindDLQ    = "dlq"
	kindSystem = "system"
)

// replyTopicSuffix ends the request-reply topic a cluster keeps
// (<cluster>_REPLY_TOPIC, RocketMQ's).
const replyTopicSuffix = "_REPLY_TOPIC"

func topicKind(topic string) string {
	switch {
	case message.IsRetryTopic(topic):
		return kindRetry
	case message.IsDLQTopic(topic):
		return kindDLQ
	case message.IsSystemTopic(topic), strings.HasSuffix(topic, replyTopicSuffix):
		return kindSystem
	}
	return kindNormal
}

type topicJSON struct {
	Topic         string            `json:"topic"`
	Kind          string            `json:"kind"`
	MessageType   string            `json:"messageType"`
	Perm          int32             `json:"perm"`
	ReadQueues    int               `json:"readQueues"`
	WriteQueues   int               `json:"writeQueues"`
	Messages      int64             `json:"messages"`
	MaxOffsetSum  int64             `json:"maxOffsetSum"`
	LastStoreTime jsTime            `json:"lastStoreTime"`
	Brokers       []topicBrokerJSON `json:"brokers"`
}

type topicBrokerJSON struct {
	Broker        string `json:"broker"`
	ReadQueues    int    `json:"readQueues"`
	WriteQueues   int    `json:"writeQueues"`
	Perm          int32  `json:"perm"`
	MaxOffsetSum  int64  `json:"maxOffsetSum"`
	MinOffsetSum  int64  `json:"minOffsetSum"`
	LastStoreTime jsTime `json:"lastStoreTime"`
}

// topicSummaries folds the per-broker stats into topics (stats sorted by
// topic, as TopicStats returns them); kinds nil keeps every kind.
func topicSummaries(stats []client.TopicStat, keep func(kind string) bool) []topicJSON {
	out := []topicJSON{}
	for _, s := range stats {
		kind := topicKind(s.Topic)
		if !keep(kind) {
			continue
		}
		if n := len(out); n == 0 || out[n-1].Topic != s.Topic {
			out = append(out, topicJSON{Topic: s.Topic, Kind: kind, MessageType: s.MessageType, Perm: int32(s.Perm),
				Brokers: []topicBrokerJSON{}})
		}
		t := &out[len(out)-1]
		t.ReadQueues += s.ReadQueues
		t.WriteQueues += s.WriteQueues
		t.Messages += s.MaxOffsetSum - s.MinOffsetSum
		t.MaxOffsetSum += s.MaxOffsetSum
		t.Perm = min(t.Perm, int32(s.Perm))
		if s.LastStoreTime.After(timeOf(t.LastStoreTime)) {
			t.LastStoreTime = jsTime(s.LastStoreTime)
		}
		t.Brokers = append(t.Brokers, topicBrokerJSON{Broker: s.BrokerName, ReadQueues: s.ReadQueues,
			WriteQueues: s.WriteQueues, Perm: int32(s.Perm), MaxOffsetSum: s.MaxOffsetSum, MinOffsetSum: s.MinOffsetSum,
			LastStoreTime: jsTime(s.LastStoreTime)})
	}
	return out
}

// topics: one TopicStats (one call per master) for every topic.
func (c *Console) topics(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	stats, err := topicStats(ctx, cl.admin)
	if err != nil && len(stats) == 0 {
		return nil, err
	}
	all := cl.r.URL.Query().Get("all")
	keepAll := all == "1" || all == "true"
	out := struct {
		Topics []topicJSON `json:"topics"`
		Error  string      `json:"error"`
	}{Topics: topicSummaries(stats, func(kind string) bool { return keepAll || kind == kindNormal })}
	if err != nil {
		out.Error = err.Error() // some brokers did not answer
	}
	return out, nil
}

type topicSpecJSON struct {
	Topic       string   `json:"topic"`
	Queues      int      `json:"queues"`
	Perm        int32    `json:"perm"`
	MessageType string   `json:"messageType"`
	Order       bool     `json:"order"`
	Cluster     string   `json:"cluster"`
	Brokers     []string `json:"brokers"`
}

func (s *topicSpecJSON) spec() (client.TopicSpec, error) {
	if s.Queues < 0 || s.Queues > 1024 {
		return client.TopicSpec{}, badRequest("queues %d: between 1 and 1024 (0: the default, 8)", s.Queues)
	}
	if s.Perm != 0 && (s.Perm < 0 || s.Perm > 7) {
		return client.TopicSpec{}, badRequest("perm %d: 2 (write), 4 (read) or 6 (read and write)", s.Perm)
	}
	mt := ""
	if s.MessageType != "" {
		var ok bool
		if mt, ok = client.ParseTopicMessageType(s.MessageType); !ok {
			return client.TopicSpec{}, badRequest("messageType %q: one of %v", s.MessageType, client.TopicMessageTypes)
		}
	}
	if s.Queues == 0 {
		s.Queues = 8
	}
	if s.Perm == 0 {
		s.Perm = int32(client.PermReadWrite)
	}
	s.MessageType = mt
	s.Brokers = nonNil(s.Brokers)
	return client.TopicSpec{Name: s.Topic, Queues: s.Queues, Perm: client.Perm(s.Perm), Order: s.Order,
		MessageType: mt, Cluster: s.Cluster, BrokerNames: s.Brokers}, nil
}

func (c *Console) createTopic(ctx context.Context, cl *call) (any, error) {
	var req topicSpecJSON
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if err := message.ValidateTopic(req.Topic); err != nil {
		return nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	spec, err := req.spec()
	if err != nil {
		return nil, err
	}
	if err := cl.admin.CreateTopic(ctx, spec); err != nil {
		return nil, err
	}
	return created{req}, nil
}

func (c *Console) updateTopic(ctx context.Context, cl *call) (any, error) {
	var req topicSpecJSON
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	topic := cl.r.PathValue("topic")
	if req.Topic != "" && req.Topic != topic {
		return nil, badRequest("the body names topic %q, the path %q", req.Topic, topic)
	}
	req.Topic = topic
	spec, err := req.spec()
	if err != nil {
		return nil, err
	}
	if err := cl.admin.UpdateTopic(ctx, spec); err != nil {
		return nil, err
	}
	return req, nil
}

type topicConfigJSON struct {
	Broker      string            `json:"broker"`
	ReadQueues  int32             `json:"readQueues"`
	WriteQueues int32             `json:"writeQueues"`
	Perm        int32             `json:"perm"`
	Order       bool              `json:"order"`
	MessageType string            `json:"messageType"`
	Attributes  map[string]string `json:"attributes"`
}

type routeJSON struct {
	Brokers []routeBrokerJSON `json:"brokers"`
	Queues  []routeQueueJSON  `json:"queues"`
}

type routeBrokerJSON struct {
	Broker  string            `json:"broker"`
	Cluster string            `json:"cluster"`
	Addrs   map[string]string `json:"addrs"`
}

type routeQueueJSON struct {
	Broker      string `json:"broker"`
	ReadQueues  int32  `json:"readQueues"`
	WriteQueues int32  `json:"writeQueues"`
	Perm        int32  `json:"perm"`
}

type queueJSON struct {
	Broker        string `json:"broker"`
	QueueID       int32  `json:"queueId"`
	MinOffset     int64  `json:"minOffset"`
	MaxOffset     int64  `json:"maxOffset"`
	LastStoreTime jsTime `json:"lastStoreTime"`
}

// topic: its configuration per broker, its route and its queues' offsets.
func (c *Console) topic(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	name := cl.r.PathValue("topic")
	route, err := cl.admin.Route(ctx, name)
	if err != nil {
		return nil, err
	}
	configs, err := cl.admin.TopicConfig(ctx, name)
	if err != nil && !errors.Is(err, client.ErrTopicNotExist) {
		return nil, err
	}
	queues, err := cl.admin.QueueStatus(ctx, name)
	if err != nil {
		return nil, err
	}
	out := struct {
		Topic   string            `json:"topic"`
		Configs []topicConfigJSON `json:"configs"`
		Route   routeJSON         `json:"route"`
		Queues  []queueJSON       `json:"queues"`
	}{Topic: name, Configs: []topicConfigJSON{}, Route: routeJSON{Brokers: []routeBrokerJSON{}, Queues: []routeQueueJSON{}},
		Queues: []queueJSON{}}
	for _, tc := range configs {
		attrs := tc.Attributes
		if attrs == nil {
			attrs = map[string]string{}
		}
		out.Configs = append(out.Configs, topicConfigJSON{Broker: tc.BrokerName, ReadQueues: tc.ReadQueues,
			WriteQueues: tc.WriteQueues, Perm: int32(tc.Perm), Order: tc.Order, MessageType: tc.MessageType(), Attributes: attrs})
	}
	for _, b := range route.Brokers {
		addrs := make(map[string]string, len(b.Addrs))
		for id, a := range b.Addrs {
			addrs[strconv.FormatInt(id, 10)] = a
		}
		out.Route.Brokers = append(out.Route.Brokers, routeBrokerJSON{Broker: b.BrokerName, Cluster: b.Cluster, Addrs: addrs})
	}
	for _, q := range route.Queues {
		out.Route.Queues = append(out.Route.Queues, routeQueueJSON{Broker: q.BrokerName, ReadQueues: q.ReadQueues,
			WriteQueues: q.WriteQueues, Perm: int32(q.Perm)})
	}
	sort.Slice(out.Route.Brokers, func(i, j int) bool { return out.Route.Brokers[i].Broker < out.Route.Brokers[j].Broker })
	sort.Slice(out.Route.Queues, func(i, j int) bool { return out.Route.Queues[i].Broker < out.Route.Queues[j].Broker })
	for _, q := range queues {
		out.Queues = append(out.Queues, queueJSON{Broker: q.Queue.BrokerName, QueueID: q.Queue.QueueID,
			MinOffset: q.MinOffset, MaxOffset: q.MaxOffset, LastStoreTime: jsTime(q.LastStoreTime)})
	}
	return out, nil
}
