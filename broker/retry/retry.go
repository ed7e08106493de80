package retry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

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

// Options configure consumer retries.
type Options struct {
	// MaxReconsumeTimes is how many times a message is retried before it
	// is dead-lettered when the consumer does not say (16).
	MaxReconsumeTimes int
	// GroupMaxReconsumeTimes overrides MaxReconsumeTimes for some groups.
	GroupMaxReconsumeTimes map[string]int
}

// DefaultOptions returns the default retry options.
func DefaultOptions() Options {
	return Options{MaxReconsumeTimes: 16}
}

// Validate reports every invalid setting.
func (o *Options) Validate() error {
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

// Host is what the feature needs from its broker. Errors it returns carry
// errcode codes.
type Host interface {
	// Writable refuses writes on a broker that is not the master.
	Writable() error
	// ReadMessage reads the message stored at a CommitLog offset.
	ReadMessage(offset int64) (*message.Ext, error)
	// Store stores m as an acknowledged send is stored: a message asking
	// for delayed delivery is rewritten to wait in its delay topic first,
	// and Store returns once the flush and replication modes say it is
	// stored. It returns the stored message's id.
	Store(ctx context.Context, m *message.Ext) (msgID string, err error)
	// HasTopic reports whether the topic table holds topic.
	HasTopic(topic string) bool
	// CreateTopic adds topic to the topic table with one readable and
	// writable queue and announces it to the NameServers. It fails if the
	// topic exists.
	CreateTopic(topic string) error
	// GetMessages reads up to maxCount stored records (about maxBytes) of a
	// queue from offset, whether or not the topic is in the topic table.
	GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int) (store.GetResult, error)
	// QueueOffsets returns a queue's min and max offsets (0, 0 if it does
	// not exist).
	QueueOffsets(topic string, queueID int32) (minOff, maxOff int64)
}

// maxReconsumeTimes returns the configured limit for group.
func (o *Options) maxReconsumeTimes(group string) int {
	if n, ok := o.GroupMaxReconsumeTimes[group]; ok {
		return n
	}
	return o.MaxReconsumeTimes
}

// Service is the retry and dead-letter feature of one broker.
type Service struct {
	h          Host
	opts       Options
	brokerName string
	log        *zap.Logger
	marks      replayMarks // dlq.go
	// maxTimes is Options.MaxReconsumeTimes, changeable while the broker
	// runs (SetMaxReconsumeTimes).
	maxTimes atomic.Int64
}

// New returns the feature of the broker named brokerName.
func New(h Host, opts Options, brokerName string, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Service{h: h, opts: opts, brokerName: brokerName, log: log}
	s.maxTimes.Store(int64(opts.MaxReconsumeTimes))
	return s
}

// SetMaxReconsumeTimes changes the broker's retry limit (groups with a
// limit of their own keep it) for the messages sent back from now on.
func (s *Service) SetMaxReconsumeTimes(n int) { s.maxTimes.Store(int64(n)) }

// maxReconsumeTimes returns the broker's limit for group.
func (s *Service) maxReconsumeTimes(group string) int {
	if n, ok := s.opts.GroupMaxReconsumeTimes[group]; ok {
		return n
	}
	return int(s.maxTimes.Load())
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
func (s *Service) SendBack(ctx context.Context, req SendBackRequest) (SendBackResult, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return SendBackResult{}, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if err := s.h.Writable(); err != nil {
		return SendBackResult{}, err
	}
	m, err := s.h.ReadMessage(req.CommitLogOffset)
	if err != nil {
		return SendBackResult{}, errcode.Errorf(errcode.QueryNotFound, "no message at CommitLog offset %d on broker %s: %v", req.CommitLogOffset, s.brokerName, err)
	}
	if req.UniqueID != "" && m.UniqueID() != req.UniqueID {
		return SendBackResult{}, errcode.Errorf(errcode.QueryNotFound, "the message at CommitLog offset %d is %q, not %q", req.CommitLogOffset, m.UniqueID(), req.UniqueID)
	}
	if message.IsSystemTopic(m.Topic) {
		return SendBackResult{}, errcode.Errorf(errcode.NoPermission, "the message at CommitLog offset %d is in %s and cannot be sent back", req.CommitLogOffset, m.Topic)
	}
	copyMsg, dead := s.retryCopy(m, req)
	topic := message.RetryTopic(req.Group)
	if dead {
		topic = message.DLQTopic(req.Group)
	}
	if err := s.ensureGroupTopic(topic); err != nil {
		return SendBackResult{}, err
	}
	copyMsg.Topic = topic
	// A retry copy carries DELAY, so the host parks it in the delay topic;
	// a dead letter carries none and is stored in the DLQ as it is.
	msgID, err := s.h.Store(ctx, copyMsg)
	if err != nil {
		return SendBackResult{}, err
	}
	if dead {
		s.log.Info("message dead-lettered", zap.String("group", req.Group), zap.String("uniqueId", m.UniqueID()),
			zap.String("topic", copyMsg.Properties[message.PropertyRetryTopic]), zap.Int32("reconsumeTimes", copyMsg.ReconsumeTimes),
			zap.String("reason", copyMsg.Properties[PropertyFailureReason]))
	}
	return SendBackResult{DeadLettered: dead, Topic: topic, MsgID: msgID, ReconsumeTimes: copyMsg.ReconsumeTimes}, nil
}

// retryCopy builds the copy of a failed message (topic still to be set)
// and reports whether it must be dead-lettered.
func (s *Service) retryCopy(m *message.Ext, req SendBackRequest) (*message.Ext, bool) {
	times := max(m.ReconsumeTimes, req.ReconsumeTimes)
	limit := int(req.MaxReconsumeTimes)
	if limit <= 0 {
		limit = s.maxReconsumeTimes(req.Group)
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

// ClientRetry judges m, a message a consumer sends to its group's retry
// topic itself (m.Topic is %RETRY%<group>, m.ReconsumeTimes the count the
// consumer gives it), as RocketMQ's broker judges such a send: once the
// count passes maxReconsumeTimes (< 0: the broker's setting for the
// group), or at once when the group consumes orderly (its client sends
// what it gave up on), the message is a dead letter. ClientRetry then
// makes m one: topic %DLQ%<group> (created if missing), queue 0, no delay
// or delivery time,
// DLQ_ORIGIN_TOPIC set from RETRY_TOPIC. It reports whether it did.
func (s *Service) ClientRetry(m *message.Ext, maxReconsumeTimes int32, orderly bool) (dead bool, err error) {
	group, ok := strings.CutPrefix(m.Topic, message.RetryTopicPrefix)
	if !ok {
		return false, errcode.Errorf(errcode.InvalidParameter, "topic %s is not a retry topic", m.Topic)
	}
	limit := int(maxReconsumeTimes)
	if limit < 0 {
		limit = s.maxReconsumeTimes(group)
	}
	if int(m.ReconsumeTimes) <= limit && !orderly {
		return false, nil
	}
	dlq := message.DLQTopic(group)
	if err := s.ensureGroupTopic(dlq); err != nil {
		return false, err
	}
	if m.Properties == nil {
		m.Properties = make(map[string]string)
	}
	for _, k := range []string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS, message.PropertyTimerDelaySec} {
		delete(m.Properties, k) // a dead letter does not wait
	}
	if t := m.Properties[message.PropertyRetryTopic]; t != "" {
		m.Properties[message.PropertyDLQOriginTopic] = t
	}
	m.Topic, m.QueueID = dlq, 0
	s.log.Info("message dead-lettered", zap.String("group", group), zap.String("uniqueId", m.UniqueID()),
		zap.String("topic", m.Properties[message.PropertyRetryTopic]), zap.Int32("reconsumeTimes", m.ReconsumeTimes),
		zap.Bool("orderly", orderly))
	return true, nil
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
func (s *Service) ensureGroupTopic(name string) error {
	if s.h.HasTopic(name) {
		return nil
	}
	if err := s.h.CreateTopic(name); err != nil {
		if s.h.HasTopic(name) {
			return nil // created concurrently
		}
		return err
	}
	s.log.Info("topic created", zap.String("topic", name))
	return nil
}

// EnsureRetryTopics creates the retry topics of the clustering groups a
// consumer heartbeat registers (masters only).
func (s *Service) EnsureRetryTopics(clusteringGroups []string) {
	if s.h.Writable() != nil {
		return
	}
	for _, g := range clusteringGroups {
		if err := s.ensureGroupTopic(message.RetryTopic(g)); err != nil {
			s.log.Warn("create retry topic", zap.String("group", g), zap.Error(err))
		}
	}
}

// GroupTopics returns the retry and dead-letter topics of group that exist
// on this broker.
func (s *Service) GroupTopics(group string) []string {
	var out []string
	for _, t := range []string{message.RetryTopic(group), message.DLQTopic(group)} {
		if s.h.HasTopic(t) {
			out = append(out, t)
		}
	}
	return out
}
