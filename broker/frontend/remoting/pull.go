package remoting

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// PULL_MESSAGE's sysFlag bits (RocketMQ's PullSysFlag).
const (
	pullCommitOffset = 1 << 0 // commitOffset carries the consumer's progress
	pullSuspend      = 1 << 1 // hold the request while there is nothing new
	pullSubscription = 1 << 2 // subscription carries the filter
	pullClassFilter  = 1 << 3 // filter classes, gone from RocketMQ 5: ignored
)

const (
	// maxHold bounds a long-polled pull below the clients' 30 s request
	// timeout (they ask for 15 s to 20 s).
	maxHold = 25 * time.Second
	// slaveHold bounds a long-polled pull served by a slave, as Bolide's SDK
	// bounds its own (its master retry interval): the client asks again
	// soon and returns to its master, which suggestWhichBrokerId names, as
	// soon as its route has one.
	slaveHold = 3 * time.Second
	// catchUpPoll is how often a slave behind the offset a client asks for
	// looks again while the pull is held.
	catchUpPoll = 100 * time.Millisecond
	// masterID is RocketMQ's broker id of a group's master.
	masterID = 0
)

// pullHandlers registers pulls, offsets and locks.
func (f *Frontend) pullHandlers() map[int32]handler {
	return map[int32]handler{
		rmq.PullMessage:             f.pullMessage,
		rmq.LitePullMessage:         f.pullMessage, // the Java lite pull consumer's code, same header
		rmq.QueryConsumerOffset:     f.queryConsumerOffset,
		rmq.UpdateConsumerOffset:    f.updateConsumerOffset,
		rmq.SearchOffsetByTimestamp: f.searchOffset,
		rmq.GetMaxOffset:            f.maxOffset,
		rmq.GetMinOffset:            f.minOffset,
		rmq.GetEarliestMsgStoreTime: f.earliestStoreTime,
		rmq.GetConsumerListByGroup:  f.consumerList,
		rmq.LockBatchMQ:             f.lockBatch,
		rmq.UnlockBatchMQ:           f.unlockBatch,
	}
}

// pullHeader is PULL_MESSAGE's request header.
type pullHeader struct {
	group, topic   string
	queueID        int32
	offset         int64
	maxMsgs        int32
	maxBytes       int32 // Java's maxMsgBytes; 0: the broker's limit
	sysFlag        int32
	commitOffset   int64
	suspend        time.Duration
	subscription   string
	expressionType string
}

func parsePullHeader(req *rmq.Command) (pullHeader, error) {
	h := pullHeader{group: req.String("consumerGroup"), topic: req.String("topic"),
		subscription: req.String("subscription"), expressionType: req.String("expressionType")}
	var err error
	if h.queueID, err = req.Int32("queueId"); err != nil {
		return h, err
	}
	if h.offset, err = req.Int64("queueOffset"); err != nil {
		return h, err
	}
	if h.maxMsgs, err = req.OptInt32("maxMsgNums", 0); err != nil {
		return h, err
	}
	if h.maxBytes, err = req.OptInt32("maxMsgBytes", 0); err != nil {
		return h, err
	}
	if h.sysFlag, err = req.OptInt32("sysFlag", 0); err != nil {
		return h, err
	}
	if h.commitOffset, err = req.OptInt64("commitOffset", -1); err != nil {
		return h, err
	}
	ms, err := req.OptInt64("suspendTimeoutMillis", 0)
	if err != nil {
		return h, err
	}
	h.suspend = time.Duration(max(ms, 0)) * time.Millisecond
	return h, nil
}

// pullMessage serves PULL_MESSAGE (and LITE_PULL_MESSAGE): a read of one
// queue, held while there is nothing new. Its answer always carries
// nextBeginOffset, minOffset, maxOffset and suggestWhichBrokerId: the
// clients take a missing one for 0.
func (f *Frontend) pullMessage(ctx context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	pc, answer := f.preparePull(ctx, req, true)
	if answer != nil {
		return answer
	}
	res, err := f.b.Pull(ctx, pc.preq)
	return f.pullAnswer(ctx, req, pc, res, err)
}

// pullCall is a checked pull: its header, the core's request, whether its
// filter is known (the request's own, or the registered one) and whether
// this broker was the master when it came.
type pullCall struct {
	h      pullHeader
	preq   broker.PullRequest
	known  bool
	master bool
}

// preparePull checks a pull and makes the core's request of it; a non-nil
// answer ends the pull there. awaitHeartbeat lets it wait for the group's
// heartbeat (awaitRegistration); without it, known may be false.
func (f *Frontend) preparePull(ctx context.Context, req *rmq.Command, awaitHeartbeat bool) (pullCall, *rmq.Command) {
	h, err := parsePullHeader(req)
	if err != nil {
		return pullCall{}, f.pullReply(req, rmq.InvalidParameter, err.Error(), h, broker.PullResult{NextOffset: h.offset})
	}
	// A pull that names no filter, from a group whose heartbeat has not
	// reached this broker yet, waits a little for it; still unknown, it is
	// answered with no message at the same offset (the client pulls again):
	// served unfiltered, an SQL92 or tag subscriber racing its heartbeat
	// would get what its condition excludes. (RocketMQ's broker refuses such
	// a pull with SUBSCRIPTION_NOT_EXIST; its clients then wait seconds.)
	reg, registered := f.b.GroupFilter(h.group, h.topic)
	if !registered && h.sysFlag&pullSubscription == 0 && awaitHeartbeat {
		reg, registered = f.awaitRegistration(ctx, h)
	}
	exprType, expr, err := f.pullExpression(h, reg, registered)
	if err != nil {
		return pullCall{}, f.pullError(req, h, err)
	}
	pc := pullCall{h: h, known: registered || h.sysFlag&pullSubscription != 0, master: f.b.IsMaster()}
	pc.preq = broker.PullRequest{Group: h.group, Topic: h.topic, QueueID: h.queueID, Offset: h.offset,
		MaxMessages: int(max(h.maxMsgs, 1)), MaxBytes: int(max(h.maxBytes, 0)), TagExpression: expr, ExpressionType: exprType, CommitOffset: -1}
	if h.sysFlag&pullSuspend != 0 && pc.known {
		pc.preq.SuspendTimeout = min(h.suspend, maxHold)
		if !pc.master {
			pc.preq.SuspendTimeout = min(pc.preq.SuspendTimeout, slaveHold)
		}
	}
	// A slave's offsets are the master's business (RocketMQ clients clear
	// the bit for slaves, and commit to the master).
	if h.sysFlag&pullCommitOffset != 0 && h.commitOffset >= 0 && pc.master {
		pc.preq.CommitOffset = h.commitOffset
	}
	return pc, nil
}

// pullAnswer answers a pull the core served (res) or refused (err). A
// slave's answer to an offset it does not hold yet may wait
// (slaveOffsetIllegal); a master's never does.
func (f *Frontend) pullAnswer(ctx context.Context, req *rmq.Command, pc pullCall, res broker.PullResult, err error) *rmq.Command {
	if err == nil && !pc.master && res.Status == broker.PullOffsetIllegal {
		return f.slaveOffsetIllegal(ctx, req, pc.h, pc.preq, res)
	}
	if err != nil {
		return f.pullError(req, pc.h, err)
	}
	if !pc.known && res.Status == broker.PullFound {
		res.Records, res.NextOffset = nil, pc.h.offset
		return f.pullReply(req, rmq.PullNotFound, "NO_NEW_MESSAGE: no subscription of the group to the topic registered yet", pc.h, res)
	}
	return f.pullResult(req, pc.h, res)
}

// parksPull reports whether a request is a pull to park (parkPull): one a
// master holds (the suspend flag, and a filter it knows without waiting
// for a heartbeat) of a queue that holds nothing past its offset. Other
// pulls run on goroutines of their own: reading a backlog on the
// connection's reader would read one queue after another.
func (f *Frontend) parksPull(req *rmq.Command) bool {
	if req.Code != rmq.PullMessage && req.Code != rmq.LitePullMessage {
		return false
	}
	h, err := parsePullHeader(req)
	if err != nil || h.sysFlag&pullSuspend == 0 || !f.b.IsMaster() || !f.b.PullWouldWait(h.topic, h.queueID, h.offset) {
		return false
	}
	if h.sysFlag&pullSubscription == 0 {
		_, ok := f.b.GroupFilter(h.group, h.topic)
		return ok
	}
	return true
}

// parkPull serves a pull parksPull picked, parking it in the core
// (broker.PullOrPark) when it must wait. A pull that can no longer be
// parked when it is served (the group's heartbeat gone, the broker no
// longer the master) runs on a goroutine of its own, which the connection
// counts as in flight until it answers.
func (f *Frontend) parkPull(ctx context.Context, req *rmq.Command, reply func(*rmq.Command)) (*rmq.Command, func()) {
	pc, answer := f.preparePull(ctx, req, false)
	if answer != nil {
		return answer, nil
	}
	if !pc.known || !pc.master {
		go func() { reply(f.pullMessage(ctx, nil, req)) }()
		return nil, func() {} // it ends with the connection's context
	}
	parked, res, err := f.b.PullOrPark(ctx, pc.preq, func(res broker.PullResult, err error) {
		reply(f.pullAnswer(ctx, req, pc, res, err))
	})
	if parked != nil {
		return nil, parked.Cancel
	}
	return f.pullAnswer(ctx, req, pc, res, err), nil
}

// unregisteredWait bounds how long a filterless pull waits for its group's
// heartbeat.
const unregisteredWait = time.Second

// awaitRegistration waits up to unregisteredWait (or the pull's own
// suspend time, if shorter; not at all for a pull that may not be held)
// for the group to register a subscription to the topic on this broker,
// and returns it.
func (f *Frontend) awaitRegistration(ctx context.Context, h pullHeader) (broker.Subscription, bool) {
	if h.sysFlag&pullSuspend == 0 {
		return broker.Subscription{}, false
	}
	wait := unregisteredWait
	if h.suspend > 0 {
		wait = min(wait, h.suspend)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return broker.Subscription{}, false
		case <-deadline.C:
			return broker.Subscription{}, false
		case <-t.C:
			if sub, ok := f.b.GroupFilter(h.group, h.topic); ok {
				return sub, true
			}
		}
	}
}

// pullExpression returns the filter a pull uses, as its expression type
// and expression: the request's own when it carries one (sysFlag bit 4),
// else the one the group's clients registered for the topic in their
// heartbeats (RocketMQ's push consumers send none: the Java one names the
// type, SQL92 included, the Go one always says TAG), else none (every
// message; the clients filter again by tag).
//
// The Go push consumer posting its subscription (PostSubscriptionWhenPull)
// labels an SQL92 condition TAG: a "tag expression" equal to the SQL92
// condition the group registered is taken as that condition. reg and
// registered are the group's registered subscription of the topic.
func (f *Frontend) pullExpression(h pullHeader, reg broker.Subscription, registered bool) (string, string, error) {
	t, err := broker.NormalizeExpressionType(h.expressionType)
	if err != nil {
		return "", "", err
	}
	regType, _ := broker.NormalizeExpressionType(reg.Type)
	if h.sysFlag&pullSubscription != 0 {
		if t == broker.ExprSQL92 {
			return t, h.subscription, nil
		}
		if registered && regType == broker.ExprSQL92 && strings.TrimSpace(reg.Expression) == strings.TrimSpace(h.subscription) {
			return broker.ExprSQL92, reg.Expression, nil
		}
		return t, tagExpression(h.subscription), nil
	}
	if registered {
		return regType, reg.Expression, nil
	}
	if t == broker.ExprSQL92 {
		// RocketMQ: the consumer's filter data is not on this broker yet.
		return "", "", errcode.Errorf(errcode.SubscriptionParseFailed,
			"no SQL92 subscription of %s to %s registered: send a heartbeat first", h.group, h.topic)
	}
	return broker.ExprTag, "", nil
}

// tagExpression turns a RocketMQ subscription into Bolide's tag expression:
// RocketMQ skips empty tags ("a || || b", a trailing "||"), Bolide refuses
// them. An expression with no tag left is passed on as it is (and refused).
func tagExpression(sub string) string {
	if !strings.Contains(sub, "||") {
		return sub
	}
	var tags []string
	for _, t := range strings.Split(sub, "||") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	if len(tags) == 0 {
		return sub
	}
	return strings.Join(tags, "||")
}

// pullResult answers a pull the core served.
func (f *Frontend) pullResult(req *rmq.Command, h pullHeader, res broker.PullResult) *rmq.Command {
	switch res.Status {
	case broker.PullFound:
		resp := f.pullReply(req, rmq.Success, "FOUND", h, res)
		n := 0
		for _, r := range res.Records {
			n += len(r)
		}
		body := make([]byte, 0, n)
		for _, r := range res.Records {
			body = append(body, r...)
		}
		resp.Body = body
		return resp
	case broker.PullNoMatchedMessage:
		if res.NextOffset > h.offset {
			return f.pullReply(req, rmq.PullRetryImmediately, "NO_MATCHED_MESSAGE", h, res)
		}
		// Never "retry immediately" without progress: the client would spin.
		return f.pullReply(req, rmq.PullNotFound, "NO_MATCHED_MESSAGE", h, res)
	case broker.PullOffsetIllegal:
		return f.pullReply(req, rmq.PullOffsetMoved, "OFFSET_ILLEGAL", h, res)
	}
	return f.pullReply(req, rmq.PullNotFound, "NO_NEW_MESSAGE", h, res)
}

// slaveOffsetIllegal answers a pull a slave cannot serve from the offset
// asked. A slave's queue bounds are not authoritative (Bolide's SDK makes
// the same rule), so the client's offset is never moved from here: past the
// slave's end (it lags its master), the pull is held until the slave
// catches up or the hold ends, then answered PULL_NOT_FOUND at the same
// offset; below its start, the client is told the slave cannot serve it
// and asks again later.
func (f *Frontend) slaveOffsetIllegal(ctx context.Context, req *rmq.Command, h pullHeader, preq broker.PullRequest, res broker.PullResult) *rmq.Command {
	deadline := time.Now().Add(preq.SuspendTimeout)
	t := time.NewTimer(catchUpPoll)
	defer t.Stop()
	for res.Status == broker.PullOffsetIllegal && h.offset > res.MaxOffset && f.waitCatchUp(ctx, t, deadline) {
		preq.SuspendTimeout = max(time.Until(deadline), 0)
		var err error
		if res, err = f.b.Pull(ctx, preq); err != nil {
			return f.pullError(req, h, err)
		}
	}
	if ctx.Err() != nil {
		return nil // the connection is gone
	}
	if res.Status != broker.PullOffsetIllegal {
		return f.pullResult(req, h, res)
	}
	res.NextOffset = h.offset
	if h.offset > res.MaxOffset {
		return f.pullReply(req, rmq.PullNotFound, "SLAVE_BEHIND", h, res)
	}
	return f.pullReply(req, rmq.ServiceNotAvailable,
		"offset "+strconv.FormatInt(h.offset, 10)+" is below what this slave holds: read it from the master", h, res)
}

// waitCatchUp waits one catch-up poll of a held slave pull; false when the
// hold is over (deadline reached, caller gone, broker stopping or no longer
// a slave).
func (f *Frontend) waitCatchUp(ctx context.Context, t *time.Timer, deadline time.Time) bool {
	remaining := time.Until(deadline)
	if remaining <= 0 || f.b.IsMaster() {
		return false
	}
	t.Reset(min(catchUpPoll, remaining))
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-f.b.Stopping():
	}
	return false
}

// pullError answers a pull the core refused; the offsets still go along.
func (f *Frontend) pullError(req *rmq.Command, h pullHeader, err error) *rmq.Command {
	minOff, maxOff := f.b.Store().QueueOffsets(h.topic, h.queueID)
	return f.pullReply(req, responseCode(err), err.Error(), h,
		broker.PullResult{NextOffset: h.offset, MinOffset: minOff, MaxOffset: maxOff})
}

// pullReply builds a pull's answer with its four offset fields.
func (f *Frontend) pullReply(req *rmq.Command, code int32, remark string, h pullHeader, res broker.PullResult) *rmq.Command {
	resp := req.Reply(code, remark)
	resp.SetInt("nextBeginOffset", res.NextOffset)
	resp.SetInt("minOffset", res.MinOffset)
	resp.SetInt("maxOffset", res.MaxOffset)
	// Bolide's own consumers read from the master, and from a slave only
	// while the master is out of their route; no broker tells them to move.
	// RocketMQ's clients do the same with masterID: they look it up in
	// their route and fall back to a slave when it is not there.
	resp.SetInt("suggestWhichBrokerId", masterID)
	return resp
}
