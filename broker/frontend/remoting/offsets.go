package remoting

import (
	"context"
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// The consumer side besides pulls: consumer offsets, queue offsets, a
// group's members and the orderly consumers' queue locks. Several of these
// answers are read by the clients without their code (the Go client takes
// GET_MAX_OFFSET's and SEARCH_OFFSET's offset field, GET_CONSUMER_LIST's and
// LOCK_BATCH_MQ's body whatever the code), so those fields are only ever
// set to true values: on a failure they are left out, or say "nothing".

// queueHeader reads the topic and queueId fields most of these requests
// carry.
func queueHeader(req *rmq.Command) (string, int32, error) {
	topic, err := req.Required("topic")
	if err != nil {
		return "", 0, err
	}
	q, err := req.Int32("queueId")
	return topic, q, err
}

// queryConsumerOffset serves QUERY_CONSUMER_OFFSET: a group's committed
// offset of a queue, or QUERY_NOT_FOUND when it has none, so that the
// client applies its consume-from-where (RocketMQ answers 0 instead when
// the queue's first message is still in memory; a new group consuming from
// the last offset would then replay the queue).
func (f *Frontend) queryConsumerOffset(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topic, q, err := queueHeader(req)
	if err != nil {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	off, err := f.b.QueryOffset(req.String("consumerGroup"), topic, q)
	if err != nil {
		return errorReply(req, err)
	}
	if off < 0 {
		return req.Reply(rmq.QueryNotFound, "the group has no offset of this queue")
	}
	return req.Reply(rmq.Success, "").SetInt("offset", off)
}

// updateConsumerOffset serves UPDATE_CONSUMER_OFFSET. A negative offset
// (clients send −1 for queues that never advanced) is ignored. RocketMQ's
// Go client is answered only when its commit is refused (goClientLanguage).
func (f *Frontend) updateConsumerOffset(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topic, q, err := queueHeader(req)
	if err != nil {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	off, err := req.Int64("commitOffset")
	if err != nil {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	if off >= 0 {
		err = f.b.CommitOffsets(req.String("consumerGroup"), []broker.QueueOffset{{Queue: broker.Queue{Topic: topic, ID: q}, Offset: off}})
		if err != nil {
			return errorReply(req, err)
		}
	}
	if req.Language == goClientLanguage {
		return nil
	}
	return req.Reply(rmq.Success, "")
}

// goClientLanguage is the language of RocketMQ's Go client, which sends
// UPDATE_CONSUMER_OFFSET only oneway but without the oneway flag, and reads
// no answer to it. On shutdown it sends its last commits so and closes its
// connections at once: an answer still unread in its socket turns that
// close into a reset, which drops what it had not yet put on the wire — the
// last commits (TestPullPollAck, TestOrderlyHandover in test/rocketmq-go lost
// one queue's commit in a few runs in a hundred). So the Go client gets no
// answer, as it expects; every other client gets one.
const goClientLanguage = "GO"

// queueState reads a queue's offsets for the offset requests. A topic this
// broker does not know holds nothing: its offsets are 0, which the answer
// carries along with TOPIC_NOT_EXIST (RocketMQ answers 0 and success).
func (f *Frontend) queueState(req *rmq.Command) (broker.QueueState, *rmq.Command) {
	topic, q, err := queueHeader(req)
	if err != nil {
		return broker.QueueState{}, req.Reply(rmq.InvalidParameter, err.Error())
	}
	st, err := f.b.QueueState(topic, q)
	if err != nil {
		resp := req.Reply(responseCode(err), err.Error())
		if errors.Is(err, errcode.ErrTopicNotExist) {
			resp.SetInt("offset", 0)
		}
		return st, resp
	}
	return st, nil
}

// maxOffset serves GET_MAX_OFFSET: the offset the queue's next message
// will take, so that consuming "from the last offset" skips nothing new.
func (f *Frontend) maxOffset(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	st, fail := f.queueState(req)
	if fail != nil {
		return fail
	}
	return req.Reply(rmq.Success, "").SetInt("offset", st.MaxOffset)
}

// minOffset serves GET_MIN_OFFSET: the queue's first offset still stored.
func (f *Frontend) minOffset(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	st, fail := f.queueState(req)
	if fail != nil {
		return fail
	}
	return req.Reply(rmq.Success, "").SetInt("offset", st.MinOffset)
}

// earliestStoreTime serves GET_EARLIEST_MSG_STORETIME: the store time (ms)
// of the queue's first message still stored, −1 for an empty queue (as
// RocketMQ answers).
func (f *Frontend) earliestStoreTime(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topic, q, err := queueHeader(req)
	if err != nil {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	st, err := f.b.QueueState(topic, q)
	if err != nil {
		return errorReply(req, err)
	}
	ts := int64(-1)
	if st.MaxOffset > st.MinOffset {
		if t, err := f.b.Store().StoreTimeAt(topic, q, st.MinOffset); err == nil {
			ts = t
		}
	}
	return req.Reply(rmq.Success, "").SetInt("timestamp", ts)
}

// searchOffset serves SEARCH_OFFSET_BY_TIMESTAMP: the first offset of the
// queue stored at or after timestamp (ms), the max offset when none is.
// (RocketMQ 5's boundaryType, upper or lower, is not distinguished: the
// answer is the lower boundary, its default.)
func (f *Frontend) searchOffset(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topic, q, err := queueHeader(req)
	if err != nil {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	ts, err := req.Int64("timestamp")
	if err != nil {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	off, err := f.b.SearchOffset(topic, q, ts)
	if err != nil {
		resp := req.Reply(responseCode(err), err.Error())
		if errors.Is(err, errcode.ErrTopicNotExist) {
			resp.SetInt("offset", 0)
		}
		return resp
	}
	return req.Reply(rmq.Success, "").SetInt("offset", off)
}

// consumerIDList is GET_CONSUMER_LIST_BY_GROUP's answer.
type consumerIDList struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// consumerList serves GET_CONSUMER_LIST_BY_GROUP: the sorted client ids of
// the group's live members, whatever protocol they speak (Bolide's SDK and
// RocketMQ's clients allocate queues alike, by sorted id). A group without
// members gets no list (as RocketMQ answers).
func (f *Frontend) consumerList(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group := req.String("consumerGroup")
	ids, err := f.b.ConsumerList(group)
	if err != nil && errcode.Of(err) != errcode.SubscriptionGroupMissing {
		return errorReply(req, err)
	}
	if len(ids) == 0 {
		// The caller is a member that this broker has not heard from yet
		// (it restarted, and the client's next heartbeat is up to 30 s
		// away). RocketMQ's broker answers SYSTEM_ERROR without a body,
		// which rocketmq-client-go reads as an empty group: it drops every
		// queue and takes them back at its next heartbeat, consuming the
		// messages in flight again. Without an answer it times out (3 s)
		// and keeps its queues; the Java client keeps them either way.
		f.log.Debug("consumer list of a group without connected members: not answered", zap.String("group", group))
		return nil
	}
	body, err := json.Marshal(consumerIDList{ConsumerIDList: ids})
	if err != nil {
		return req.Reply(rmq.SystemError, err.Error())
	}
	resp := req.Reply(rmq.Success, "")
	resp.Body = body
	return resp
}

// messageQueue is RocketMQ's MessageQueue in JSON bodies.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// lockBatchBody is LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's request body.
type lockBatchBody struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	MQSet         []messageQueue `json:"mqSet"`
	// OnlyThisBroker (Java clients send false) asks a broker in RocketMQ's
	// strict lock mode not to lock on the other replicas too; Bolide's locks
	// live on the master alone.
	OnlyThisBroker bool `json:"onlyThisBroker"`
}

// lockBatchReply is LOCK_BATCH_MQ's answer.
type lockBatchReply struct {
	LockOKMQSet []messageQueue `json:"lockOKMQSet"`
}

func decodeLockBatch(req *rmq.Command) (lockBatchBody, []broker.Queue, error) {
	var b lockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return b, nil, errcode.Errorf(errcode.InvalidParameter, "lock request body: %v", err)
	}
	qs := make([]broker.Queue, len(b.MQSet))
	for i, mq := range b.MQSet {
		qs[i] = broker.Queue{Topic: mq.Topic, ID: mq.QueueID}
	}
	return b, qs, nil
}

// lockBatch serves LOCK_BATCH_MQ: takes or renews an orderly consumer's
// locks and answers the queues it now holds. The client reads the body
// whatever the code: a refusal answers an empty set.
func (f *Frontend) lockBatch(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	out := lockBatchReply{LockOKMQSet: []messageQueue{}}
	code, remark := rmq.Success, ""
	b, qs, err := decodeLockBatch(req)
	if err == nil {
		var held []broker.Queue
		if held, err = f.b.LockQueues(b.ConsumerGroup, b.ClientID, qs); err == nil {
			out.LockOKMQSet = heldQueues(b.MQSet, held)
		}
	}
	if err != nil {
		code, remark = responseCode(err), err.Error()
	}
	body, err := json.Marshal(out)
	if err != nil {
		return req.Reply(rmq.SystemError, err.Error())
	}
	resp := req.Reply(code, remark)
	resp.Body = body
	return resp
}

// heldQueues returns the requested queues that were locked, as requested
// (broker name included), each once.
func heldQueues(asked []messageQueue, held []broker.Queue) []messageQueue {
	ok := make(map[broker.Queue]bool, len(held))
	for _, q := range held {
		ok[q] = true
	}
	out := make([]messageQueue, 0, len(held))
	for _, mq := range asked {
		q := broker.Queue{Topic: mq.Topic, ID: mq.QueueID}
		if ok[q] {
			out = append(out, mq)
			delete(ok, q)
		}
	}
	return out
}

// unlockBatch serves UNLOCK_BATCH_MQ: releases the locks the client holds
// among the queues named.
func (f *Frontend) unlockBatch(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	b, qs, err := decodeLockBatch(req)
	if err != nil {
		return errorReply(req, err)
	}
	f.b.UnlockQueues(b.ConsumerGroup, b.ClientID, qs)
	return req.Reply(rmq.Success, "")
}
