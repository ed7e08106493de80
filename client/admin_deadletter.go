package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Properties of retried, dead-lettered and replayed messages.
const (
	// PropertyFirstFailure and PropertyLastFailure are when the message
	// was first and last sent back (ms since the epoch); PropertyFailureReason
	// is the reason the consumer gave last. The broker sets them.
	PropertyFirstFailure  = "FIRST_FAILURE_MS"
	PropertyLastFailure   = "LAST_FAILURE_MS"
	PropertyFailureReason = "FAILURE_REASON"
	// PropertyReplayGroup, PropertyReplayOf and PropertyReplayOrigin mark a
	// replayed dead letter: the group whose DLQ held it, the dead letter's
	// offset message id (DeadLetter.OffsetMsgID) and the original message's
	// unique id (DeadLetter.MsgID).
	PropertyReplayGroup  = "DLQ_REPLAY_GROUP"
	PropertyReplayOf     = "DLQ_REPLAY_MSG_ID"
	PropertyReplayOrigin = "DLQ_REPLAY_ORIGIN_ID"
)

// replayDropped are the properties a replay does not carry over: the
// retry, dead-letter and delay bookkeeping of the dead letter.
var replayDropped = []string{
	message.PropertyRetryTopic, message.PropertyOriginMessageID, message.PropertyDLQOriginTopic,
	message.PropertyDLQOriginMessageID, message.PropertyReconsumeTime, message.PropertyMaxReconsumeTimes,
	message.PropertyDelayLevel, message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyWaitStoreMsgOK,
	message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS, message.PropertyTimerDelaySec, message.PropertyTimerOutMS,
	message.PropertyTimerOrigin, message.PropertyConsumeStartTime, message.PropertyTransactionPrepared,
	message.PropertyProducerGroup, message.PropertyTransactionID, message.PropertyTransactionCheckTimes,
	message.PropertyMinOffset, message.PropertyMaxOffset,
	PropertyFirstFailure, PropertyLastFailure, PropertyFailureReason,
	PropertyReplayGroup, PropertyReplayOf, PropertyReplayOrigin,
}

// DeadLetter is a message in a group's dead-letter queue (%DLQ%<group>).
type DeadLetter struct {
	Group      string
	BrokerName string
	// QueueOffset is the entry's offset in %DLQ%<group> on its broker.
	QueueOffset int64
	// MsgID is the message's id: the unique id (UNIQ_KEY) of the original
	// message, which its retries and the dead letter keep (the dead
	// letter's offset id if it has none). OffsetMsgID is the dead letter's
	// own offset message id (store host + CommitLog offset in the DLQ).
	MsgID       string
	OffsetMsgID string
	// OriginOffsetMsgID is the offset message id of the message's first
	// stored copy (DLQ_ORIGIN_MESSAGE_ID); OriginTopic its topic.
	OriginOffsetMsgID string
	OriginTopic       string
	ReconsumeTimes    int32
	// FirstFailure is when the message was first sent back, LastFailure
	// when it was dead-lettered; Reason the consumer's last reason.
	FirstFailure, LastFailure time.Time
	Reason                    string
	// Message is the stored dead letter (Topic is %DLQ%<group>).
	Message *MessageExt
	// Replayed is set once the entry was replayed.
	Replayed *ReplayMark
}

// ReplayMark records a replay of a dead letter: when, to which topic,
// and the new message's MsgID (unique id) and OffsetMsgID.
type ReplayMark struct {
	At          time.Time
	Topic       string
	MsgID       string
	OffsetMsgID string
}

// DeadLetterQuery selects dead letters.
type DeadLetterQuery struct {
	// Since keeps entries dead-lettered at or after it (zero: all).
	Since time.Time
	// IDs keeps entries whose MsgID, OffsetMsgID or OriginOffsetMsgID is
	// listed (none: all).
	IDs []string
	// Max bounds the entries returned (0: no bound).
	Max int
}

func (a *Admin) deadLetterClient(addr string) (pb.DeadLetterClient, error) {
	cc, err := a.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewDeadLetterClient(cc), nil
}

// DeadLetters lists a group's dead letters on every broker that has its
// DLQ, per broker oldest first (RPC DeadLetter.ListDeadLetters). A group
// without dead letters gives an empty list.
func (a *Admin) DeadLetters(ctx context.Context, group string, q DeadLetterQuery) ([]DeadLetter, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	r, err := a.Route(ctx, message.DLQTopic(group))
	if errors.Is(err, ErrTopicNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", group, err)
	}
	var out []DeadLetter
	for _, bd := range r.Brokers {
		addr := bd.ReadAddr()
		if addr == "" {
			return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no address", bd.BrokerName)
		}
		got, err := a.brokerDeadLetters(ctx, group, bd.BrokerName, addr, q, len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// brokerDeadLetters pages through one broker's DLQ of group; have is the
// number of entries found on other brokers so far.
func (a *Admin) brokerDeadLetters(ctx context.Context, group, brokerName, addr string, q DeadLetterQuery, have int) ([]DeadLetter, error) {
	cli, err := a.deadLetterClient(addr)
	if err != nil {
		return nil, err
	}
	var since int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMilli()
	}
	var out []DeadLetter
	for off := int64(0); ; {
		if q.Max > 0 && have+len(out) >= q.Max {
			return out, nil
		}
		rctx, cancel := a.b.rpcContext(ctx)
		resp, err := cli.ListDeadLetters(rctx, &pb.ListDeadLettersRequest{Group: group, Offset: off, Max: 1000, SinceMs: since, Ids: q.IDs})
		cancel()
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil {
			return nil, fmt.Errorf("dead letters of %s on %s (%s): %w", group, brokerName, addr, err)
		}
		for _, e := range resp.GetEntries() {
			if q.Max > 0 && have+len(out) >= q.Max {
				break
			}
			d, err := deadLetterFromProto(group, brokerName, e)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		next := resp.GetNextOffset()
		if next <= off || next >= resp.GetMaxOffset() {
			return out, nil
		}
		off = next
	}
}

func deadLetterFromProto(group, brokerName string, e *pb.DeadLetterEntry) (DeadLetter, error) {
	m, err := extFromRecord(e.GetRecord(), brokerName)
	if err != nil {
		return DeadLetter{}, err
	}
	// On the wire msg_id is the offset message id, unique_id UNIQ_KEY.
	d := DeadLetter{
		Group: group, BrokerName: brokerName, QueueOffset: e.GetQueueOffset(),
		MsgID: e.GetUniqueId(), OffsetMsgID: e.GetMsgId(), OriginOffsetMsgID: e.GetOriginMsgId(), OriginTopic: e.GetOriginTopic(),
		ReconsumeTimes: e.GetReconsumeTimes(), Reason: e.GetReason(), Message: m,
		FirstFailure: time.UnixMilli(e.GetFirstFailureMs()), LastFailure: time.UnixMilli(e.GetLastFailureMs()),
	}
	if d.MsgID == "" {
		d.MsgID = d.OffsetMsgID
	}
	if r := e.GetReplayed(); r != nil {
		d.Replayed = &ReplayMark{At: time.UnixMilli(r.GetAtMs()), Topic: r.GetTopic(), MsgID: r.GetUniqueId(), OffsetMsgID: r.GetMsgId()}
	}
	return d, nil
}

// ReplayMessage builds the message a replay of d sends: a new message (a
// new unique id) to topic ("" = the original topic) with the dead letter's
// body, tag, keys and user properties, and PropertyReplayGroup,
// PropertyReplayOf and PropertyReplayOrigin saying where it came from.
func (d *DeadLetter) ReplayMessage(topic string) *Message {
	if topic == "" {
		topic = d.OriginTopic
	}
	m := d.Message
	props := make(map[string]string, len(m.Properties)+3)
	for k, v := range m.Properties {
		if !slices.Contains(replayDropped, k) {
			props[k] = v
		}
	}
	props[PropertyReplayGroup] = d.Group
	props[PropertyReplayOf] = d.OffsetMsgID
	if d.MsgID != "" && d.MsgID != d.OffsetMsgID {
		props[PropertyReplayOrigin] = d.MsgID
	}
	return &Message{Topic: topic, Tag: m.Tag, Keys: slices.Clone(m.Keys), Body: m.Body, Properties: props,
		ShardingKey: m.ShardingKey}
}

// MarkReplayed records on the dead letter's broker that d was replayed as
// res to topic (RPC DeadLetter.MarkReplayed, on the master). Marking an
// entry again keeps the first mark; already reports that case.
func (a *Admin) MarkReplayed(ctx context.Context, d *DeadLetter, topic string, res *SendResult) (already bool, err error) {
	if err := a.check(); err != nil {
		return false, err
	}
	bd, err := a.brokerData(ctx, message.DLQTopic(d.Group), d.BrokerName)
	if err != nil {
		return false, err
	}
	addr := bd.MasterAddr()
	if addr == "" {
		return false, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", d.BrokerName)
	}
	cli, err := a.deadLetterClient(addr)
	if err != nil {
		return false, err
	}
	mark := &pb.ReplayMark{AtMs: time.Now().UnixMilli(), Topic: topic}
	if res != nil {
		mark.MsgId, mark.UniqueId = res.OffsetMsgID, res.MsgID
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := cli.MarkReplayed(rctx, &pb.MarkReplayedRequest{Group: d.Group, QueueOffset: d.QueueOffset, MsgId: d.OffsetMsgID, Mark: mark})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return false, fmt.Errorf("mark %s replayed on %s: %w", d.MsgID, addr, err)
	}
	return resp.GetAlready(), nil
}

// brokerData returns the broker group name of topic's route.
func (a *Admin) brokerData(ctx context.Context, topic, name string) (BrokerData, error) {
	r, err := a.Route(ctx, topic)
	if err != nil {
		return BrokerData{}, err
	}
	for _, bd := range r.Brokers {
		if bd.BrokerName == name {
			return bd, nil
		}
	}
	return BrokerData{}, codeErr(pb.Code_BROKER_NOT_EXIST, "broker %s does not serve %s", name, topic)
}

// ReplayOptions select and pace a replay of dead letters.
type ReplayOptions struct {
	// IDs replays these entries (by MsgID, OffsetMsgID or
	// OriginOffsetMsgID); All replays every entry; Since every entry
	// dead-lettered at or after it. Exactly one must be given.
	IDs   []string
	All   bool
	Since time.Time
	// ToTopic sends to this topic instead of each message's original one.
	ToTopic string
	// Rate bounds the messages sent per second (0: no bound).
	Rate float64
	// DryRun lists what would be replayed and changes nothing.
	DryRun bool
	// Progress, when set, is called after each entry.
	Progress func(ReplayProgress)
}

// ReplayOutcome is what a replay did with one entry.
type ReplayOutcome int

// Replay outcomes.
const (
	// Replayed: sent (or, in a dry run, would be sent) and marked.
	Replayed ReplayOutcome = iota
	// ReplaySkipped: replayed before.
	ReplaySkipped
	// ReplayFailed: the send or the mark failed (Err says which).
	ReplayFailed
)

// ReplayProgress reports one entry of a replay.
type ReplayProgress struct {
	Entry   *DeadLetter
	Outcome ReplayOutcome
	// Sent is where the replayed message was stored (nil unless sent).
	Sent *SendResult
	Err  error
	// Done counts entries handled so far, Total the entries selected.
	Done, Total int
}

// ReplaySummary counts a replay's outcomes.
type ReplaySummary struct {
	Selected, Replayed, Skipped, Failed int
	// NotFound are requested IDs that match no dead letter.
	NotFound []string
	DryRun   bool
}

// ReplayDeadLetters sends a group's dead letters again, each as a new
// message (ReplayMessage) to its original topic or opts.ToTopic, and marks
// each on its broker so that a later replay skips it. Entries replayed
// before are skipped. A message sent whose mark then fails counts as
// failed: a later replay may send it once more. ctx ends the replay early;
// the summary counts what was done.
func (a *Admin) ReplayDeadLetters(ctx context.Context, group string, opts ReplayOptions) (ReplaySummary, error) {
	sum := ReplaySummary{DryRun: opts.DryRun}
	n := 0
	for _, set := range []bool{len(opts.IDs) > 0, opts.All, !opts.Since.IsZero()} {
		if set {
			n++
		}
	}
	if n != 1 {
		return sum, codeErr(pb.Code_INVALID_PARAMETER, "give exactly one of IDs, All or Since")
	}
	if opts.Rate < 0 {
		return sum, codeErr(pb.Code_INVALID_PARAMETER, "rate %v must not be negative", opts.Rate)
	}
	list, err := a.DeadLetters(ctx, group, DeadLetterQuery{Since: opts.Since, IDs: opts.IDs})
	if err != nil {
		return sum, err
	}
	for _, id := range opts.IDs {
		if !slices.ContainsFunc(list, func(d DeadLetter) bool { return d.MsgID == id || d.OffsetMsgID == id || d.OriginOffsetMsgID == id }) {
			sum.NotFound = append(sum.NotFound, id)
		}
	}
	sum.Selected = len(list)
	var p *Producer
	if !opts.DryRun && len(list) > 0 {
		if p, err = a.replayProducer(ctx); err != nil {
			return sum, err
		}
		defer func() { _ = p.Close() }()
	}
	start := time.Now()
	sent := 0
	for i := range list {
		d := &list[i]
		pr := ReplayProgress{Entry: d, Total: len(list)}
		switch {
		case d.Replayed != nil:
			pr.Outcome = ReplaySkipped
		case opts.DryRun:
			pr.Outcome = Replayed
		default:
			if opts.Rate > 0 {
				due := start.Add(time.Duration(float64(sent) / opts.Rate * float64(time.Second)))
				if !sleepCtx(ctx, time.Until(due)) {
					return sum, ctx.Err()
				}
			}
			sent++
			pr.Sent, pr.Err = a.replayOne(ctx, p, d, opts.ToTopic)
			if pr.Err != nil {
				pr.Outcome = ReplayFailed
			}
		}
		switch pr.Outcome {
		case Replayed:
			sum.Replayed++
		case ReplaySkipped:
			sum.Skipped++
		default:
			sum.Failed++
		}
		pr.Done = i + 1
		if opts.Progress != nil {
			opts.Progress(pr)
		}
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
	}
	return sum, nil
}

// replayOne sends one dead letter again and marks it.
func (a *Admin) replayOne(ctx context.Context, p *Producer, d *DeadLetter, toTopic string) (*SendResult, error) {
	m := d.ReplayMessage(toTopic)
	if m.Topic == "" {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "dead letter %s has no original topic; give a topic", d.MsgID)
	}
	res, err := p.Send(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("replay %s to %s: %w", d.MsgID, m.Topic, err)
	}
	if already, err := a.MarkReplayed(ctx, d, m.Topic, res); err != nil {
		return res, err
	} else if already {
		return res, codeErr(pb.Code_INVALID_PARAMETER, "dead letter %s was replayed concurrently; sent once more as %s", d.MsgID, res.MsgID)
	}
	return res, nil
}

// replayProducer starts a producer with the admin's options; each send
// attempt is bounded by the admin's RPC timeout.
func (a *Admin) replayProducer(ctx context.Context) (*Producer, error) {
	opts := a.b.opts
	opts.sendTimeout = opts.rpcTimeout
	p, err := NewProducer("DLQ_REPLAY_PRODUCER", producerOption(func(o *options) { *o = opts }))
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}
