package remoting

import (
	"context"
	"strconv"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// Query limits, RocketMQ's: at most maxQueryMessages records per
// QUERY_MESSAGE, and 32 for a unique key (duplicates are resends).
const (
	maxQueryMessages    = 64
	maxUniqueKeyResults = 32
)

// adminViewMessage serves VIEW_MESSAGE_BY_ID (33): the stored record at a
// CommitLog offset (mqadmin queryMsgById decodes the offset from the
// offset message id, whose address is this broker's).
//
// With ACL on the caller must be allowed to subscribe to the message's topic (the
// topic it is stored under): the offset names no topic for accessTable to
// check before the read.
func (f *Frontend) adminViewMessage(ctx context.Context, cs *connState, req *rmq.Command) *rmq.Command {
	off, err := req.Int64("offset")
	if err != nil {
		return adminBadRequest(req, err)
	}
	rec, err := f.b.ViewMessage("", off)
	if err != nil {
		// RocketMQ answers SYSTEM_ERROR for an offset holding no message.
		return req.Reply(rmq.SystemError, "can not find message by the offset "+strconv.FormatInt(off, 10))
	}
	if g := f.b.Guard(); g.Enabled() {
		d, err := message.DecodeDispatch(rec)
		if err == nil {
			err = g.Authorize(auth.FromContext(ctx), cs.conn.RemoteAddr().String(), auth.TopicNeed(d.Topic, auth.Sub))
		}
		if err != nil {
			return req.Reply(rmq.NoPermission, err.Error())
		}
	}
	return adminOK(req, rec)
}

// adminQueryMessage serves QUERY_MESSAGE (12): the stored records of a
// topic's messages with a key (_UNIQUE_KEY_QUERY: a unique id) stored in a
// time range, concatenated, as mqadmin queryMsgByKey and
// queryMsgByUniqueKey ask; the client checks each record's key itself.
func (f *Frontend) adminQueryMessage(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topic, err := req.Required("topic")
	if err != nil {
		return adminBadRequest(req, err)
	}
	key, err := req.Required("key")
	if err != nil {
		return adminBadRequest(req, err)
	}
	maxNum, err := req.OptInt32("maxNum", maxQueryMessages)
	if err != nil {
		return adminBadRequest(req, err)
	}
	begin, err := req.OptInt64("beginTimestamp", 0)
	if err != nil {
		return adminBadRequest(req, err)
	}
	end, err := req.OptInt64("endTimestamp", 0)
	if err != nil {
		return adminBadRequest(req, err)
	}
	maxNum = min(max(maxNum, 1), maxQueryMessages)
	if req.Bool("_UNIQUE_KEY_QUERY") {
		maxNum = maxUniqueKeyResults
	}
	recs, err := f.b.QueryMessage(topic, key, begin, end, int(maxNum))
	if err != nil {
		if errcode.Of(err) == errcode.QueryNotFound {
			return req.Reply(rmq.QueryNotFound, "can not find message, maybe time range not correct")
		}
		return adminFail(req, err)
	}
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	body := make([]byte, 0, n)
	for _, r := range recs {
		body = append(body, r...)
	}
	resp := adminOK(req, body)
	// The index's last update: Bolide indexes as it dispatches, so the
	// store's newest offset is as far as it has looked.
	resp.SetInt("indexLastUpdateTimestamp", 0)
	resp.SetInt("indexLastUpdatePhyoffset", f.b.Info().CommitLogMaxOffset)
	return resp
}

// adminResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET (222), mqadmin
// resetOffsetByTime: the group's offsets of the topic move to the first
// message stored at or after timestamp (−1: the end of each queue, 0: the
// start), on the broker itself; without isForce only backwards. With queueId
// and offset set, that one queue moves to offset. The answer is the new
// offsets as a ResetOffsetBody, and the group's connected RocketMQ consumers
// are told with RESET_CONSUMER_CLIENT_OFFSET (220), so that what they hold
// does not overwrite the reset.
func (f *Frontend) adminResetOffset(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group, err := req.Required("group")
	if err != nil {
		return adminBadRequest(req, err)
	}
	topic, err := req.Required("topic")
	if err != nil {
		return adminBadRequest(req, err)
	}
	ts, err := req.OptInt64("timestamp", 0)
	if err != nil {
		return adminBadRequest(req, err)
	}
	queueID, err := req.OptInt32("queueId", -1)
	if err != nil {
		return adminBadRequest(req, err)
	}
	offset, err := req.OptInt64("offset", -1)
	if err != nil {
		return adminBadRequest(req, err)
	}
	force := req.Bool("isForce") || req.Bool("force")

	var target []broker.QueueOffset
	if queueID >= 0 && offset >= 0 {
		if _, err := f.b.QueueState(topic, queueID); err != nil {
			return adminFail(req, err)
		}
		target = []broker.QueueOffset{{Queue: broker.Queue{Topic: topic, ID: queueID}, Offset: offset}}
	} else {
		changes, err := f.b.ResetOffset(group, topic, max(ts, 0), ts == 0, ts < 0, true)
		if err != nil {
			return adminFail(req, err)
		}
		for _, c := range changes {
			to := c.After
			if !force && c.Before >= 0 && c.Before < to {
				to = c.Before // without force an offset only moves back
			}
			target = append(target, broker.QueueOffset{Queue: broker.Queue{Topic: topic, ID: c.QueueID}, Offset: to})
		}
	}
	if err := f.b.CommitOffsets(group, target); err != nil {
		return adminFail(req, err)
	}
	bname := f.b.Options().BrokerName
	entries := make([]mqEntry, 0, len(target))
	for _, t := range target {
		entries = append(entries, mqEntry{Topic: topic, BrokerName: bname, QueueID: t.ID, Value: t.Offset})
	}
	table, err := mqTable(entries)
	if err != nil {
		return req.Reply(rmq.SystemError, err.Error())
	}
	body := adminObject("offsetTable", table)
	f.notifyReset(group, topic, ts, body)
	f.log.Info("consumer offsets reset", zap.String("group", group), zap.String("topic", topic),
		zap.Int64("timestamp", ts), zap.Bool("force", force), zap.Int("queues", len(target)))
	return adminOK(req, body)
}

// notifyReset tells the group's consumers connected here that its offsets
// of topic were reset (RESET_CONSUMER_CLIENT_OFFSET, oneway; the body is the
// ResetOffsetBody the admin got).
func (f *Frontend) notifyReset(group, topic string, ts int64, body []byte) {
	for _, c := range f.remotingClients() {
		member := false
		for _, cd := range c.Consumers {
			member = member || cd.Group == group
		}
		if !member {
			continue
		}
		req := rmq.NewRequest(rmq.ResetConsumerClientOffset, map[string]string{
			"topic": topic, "group": group, "timestamp": strconv.FormatInt(ts, 10)}, body)
		if err := c.conn.Oneway(req); err != nil {
			f.log.Debug("reset notice not delivered", zap.String("client", c.ID), zap.Error(err))
		}
	}
}
