package grpcv5

import (
	"context"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/message"
)

// frontendName labels the service's calls in the broker's metrics.
const frontendName = "grpcv5"

// topicCache is the broker's topic table as a map, rebuilt when the
// table's version changes (the core lists topics as a sorted copy).
type topicCache struct {
	b  *broker.Broker
	mu sync.Mutex
	v  broker.DataVersion
	m  map[string]broker.TopicConfig
	rr atomic.Uint32 // round robin over a topic's write queues
}

func newTopicCache(b *broker.Broker) *topicCache { return &topicCache{b: b} }

// get returns a topic's configuration.
func (c *topicCache) get(name string) (broker.TopicConfig, bool) {
	v := c.b.TopicDataVersion()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || v != c.v {
		all := c.b.TopicConfigs()
		m := make(map[string]broker.TopicConfig, len(all))
		for _, tc := range all {
			m[tc.Name] = tc
		}
		c.m, c.v = m, v
	}
	tc, ok := c.m[name]
	return tc, ok
}

// groupQueue is the write queue of a message group: a stable hash (FNV-1a)
// of the group over the topic's write queues, so that one group's messages
// keep their order in one queue.
func groupQueue(group string, writeQueues int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int32(h.Sum32() % uint32(writeQueues))
}

// SendMessage stores the request's messages (the clients send one per
// call; several must share the topic, the type and any message group). The
// queue the client picked is a hint the broker ignores, as Apache's proxy
// does: a FIFO message goes to its group's queue, others round robin. The
// topic's accepted message type is enforced. The answer has one entry per
// message: message_id = the client's id (stored as UNIQ_KEY), offset =
// the queue offset, transaction_id for a transactional message (the name
// EndTransaction uses). The top-level status is the entries' shared one.
func (s *Service) SendMessage(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	m := readMeta(ctx)
	msgs, mt, err := s.sendMessages(m, req)
	if err != nil {
		return sendFailed(req, err), nil
	}
	t := msgs[0].Topic // Send parks delayed and half messages in system topics
	res, err := s.b.Send(broker.WithFrontend(ctx, frontendName), msgs)
	if err != nil && len(res) != len(msgs) {
		return sendFailed(req, err), nil
	}
	// Stored, perhaps not as safely as the flush or replication mode asks
	// (flush or replica timeout): each entry says so.
	resp := &v2.SendMessageResponse{}
	statuses := make([]*v2.Status, len(res))
	for i, r := range res {
		st := statusOf(err)
		statuses[i] = st
		e := &v2.SendResultEntry{Status: st, MessageId: msgs[i].UniqueID(), Offset: r.QueueOffset}
		switch mt {
		case topic.TypeTransaction:
			e.TransactionId = r.MsgID
		case topic.TypeDelay:
			// Parked until due (not when due already): it can be recalled.
			// A repeated send (the core answers it with the first copy's
			// result and stores nothing) gets the handle while not due.
			due, perr := strconv.ParseInt(msgs[i].Properties[message.PropertyTimerOutMS], 10, 64)
			if perr != nil {
				due, perr = strconv.ParseInt(msgs[i].Properties[message.PropertyTimerDeliverMS], 10, 64)
			}
			if perr == nil && (msgs[i].Topic == message.TimerTopic || due > time.Now().UnixMilli()) {
				e.RecallHandle = recallHandle(t, s.limits.brokerName, due, e.MessageId)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	resp.Status = statusOfCodes(statuses)
	if mt == topic.TypeTransaction && m.clientID != "" && err == nil {
		if c := s.clients.get(m.clientID); c != nil {
			c.addProducerTopic(s.b, t)
		}
	}
	return resp, nil
}

// sendFailed answers a send of which nothing was stored.
func sendFailed(req *v2.SendMessageRequest, err error) *v2.SendMessageResponse {
	st := statusOf(err)
	resp := &v2.SendMessageResponse{Status: st}
	for _, pm := range req.GetMessages() {
		resp.Entries = append(resp.Entries, &v2.SendResultEntry{Status: st, MessageId: pm.GetSystemProperties().GetMessageId()})
	}
	return resp
}

// sendMessages checks a send request and builds the messages to store,
// with their type.
func (s *Service) sendMessages(m callMeta, req *v2.SendMessageRequest) ([]*message.Ext, string, error) {
	pms := req.GetMessages()
	if len(pms) == 0 {
		return nil, "", errorf(v2.Code_MESSAGE_CORRUPTED, "no message to send")
	}
	t, err := m.topicName(pms[0].GetTopic())
	if err != nil {
		return nil, "", err
	}
	tc, ok := s.topics.get(t)
	if !ok {
		return nil, "", errorf(v2.Code_TOPIC_NOT_FOUND, "topic %s does not exist on broker %s", t, s.limits.brokerName)
	}
	if !tc.Writable() || tc.WriteQueueNums <= 0 {
		return nil, "", errorf(v2.Code_FORBIDDEN, "topic %s has no writable queue on broker %s", t, s.limits.brokerName)
	}
	mt, err := sendType(pms[0])
	if err != nil {
		return nil, "", err
	}
	group := pms[0].GetSystemProperties().GetMessageGroup()
	out := make([]*message.Ext, len(pms))
	maxBody := s.b.MaxMessageSize() // live: maxMessageSize may change at runtime
	for i, pm := range pms {
		if i > 0 {
			if pt, err := m.topicName(pm.GetTopic()); err != nil || pt != t {
				return nil, "", errorf(v2.Code_MESSAGE_CORRUPTED, "the messages of one send must share one topic")
			}
			if pmt, err := sendType(pm); err != nil || pmt != mt {
				return nil, "", errorf(v2.Code_MESSAGE_CORRUPTED, "the messages of one send must share one type")
			}
			if pm.GetSystemProperties().GetMessageGroup() != group {
				return nil, "", errorf(v2.Code_ILLEGAL_MESSAGE_GROUP, "the messages of one send must share one message group")
			}
		}
		if !tc.Accepts(mt) {
			return nil, "", errorf(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
				"current message type not match with topic accept message types: message type %s, topic %s accepts %s", mt, t, tc.MessageType())
		}
		if out[i], err = toExt(t, pm, mt, maxBody, m.peer); err != nil {
			if len(pms) > 1 {
				return nil, "", wrapEntry(i, err)
			}
			return nil, "", err
		}
	}
	var qid int32
	if group != "" {
		qid = groupQueue(group, tc.WriteQueueNums)
	} else {
		qid = int32(s.topics.rr.Add(1) % uint32(tc.WriteQueueNums))
	}
	for _, e := range out {
		e.QueueID = qid
	}
	return out, mt, nil
}

// wrapEntry names the message of a batch an error is about, keeping its code.
func wrapEntry(i int, err error) error {
	return errorf(codeOf(err), "message %d: %v", i, err)
}
