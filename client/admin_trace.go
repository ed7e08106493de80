package client

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Kinds of TraceHop.
const (
	HopOrigin = "origin" // the message as its producer sent it
	HopRetry  = "retry"  // a copy in %RETRY%<group>, redelivered to the group
	HopDLQ    = "dlq"    // the dead letter in %DLQ%<group>
)

// TraceHop is one stored copy of a message on its way through retries and
// dead letters.
type TraceHop struct {
	// Kind is HopOrigin, HopRetry or HopDLQ.
	Kind string
	// Topic the copy is stored in; Group the consumer group of a retry or
	// dead-letter copy ("" for the origin).
	Topic, Group, BrokerName string
	// MsgID is the offset message id of this copy (every copy has the
	// message's unique id, MessageTrace.Message.MsgID, which the broker's
	// key index finds them by); msg get takes it.
	MsgID          string
	QueueID        int32
	QueueOffset    int64
	StoreTime      time.Time
	ReconsumeTimes int32
}

// MessageTrace is a message and its copies, oldest first.
type MessageTrace struct {
	// Message is the message as first stored (its origin copy), or the
	// copy the id named when the origin is gone (retention).
	Message *MessageExt
	Hops    []TraceHop
}

// traceParallel bounds the concurrent index queries of TraceMessage.
const traceParallel = 8

// TraceMessage finds a message by either id (as ViewMessage; topic, when
// set, narrows a msg id lookup to the topic the id was sent to or any
// retry or dead-letter topic) and every copy of it the brokers keep: the
// origin in its topic, the retry copies each consumer group that failed it
// had redelivered through %RETRY%<group>, and the dead letters in
// %DLQ%<group>. Copies keep the message's unique id (UNIQ_KEY), which the
// brokers' key indexes hold, so each retry and dead-letter topic of the
// cluster is asked for it. Hops are ordered by store time. A message
// without a unique id (an inner message of some RocketMQ clients'
// batches) has only its origin hop. Nothing found is an error matching
// ErrQueryNotFound.
func (a *Admin) TraceMessage(ctx context.Context, id string, topic string) (*MessageTrace, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if topic != "" {
		if err := message.ValidateTopic(topic); err != nil {
			return nil, codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
		}
	}
	var opts []ViewOption
	if topic != "" {
		opts = append(opts, InTopic(topic))
	}
	found, err := a.ViewMessage(ctx, id, opts...)
	if err != nil {
		return nil, err
	}
	subject := found.Messages[0]
	for _, m := range found.Messages {
		if hopKind(m.Topic) == HopOrigin {
			subject = m
			break
		}
	}
	copies := append([]*MessageExt(nil), found.Messages...)
	if subject.MsgID != subject.OffsetMsgID { // it has a unique id
		all, err := a.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		// A msg id lookup asked topic (or every topic) already.
		asked := func(t string) bool { return found.MatchedBy == ByMsgID && (topic == "" || t == topic) }
		var topics []string
		if origin := originTopic(subject); origin != "" && !asked(origin) {
			topics = append(topics, origin)
		}
		for _, t := range all {
			if (message.IsRetryTopic(t) || message.IsDLQTopic(t)) && !asked(t) {
				topics = append(topics, t)
			}
		}
		more, err := a.queryTopics(ctx, topics, subject.MsgID)
		if err != nil {
			return nil, err
		}
		copies = append(copies, more...)
	}
	tr := &MessageTrace{Message: subject}
	seen := make(map[string]bool)
	for _, m := range copies {
		if seen[m.OffsetMsgID] || m.MsgID != subject.MsgID {
			continue
		}
		seen[m.OffsetMsgID] = true
		kind := hopKind(m.Topic)
		group := ""
		if kind == HopRetry {
			group = strings.TrimPrefix(m.Topic, message.RetryTopicPrefix)
		} else if kind == HopDLQ {
			group = strings.TrimPrefix(m.Topic, message.DLQTopicPrefix)
		}
		tr.Hops = append(tr.Hops, TraceHop{Kind: kind, Topic: m.Topic, Group: group, BrokerName: m.BrokerName,
			MsgID: m.OffsetMsgID, QueueID: m.QueueID, QueueOffset: m.QueueOffset, StoreTime: m.StoreTimestamp,
			ReconsumeTimes: m.ReconsumeTimes})
		if kind == HopOrigin && hopKind(tr.Message.Topic) != HopOrigin {
			tr.Message = m
		}
	}
	slices.SortStableFunc(tr.Hops, func(x, y TraceHop) int {
		return cmp.Or(x.StoreTime.Compare(y.StoreTime), cmp.Compare(hopRank(x.Kind), hopRank(y.Kind)),
			cmp.Compare(x.ReconsumeTimes, y.ReconsumeTimes))
	})
	return tr, nil
}

// hopKind says which kind of copy a message stored in topic is.
func hopKind(topic string) string {
	switch {
	case message.IsRetryTopic(topic):
		return HopRetry
	case message.IsDLQTopic(topic):
		return HopDLQ
	}
	return HopOrigin
}

func hopRank(kind string) int {
	switch kind {
	case HopOrigin:
		return 0
	case HopRetry:
		return 1
	}
	return 2
}

// originTopic returns the topic a message was first sent to: its own, or
// for a retry or dead-letter copy the one its properties name.
func originTopic(m *MessageExt) string {
	switch hopKind(m.Topic) {
	case HopRetry:
		return m.Properties[message.PropertyRetryTopic]
	case HopDLQ:
		return cmp.Or(m.Properties[message.PropertyDLQOriginTopic], m.Properties[message.PropertyRetryTopic])
	}
	return m.Topic
}

// queryTopics asks every topic for messages with key (a unique id),
// traceParallel topics at a time; a topic deleted meanwhile has none.
func (a *Admin) queryTopics(ctx context.Context, topics []string, key string) ([]*MessageExt, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		out   []*MessageExt
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, traceParallel)
	for _, t := range topics {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			msgs, err := a.QueryMessageByKey(ctx, t, key, time.Time{}, time.Time{}, defaultQueryMax)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				out = append(out, msgs...)
			case errors.Is(err, ErrTopicNotExist):
			case first == nil:
				first = err
				cancel()
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return out, first
}
