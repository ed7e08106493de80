package broker

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// storeError gives store and log errors their wire codes.
func storeError(err error) error {
	var ce *errcode.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case errors.Is(err, commitlog.ErrDiskFull):
		return errcode.Errorf(errcode.DiskFull, "%v", err)
	case errors.Is(err, commitlog.ErrFlushTimeout):
		return errcode.Errorf(errcode.FlushDiskTimeout, "%v", err)
	case errors.Is(err, store.ErrMessageTooLarge), errors.Is(err, commitlog.ErrRecordTooLarge):
		return errcode.Errorf(errcode.MessageTooLarge, "%v", err)
	case errors.Is(err, message.ErrBadTopic):
		return errcode.Errorf(errcode.IllegalTopic, "%v", err)
	case errors.Is(err, message.ErrBadProperty), errors.Is(err, message.ErrTooLarge):
		return errcode.Errorf(errcode.MessageIllegal, "%v", err)
	case errors.Is(err, store.ErrMessageIllegal):
		return errcode.Errorf(errcode.MessageIllegal, "%v", err)
	case errors.Is(err, store.ErrClosed), errors.Is(err, commitlog.ErrClosed):
		return errcode.Errorf(errcode.ShuttingDown, "%v", err)
	case errors.Is(err, commitlog.ErrWriteFailed):
		return errcode.Errorf(errcode.ServiceNotAvailable, "%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errcode.Errorf(errcode.Timeout, "%v", err)
	}
	return errcode.Errorf(errcode.SystemError, "%v", err)
}

// checkMessage checks one message against the topic and the broker's
// limits. The message's own well-formedness (topic characters, property
// bytes) is the store's to check, once per message, as it encodes (storeError
// gives those failures their codes); a topic the table holds is legal, so
// the name is validated here only when the table does not know it. e is
// the topic's entry as the caller found it (nil: not in the table); it
// returns the entry, made when the topic is created here.
func (b *Broker) checkMessage(m *message.Ext, batch bool, e *topicEntry) (*topicEntry, error) {
	if e == nil {
		if err := message.ValidateTopic(m.Topic); err != nil {
			return nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
		}
	}
	if err := topic.CheckSend(m.Topic, m.Properties, batch); err != nil {
		return nil, err
	}
	return b.checkSendTo(m.Topic, m.QueueID, len(m.Body), propertiesSize(m.Properties), e)
}

// checkSendTo is checkMessage after the topic's name and reserved
// properties: a message of bodyLen bytes, its properties encoding to
// propsLen bytes (name, value and two separators each), to queueID of
// topicName, whose entry is e (nil: not in the table, created here when
// the broker creates topics on first use).
func (b *Broker) checkSendTo(topicName string, queueID int32, bodyLen, propsLen int, e *topicEntry) (*topicEntry, error) {
	if bodyLen == 0 {
		return nil, errcode.Errorf(errcode.MessageIllegal, "message to %s has an empty body", topicName)
	}
	if limit := b.maxMessageSize.Load(); int64(bodyLen) > limit {
		return nil, errcode.Errorf(errcode.MessageTooLarge, "message body of %d bytes exceeds the limit of %d", bodyLen, limit)
	}
	if propsLen > b.opts.MaxPropertiesSize {
		return nil, errcode.Errorf(errcode.PropertiesTooLarge, "properties take %d bytes, the limit is %d", propsLen, b.opts.MaxPropertiesSize)
	}
	if e == nil {
		if !b.opts.AutoCreateTopic || message.IsRetryTopic(topicName) || message.IsDLQTopic(topicName) {
			return nil, errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", topicName, b.opts.BrokerName)
		}
		tc := TopicConfig{Name: topicName, ReadQueueNums: int32(b.opts.DefaultQueueNums), WriteQueueNums: int32(b.opts.DefaultQueueNums), Perm: PermReadWrite}
		if err := b.topics.put(tc, true); err != nil {
			return nil, err
		}
		b.makeQueues(tc)
		b.reg.trigger()
		b.repl.TriggerMetadataPush()
		if e = b.topics.entry(topicName); e == nil { // removed since
			e = &topicEntry{cfg: tc}
		}
	}
	tc := &e.cfg
	if !tc.Writable() {
		return nil, errcode.Errorf(errcode.NoPermission, "topic %s is not writable on broker %s", topicName, b.opts.BrokerName)
	}
	if queueID < 0 || queueID >= tc.WriteQueueNums {
		return nil, errcode.Errorf(errcode.InvalidParameter, "queue %d of %s does not exist (write queues: %d)", queueID, topicName, tc.WriteQueueNums)
	}
	return e, nil
}

func propertiesSize(p map[string]string) int {
	n := 0
	for k, v := range p {
		n += len(k) + len(v) + 2
	}
	return n
}

// send is Send uncounted: validation, the retry rule for a message a
// consumer sends to its retry topic (maxReconsumeTimes < 0: the group's
// setting), the rewrites of transactional and delayed messages, then put.
// It returns the topic's entry in the table too (nil when a check failed).
func (b *Broker) send(ctx context.Context, msgs []*message.Ext, maxReconsumeTimes int32) ([]store.PutResult, *topicEntry, error) {
	if len(msgs) == 0 {
		return nil, nil, errcode.Errorf(errcode.InvalidParameter, "send request holds no message")
	}
	first := msgs[0]
	if err := b.admitSend(len(msgs), first.Topic); err != nil {
		return nil, nil, err
	}
	e := b.topics.entry(first.Topic) // one topic for the whole batch
	for _, m := range msgs {
		if m.Topic != first.Topic || m.QueueID != first.QueueID {
			return nil, nil, errcode.Errorf(errcode.InvalidParameter, "a batch must go to one topic queue")
		}
		var err error
		if e, err = b.checkMessage(m, len(msgs) > 1, e); err != nil {
			return nil, nil, err
		}
	}
	if message.IsRetryTopic(first.Topic) {
		group := strings.TrimPrefix(first.Topic, message.RetryTopicPrefix)
		if _, err := b.retry.ClientRetry(first, maxReconsumeTimes, b.GroupLocked(group)); err != nil {
			return nil, e, err
		}
	}
	if b.dedup != nil && !message.IsRetryTopic(first.Topic) && !message.IsDLQTopic(first.Topic) {
		// (A consumer that cannot send a message back resends it to the
		// retry topic itself, with its id, once per failed attempt: those
		// repeats are not a producer's.)
		if window := b.dedupWindowOf(&e.cfg); window > 0 {
			res, err := b.sendDeduplicated(ctx, first.Topic, len(msgs), extSend{b, msgs}, window)
			return res, e, err
		}
	}
	res, err := b.rewriteAndPut(ctx, msgs)
	return res, e, err
}

// admitSend checks what a send of n (≥ 1) messages to topicName needs of
// the broker before its messages are looked at.
func (b *Broker) admitSend(n int, topicName string) error {
	if n > b.opts.MaxBatchMessages {
		return errcode.Errorf(errcode.InvalidParameter, "batch of %d messages exceeds the limit of %d", n, b.opts.MaxBatchMessages)
	}
	if err := b.checkWritable(); err != nil {
		return err
	}
	if !message.IsRetryTopic(topicName) { // consumers still send messages back
		return b.checkBrokerWritable()
	}
	return nil
}

// rewriteAndPut applies the rewrites of transactional and delayed messages,
// then stores.
func (b *Broker) rewriteAndPut(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error) {
	if err := txn.Rewrite(msgs); err != nil {
		return nil, err
	}
	if err := b.rewriteDelayed(msgs); err != nil {
		return nil, err
	}
	return b.put(ctx, msgs)
}

// put stores messages as an acknowledged send is stored: refused when too
// few slaves are in sync (sync replication), appended, and returned once
// the flush and replication modes say they are stored. Send, retries and
// replay marks store through it.
func (b *Broker) put(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error) {
	return b.acknowledged(ctx, func() ([]store.PutResult, error) {
		return b.store.PutBatch(ctx, msgs, make([]store.PutResult, 0, len(msgs)))
	})
}

// acknowledged runs appendRecords, a store's put, as put does: refused
// when too few slaves are in sync, and returned once the flush and
// replication modes say its records are stored.
func (b *Broker) acknowledged(ctx context.Context, appendRecords func() ([]store.PutResult, error)) ([]store.PutResult, error) {
	if err := b.checkInSync(); err != nil {
		return nil, err
	}
	res, err := appendRecords()
	if err != nil {
		return res, storeError(err)
	}
	if err := b.waitReplicated(ctx, res); err != nil {
		return res, err
	}
	return res, nil
}

// PullRequest is a protocol-independent pull.
type PullRequest struct {
	Group, Topic  string
	QueueID       int32
	Offset        int64
	MaxMessages   int
	MaxBytes      int
	TagExpression string
	// ExpressionType says what TagExpression is: "" or ExprTag a tag
	// expression, ExprSQL92 an SQL92 condition over properties.
	ExpressionType string
	SuspendTimeout time.Duration
	CommitOffset   int64 // < 0: none
}

// PullStatus says what a pull found.
type PullStatus int32

// Pull statuses (numbered as bolide.v1's PullStatus).
const (
	// PullFound: Records holds messages.
	PullFound PullStatus = 0
	// PullNoNewMessage: the offset is the queue's max offset (after any
	// hold).
	PullNoNewMessage PullStatus = 1
	// PullNoMatchedMessage: messages were skipped by the filter; pull again
	// from NextOffset.
	PullNoMatchedMessage PullStatus = 2
	// PullOffsetIllegal: the offset is outside [MinOffset, MaxOffset];
	// NextOffset is the suggested correction.
	PullOffsetIllegal PullStatus = 3
)

// PullResult is what a pull found.
type PullResult struct {
	Status               PullStatus
	Records              [][]byte
	NextOffset           int64
	MinOffset, MaxOffset int64
}

// pull is Pull uncounted.
func (b *Broker) pull(ctx context.Context, req PullRequest) (PullResult, error) {
	pl, err := b.planPull(req)
	if err != nil {
		return PullResult{}, err
	}
	var deadline <-chan time.Time
	if pl.hold > 0 {
		t := time.NewTimer(pl.hold)
		defer t.Stop()
		deadline = t.C
	}
	w := b.waiters(Queue{req.Topic, req.QueueID})
	for {
		// Take the arrival channel before reading, so an arrival between
		// the read and the wait is not missed.
		arrived := w.sig.C()
		// The topic may have been deleted while the pull was held, or
		// just before it took the channel (forgetWaiters sets gone
		// before it notifies).
		if w.gone.Load() {
			return PullResult{}, b.gone(req.Topic)
		}
		out, wait, err := pl.read()
		if err != nil || !wait {
			return out, err
		}
		select {
		case <-arrived:
		case <-deadline:
			return out, nil
		case <-ctx.Done():
			return out, nil
		case <-b.ctx.Done():
			return out, nil
		}
		// The group may have been stopped while the pull was held.
		if err := pl.refusal(); err != nil {
			return PullResult{}, err
		}
	}
}

// pullPlan is a checked pull request, read once or, while it is held,
// again after each arrival on its queue.
type pullPlan struct {
	b        *Broker
	req      PullRequest // Offset: where the next read starts
	mf       messageFilter
	maxMsgs  int
	maxBytes int
	hold     time.Duration // 0: answer what the first read finds
}

// planPull checks a pull request and commits its CommitOffset.
func (b *Broker) planPull(req PullRequest) (*pullPlan, error) {
	if err := message.ValidateTopic(req.Topic); err != nil {
		return nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	if message.IsSystemTopic(req.Topic) {
		return nil, errcode.Errorf(errcode.NoPermission, "topic %s is internal to the broker and cannot be pulled", req.Topic)
	}
	if req.Group != "" {
		if err := message.ValidateGroup(req.Group); err != nil {
			return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
		}
		// A stopped group reads nothing and commits nothing: its offsets
		// stay where they were until it is enabled again.
		if err := b.subs.ConsumeRefusal(req.Group); err != nil {
			return nil, err
		}
	}
	tc, ok := b.topics.get(req.Topic)
	if !ok {
		return nil, errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", req.Topic, b.opts.BrokerName)
	}
	if !tc.Readable() {
		return nil, errcode.Errorf(errcode.NoPermission, "topic %s is not readable on broker %s", req.Topic, b.opts.BrokerName)
	}
	if req.QueueID < 0 || req.QueueID >= tc.ReadQueueNums {
		return nil, errcode.Errorf(errcode.InvalidParameter, "queue %d of %s does not exist (read queues: %d)", req.QueueID, req.Topic, tc.ReadQueueNums)
	}
	mf, err := b.compileFilter(req.ExpressionType, req.TagExpression)
	if err != nil {
		return nil, err
	}
	if req.CommitOffset >= 0 && req.Group != "" {
		b.advanceOffset(req.Group, req.Topic, req.QueueID, req.CommitOffset)
	}
	pl := &pullPlan{b: b, req: req, mf: mf, maxMsgs: req.MaxMessages, maxBytes: req.MaxBytes,
		hold: min(req.SuspendTimeout, b.opts.LongPollMax)}
	if pl.maxMsgs <= 0 || pl.maxMsgs > b.opts.PullMaxMessages {
		pl.maxMsgs = b.opts.PullMaxMessages
	}
	if pl.maxBytes <= 0 || pl.maxBytes > b.opts.PullMaxBytes {
		pl.maxBytes = b.opts.PullMaxBytes
	}
	return pl, nil
}

// read reads the queue once from the plan's offset. wait says that it
// found nothing to answer and the pull holds: out is then what to answer
// if the hold ends with nothing new.
func (pl *pullPlan) read() (out PullResult, wait bool, err error) {
	b, req := pl.b, &pl.req
	for {
		res, err := b.store.GetMatching(req.Topic, req.QueueID, req.Offset, pl.maxMsgs, pl.maxBytes, pl.mf.tagCode, pl.mf.match)
		if err != nil {
			return PullResult{}, false, storeError(err)
		}
		out := PullResult{Records: res.Records, NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
		switch res.Status {
		case store.Found:
			out.Status = PullFound
			return out, false, nil
		case store.OffsetTooSmall, store.OffsetOverflowBadly:
			out.Status = PullOffsetIllegal
			return out, false, nil
		case store.NoMatchedMessage:
			// Everything up to NextOffset was filtered out: keep waiting
			// from there while the hold lasts.
			req.Offset = res.NextOffset
			if req.Offset < res.MaxOffset {
				continue
			}
			out.Status = PullNoMatchedMessage
		case store.NoMessageInQueue:
			if req.Offset != 0 && req.Offset != res.MinOffset {
				out.Status = PullOffsetIllegal
				return out, false, nil
			}
			out.Status = PullNoNewMessage
			out.NextOffset = req.Offset
		default: // OffsetOverflowOne
			out.Status = PullNoNewMessage
		}
		return out, pl.hold > 0, nil
	}
}

// refusal is the error a held pull ends with when its group was stopped
// while it waited.
func (pl *pullPlan) refusal() error {
	if pl.req.Group == "" {
		return nil
	}
	return pl.b.subs.ConsumeRefusal(pl.req.Group)
}

// lastStoreTime returns the store time of a queue's newest message.
func (b *Broker) lastStoreTime(topic string, queueID int32) int64 {
	_, maxOff := b.store.QueueOffsets(topic, queueID)
	if maxOff == 0 {
		return 0
	}
	ts, err := b.store.StoreTimeAt(topic, queueID, maxOff-1)
	if err != nil {
		return 0
	}
	return ts
}

// OffsetChange is what an offset reset did to one queue.
type OffsetChange struct {
	QueueID       int32
	Before, After int64
}

// ResetOffset moves a group's offsets of a topic to a time (ts, ms), the
// earliest or the latest offset of each queue; dryRun only reports.
func (b *Broker) ResetOffset(group, topic string, ts int64, earliest, latest, dryRun bool) ([]OffsetChange, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	tc, err := b.topic(topic)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, v := range []bool{ts > 0, earliest, latest} {
		if v {
			n++
		}
	}
	if n != 1 {
		return nil, errcode.Errorf(errcode.InvalidParameter, "give exactly one of a timestamp, earliest or latest")
	}
	var changes []OffsetChange
	for q := int32(0); q < tc.ReadQueueNums; q++ {
		minOff, maxOff := b.store.QueueOffsets(topic, q)
		var to int64
		switch {
		case earliest:
			to = minOff
		case latest:
			to = maxOff
		default:
			off, err := b.store.OffsetForTime(topic, q, ts)
			if err != nil {
				return nil, storeError(err)
			}
			to = off
		}
		changes = append(changes, OffsetChange{QueueID: q, Before: b.offsets.Query(group, topic, q), After: to})
		if !dryRun {
			b.offsets.Commit(group, topic, q, to)
		}
	}
	if !dryRun {
		if err := b.offsets.Persist(); err != nil {
			return changes, storeError(err)
		}
		// A group consuming over POP moves too.
		if err := b.resetPop(group, topic, changes); err != nil {
			return changes, err
		}
	}
	return changes, nil
}
