package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Consumer retries and dead-letter queues, as RocketMQ's
// CONSUMER_SEND_MSG_BACK:
//
//   - A consumer that fails a message sends it back (SendBack) with the
//     message's CommitLog offset on this broker. The broker reads the
//     message from its own log and stores a copy in %RETRY%<group> (one
//     queue) with the reconsume count + 1 and property DELAY = 3 + the count
//     (or the level the consumer asked for), so the copy waits in
//     SCHEDULE_TOPIC_XXXX first (delay.go).
//   - When the count has reached the maximum (the consumer's, else the
//     group's setting, else 16), or the consumer asks for a negative level,
//     the copy goes to %DLQ%<group> (one queue, readable and writable)
//     instead, with DLQ_ORIGIN_TOPIC and DLQ_ORIGIN_MESSAGE_ID set.
//   - Every copy keeps the body, flag and properties: RETRY_TOPIC holds the
//     original topic, ORIGIN_MESSAGE_ID the id of the first delivery,
//     FIRST_FAILURE_MS and LAST_FAILURE_MS when the message failed first and
//     last, FAILURE_REASON the consumer's last reason.
//   - The retry topic of a clustering group is created when a consumer of
//     the group first heartbeats to a master, so its push consumers find a
//     route for it at once; both topics are also created on first use.

// Properties the broker sets on retried and dead-lettered messages.
const (
	// PropertyFirstFailureMS is when the message was first sent back (ms).
	PropertyFirstFailureMS = "FIRST_FAILURE_MS"
	// PropertyLastFailureMS is when it was last sent back (ms).
	PropertyLastFailureMS = "LAST_FAILURE_MS"
	// PropertyFailureReason is the reason the consumer gave last.
	PropertyFailureReason = "FAILURE_REASON"
)

// maxReasonLen bounds a kept failure reason.
const maxReasonLen = 512

// RetryOptions configure consumer retries.
type RetryOptions struct {
	// MaxReconsumeTimes is how many times a message is retried before it
	// is dead-lettered when the consumer does not say (16).
	MaxReconsumeTimes int
	// GroupMaxReconsumeTimes overrides MaxReconsumeTimes for some groups.
	GroupMaxReconsumeTimes map[string]int
}

func defaultRetryOptions() RetryOptions {
	return RetryOptions{MaxReconsumeTimes: 16}
}

func (o *RetryOptions) validate() error {
	var errs []error
	if o.MaxReconsumeTimes < 0 {
		errs = append(errs, fmt.Errorf("broker: max reconsume times %d must not be negative", o.MaxReconsumeTimes))
	}
	for g, n := range o.GroupMaxReconsumeTimes {
		if err := message.ValidateGroup(g); err != nil {
			errs = append(errs, fmt.Errorf("broker: max reconsume times: %w", err))
		}
		if n < 0 {
			errs = append(errs, fmt.Errorf("broker: max reconsume times %d of group %s must not be negative", n, g))
		}
	}
	return errors.Join(errs...)
}

// maxReconsumeTimes returns the broker's limit for group.
func (o *RetryOptions) maxReconsumeTimes(group string) int {
	if n, ok := o.GroupMaxReconsumeTimes[group]; ok {
		return n
	}
	return o.MaxReconsumeTimes
}

// SendBackRequest is a protocol-independent send-back.
type SendBackRequest struct {
	Group           string
	CommitLogOffset int64
	// UniqueID, when set, must match the stored message's UNIQ_KEY.
	UniqueID    string
	OriginMsgID string
	// DelayLevel: 0 = 3 + reconsume times, > 0 this level, < 0 dead-letter.
	DelayLevel int32
	// MaxReconsumeTimes: ≤ 0 = the broker's setting for the group.
	MaxReconsumeTimes int32
	// ReconsumeTimes is the consumer's count; the larger of it and the
	// stored count is used.
	ReconsumeTimes int32
	Reason         string
}

// SendBackResult says where the copy went.
type SendBackResult struct {
	DeadLettered   bool
	Topic          string
	MsgID          string
	ReconsumeTimes int32
}

// SendBack stores a failed message in the group's retry topic, or in its
// dead-letter topic once it has been retried enough.
func (b *Broker) SendBack(ctx context.Context, req SendBackRequest) (SendBackResult, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return SendBackResult{}, wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	if err := b.checkWritable(); err != nil {
		return SendBackResult{}, err
	}
	m, err := b.store.ReadMessage(req.CommitLogOffset)
	if err != nil {
		return SendBackResult{}, wire.Errorf(pb.Code_QUERY_NOT_FOUND, "no message at CommitLog offset %d on broker %s: %v", req.CommitLogOffset, b.opts.BrokerName, err)
	}
	if req.UniqueID != "" && m.UniqueID() != req.UniqueID {
		return SendBackResult{}, wire.Errorf(pb.Code_QUERY_NOT_FOUND, "the message at CommitLog offset %d is %q, not %q", req.CommitLogOffset, m.UniqueID(), req.UniqueID)
	}
	if message.IsSystemTopic(m.Topic) {
		return SendBackResult{}, wire.Errorf(pb.Code_NO_PERMISSION, "the message at CommitLog offset %d is in %s and cannot be sent back", req.CommitLogOffset, m.Topic)
	}
	copyMsg, dead := b.retryCopy(m, req)
	topic := message.RetryTopic(req.Group)
	if dead {
		topic = message.DLQTopic(req.Group)
	}
	if err := b.ensureGroupTopic(topic); err != nil {
		return SendBackResult{}, err
	}
	copyMsg.Topic = topic
	if !dead {
		if err := b.scheduleDelayed(copyMsg); err != nil {
			return SendBackResult{}, err
		}
	}
	if err := b.checkInSync(); err != nil {
		return SendBackResult{}, err
	}
	res, err := b.store.PutBatch(ctx, []*message.Ext{copyMsg}, nil)
	if err != nil {
		return SendBackResult{}, storeError(err)
	}
	if err := b.waitReplicated(ctx, res); err != nil {
		return SendBackResult{}, err
	}
	if dead {
		b.log.Info("message dead-lettered", zap.String("group", req.Group), zap.String("uniqueId", m.UniqueID()),
			zap.String("topic", copyMsg.Properties[message.PropertyRetryTopic]), zap.Int32("reconsumeTimes", copyMsg.ReconsumeTimes),
			zap.String("reason", copyMsg.Properties[PropertyFailureReason]))
	}
	return SendBackResult{DeadLettered: dead, Topic: topic, MsgID: res[0].MsgID, ReconsumeTimes: copyMsg.ReconsumeTimes}, nil
}

// retryCopy builds the copy of a failed message (topic and delay still to
// be set) and reports whether it must be dead-lettered.
func (b *Broker) retryCopy(m *message.Ext, req SendBackRequest) (*message.Ext, bool) {
	times := max(m.ReconsumeTimes, req.ReconsumeTimes)
	limit := int(req.MaxReconsumeTimes)
	if limit <= 0 {
		limit = b.opts.Retry.maxReconsumeTimes(req.Group)
	}
	props := maps.Clone(m.Properties)
	if props == nil {
		props = make(map[string]string)
	}
	for _, k := range []string{message.PropertyDelayLevel, message.PropertyRealTopic, message.PropertyRealQueueID,
		message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS, message.PropertyTimerDelaySec,
		message.PropertyTimerOutMS, message.PropertyTimerOrigin, message.PropertyWaitStoreMsgOK} {
		delete(props, k)
	}
	// The topic the consumer subscribed to: the message's own, unless it
	// came from the retry topic (a group that consumes a DLQ retries with
	// the DLQ as its topic).
	if !message.IsRetryTopic(m.Topic) || props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = m.Topic
	}
	if props[message.PropertyOriginMessageID] == "" {
		origin := req.OriginMsgID
		if origin == "" {
			origin = m.MsgID()
		}
		props[message.PropertyOriginMessageID] = origin
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	if props[PropertyFirstFailureMS] == "" {
		props[PropertyFirstFailureMS] = now
	}
	props[PropertyLastFailureMS] = now
	if r := cleanReason(req.Reason); r != "" {
		props[PropertyFailureReason] = r
	}
	props[message.PropertyMaxReconsumeTimes] = strconv.Itoa(limit)
	dead := req.DelayLevel < 0 || int(times) >= limit
	if dead {
		props[message.PropertyDLQOriginTopic] = props[message.PropertyRetryTopic]
		props[message.PropertyDLQOriginMessageID] = props[message.PropertyOriginMessageID]
	} else {
		level := int(req.DelayLevel)
		if level == 0 {
			level = 3 + int(times)
		}
		props[message.PropertyDelayLevel] = strconv.Itoa(level)
	}
	return &message.Ext{
		Message:        message.Message{Flag: m.Flag, Body: m.Body, Properties: props},
		SysFlag:        m.SysFlag,
		BornTimestamp:  m.BornTimestamp,
		BornHost:       m.BornHost,
		ReconsumeTimes: times + 1,
	}, dead
}

// cleanReason makes a failure reason storable: one line without property
// separators, at most maxReasonLen bytes.
func cleanReason(r string) string {
	r = strings.Map(func(c rune) rune {
		switch c {
		case message.NameValueSeparator, message.PropertySeparator, '\n', '\r':
			return ' '
		}
		return c
	}, strings.TrimSpace(r))
	if len(r) > maxReasonLen {
		r = strings.ToValidUTF8(r[:maxReasonLen], "")
	}
	return r
}

// ensureGroupTopic creates a retry or dead-letter topic (one queue, read and
// write) if it does not exist.
func (b *Broker) ensureGroupTopic(name string) error {
	if _, ok := b.topics.get(name); ok {
		return nil
	}
	err := b.topics.put(TopicConfig{Name: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: PermReadWrite}, false)
	if err != nil {
		if _, ok := b.topics.get(name); ok {
			return nil // created concurrently
		}
		return err
	}
	b.log.Info("topic created", zap.String("topic", name))
	b.reg.trigger()
	return nil
}

// ensureRetryTopics creates the retry topics of the clustering groups a
// heartbeat registers (masters only).
func (b *Broker) ensureRetryTopics(hb *pb.Heartbeat) {
	if !b.IsMaster() {
		return
	}
	for _, cd := range hb.GetConsumers() {
		if cd.GetMessageModel() != pb.MessageModel_CLUSTERING {
			continue
		}
		if err := b.ensureGroupTopic(message.RetryTopic(cd.GetGroup())); err != nil {
			b.log.Warn("create retry topic", zap.String("group", cd.GetGroup()), zap.Error(err))
		}
	}
}

// groupTopics returns the retry and dead-letter topics of group that exist
// on this broker.
func (b *Broker) groupTopics(group string) []string {
	var out []string
	for _, t := range []string{message.RetryTopic(group), message.DLQTopic(group)} {
		if _, ok := b.topics.get(t); ok {
			out = append(out, t)
		}
	}
	return out
}
