package grpcv5

import (
	"context"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/message"
)

// Receive limits (grpc_v5.md §5.7).
const (
	// maxPollTime caps a long poll, as Apache's
	// grpcClientConsumerMaxLongPollingTimeoutMillis does; it is also the
	// long_polling_timeout the Settings tell push consumers.
	maxPollTime = 20 * time.Second
	// minPollRemaining is the least time before the caller's deadline a
	// receive needs; with less it is answered ILLEGAL_POLLING_TIME.
	minPollRemaining = time.Second
	// pollMargin is kept between the end of a poll and the caller's
	// deadline for the answer to travel (half the remaining time when that
	// is shorter).
	pollMargin = 1500 * time.Millisecond
	// autoRenewInvisible is the invisibility of messages handed to an
	// auto-renewing (push) consumer; the core keeps renewing it while the
	// client lives (Apache's defaultInvisibleTimeMills).
	autoRenewInvisible = 60 * time.Second
	// minInvisible and maxInvisible bound the invisible duration a simple
	// consumer asks for on receive.
	minInvisible = 10 * time.Second
	maxInvisible = 12 * time.Hour
	// unsentInvisible is how soon a message popped but not written to the
	// client (the stream broke) becomes visible again.
	unsentInvisible = time.Second
	// releaseTimeout bounds the calls that give back unsent messages after
	// the caller has gone.
	releaseTimeout = 5 * time.Second
)

// ReceiveMessage is a POP receive. The stream carries exactly: one status,
// then (status OK only) one response per message, then the delivery
// timestamp; then it ends. Nothing found after the long poll is
// MESSAGE_NOT_FOUND. Errors travel in the status; the RPC itself always
// ends with gRPC OK.
func (s *Service) ReceiveMessage(req *v2.ReceiveMessageRequest, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	ctx := stream.Context()
	pr, st := s.popRequest(ctx, req, time.Now())
	if st != nil {
		s.endReceive(stream, st)
		return nil
	}
	msgs, sendable, st := s.popMatching(ctx, pr, req.GetMessageQueue().GetTopic())
	if st != nil {
		s.endReceive(stream, st)
		return nil
	}
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{
		Status: okStatus()}}); err != nil {
		s.log.Debug("receive: stream broke before the messages", zap.Error(err))
		s.nackUnsent(ctx, pr, sendable, true)
		return nil
	}
	for i, m := range msgs {
		if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: m}}); err != nil {
			s.log.Debug("receive: stream broke while writing messages", zap.Int("sent", i),
				zap.Int("unsent", len(msgs)-i), zap.Error(err))
			s.nackUnsent(ctx, pr, sendable[i:], true)
			return nil
		}
	}
	s.sendDeliveryTimestamp(stream)
	return nil
}

// popMatching pops the messages of a receive and converts them (the core
// matches tags exactly and evaluates SQL92 conditions, so every message it
// hands out is the group's). A non-nil status is the answer when no
// message is to be written.
func (s *Service) popMatching(ctx context.Context, pr broker.PopRequest, topic *v2.Resource) ([]*v2.Message, []broker.PoppedMessage, *v2.Status) {
	popped, err := s.b.Pop(ctx, pr)
	if err != nil {
		return nil, nil, statusOf(err)
	}
	if len(popped) == 0 {
		return nil, nil, &v2.Status{Code: v2.Code_MESSAGE_NOT_FOUND, Message: "no new message"}
	}
	msgs := make([]*v2.Message, 0, len(popped))
	sendable := make([]broker.PoppedMessage, 0, len(popped))
	for _, pm := range popped {
		m, err := poppedMessage(topic, pm)
		if err != nil {
			// A record that cannot be read goes back with the group's
			// backoff; after the maximum attempts the core moves it to the
			// dead letter queue.
			s.log.Error("receive: popped message unreadable", zap.String("group", pr.Group),
				zap.String("topic", pr.Topic), zap.Int32("queue", pm.QueueID),
				zap.Int64("offset", pm.QueueOffset), zap.Error(err))
			s.nackUnsent(ctx, pr, []broker.PoppedMessage{pm}, false)
			continue
		}
		msgs = append(msgs, m)
		sendable = append(sendable, pm)
	}
	if len(msgs) == 0 {
		return nil, nil, &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: "popped messages could not be read"}
	}
	return msgs, sendable, nil
}

// endReceive writes a receive's status and its closing delivery timestamp.
// A broken stream is only logged: the caller has gone.
func (s *Service) endReceive(stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse], st *v2.Status) {
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: st}}); err != nil {
		s.log.Debug("receive: status not written", zap.Stringer("code", st.GetCode()), zap.Error(err))
		return
	}
	s.sendDeliveryTimestamp(stream)
}

func (s *Service) sendDeliveryTimestamp(stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) {
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{
		DeliveryTimestamp: timestamppb.Now()}}); err != nil {
		s.log.Debug("receive: delivery timestamp not written", zap.Error(err))
	}
}

// nackUnsent gives back popped messages the client never got: visible
// again after unsentInvisible (quick), or after the group's backoff.
// It runs after the caller may have gone, so on a context of its own.
func (s *Service) nackUnsent(ctx context.Context, pr broker.PopRequest, pms []broker.PoppedMessage, quick bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, pm := range pms {
		var err error
		if quick {
			_, err = s.b.ChangeInvisible(ctx, pr.Group, pr.Topic, pm.Handle, unsentInvisible)
		} else {
			_, err = s.b.PopNack(ctx, pr.Group, pr.Topic, pm.Handle)
		}
		if err != nil {
			s.log.Warn("receive: unsent message not given back; it stays invisible until its deadline",
				zap.String("group", pr.Group), zap.String("topic", pr.Topic), zap.Int32("queue", pm.QueueID),
				zap.Int64("offset", pm.QueueOffset), zap.Error(err))
		}
	}
}

// popRequest checks a receive and turns it into the core's request; a
// non-nil status is the answer to a bad one.
func (s *Service) popRequest(ctx context.Context, req *v2.ReceiveMessageRequest, now time.Time) (broker.PopRequest, *v2.Status) {
	meta := readMeta(ctx)
	group, topic, st := consumeNames(meta, req.GetGroup(), req.GetMessageQueue().GetTopic())
	if st != nil {
		return broker.PopRequest{}, st
	}
	poll, ok := pollTime(ctx, req.LongPollingTimeout, now)
	if !ok {
		return broker.PopRequest{}, &v2.Status{Code: v2.Code_ILLEGAL_POLLING_TIME,
			Message: "less than 1s is left before the deadline: not enough time to poll"}
	}
	pr := broker.PopRequest{
		Group:       group,
		Topic:       topic,
		QueueID:     -1,
		MaxMessages: int(max(req.GetBatchSize(), 0)),
		PollTimeout: poll,
		ClientID:    meta.clientID,
		AttemptID:   req.GetAttemptId(),
	}
	if req.GetAutoRenew() {
		if pr.ClientID == "" {
			return broker.PopRequest{}, statusOf(meta.requireClient())
		}
		pr.AutoRenew = true
		pr.Invisible = autoRenewInvisible
	} else {
		d, st := receiveInvisible(req)
		if st != nil {
			return broker.PopRequest{}, st
		}
		pr.Invisible = d
	}
	typ, expr, st := receiveFilter(req.GetFilterExpression(), s.b.CheckFilter)
	if st != nil {
		return broker.PopRequest{}, st
	}
	pr.ExpressionType, pr.TagExpression = typ, expr
	return pr, nil
}

// pollTime is how long a receive may wait for messages: the requested
// long_polling_timeout, else until the deadline; at most maxPollTime, and
// always ending pollMargin (or half the time left, if less) before the
// deadline so the answer arrives in time. ok is false when
// less than minPollRemaining is left (Apache answers ILLEGAL_POLLING_TIME
// below 5 s, which breaks short simple-consumer awaits; this is lenient).
func pollTime(ctx context.Context, requested *durationpb.Duration, now time.Time) (time.Duration, bool) {
	deadline, hasDeadline := ctx.Deadline()
	left := deadline.Sub(now)
	if hasDeadline && left < minPollRemaining {
		return 0, false
	}
	want := maxPollTime
	switch {
	case requested != nil:
		want = requested.AsDuration()
	case hasDeadline:
		want = left // less the margin below
	}
	want = min(want, maxPollTime)
	if hasDeadline {
		want = min(want, left-min(pollMargin, left/2))
	}
	return max(want, 0), true
}

// receiveInvisible is a simple consumer's invisible duration, checked.
func receiveInvisible(req *v2.ReceiveMessageRequest) (time.Duration, *v2.Status) {
	pd := req.GetInvisibleDuration()
	if pd == nil {
		return 0, &v2.Status{Code: v2.Code_ILLEGAL_INVISIBLE_TIME,
			Message: "invisible_duration is required unless auto_renew is set"}
	}
	d := pd.AsDuration()
	if pd.CheckValid() != nil || d < minInvisible || d > maxInvisible {
		return 0, &v2.Status{Code: v2.Code_ILLEGAL_INVISIBLE_TIME,
			Message: "invisible duration " + d.String() + " is out of range [" + minInvisible.String() + ", " + maxInvisible.String() + "]"}
	}
	return d, nil
}

// receiveFilter checks a receive's filter and returns the core's
// expression type and expression: a tag expression ("*" when none is
// given), or an SQL92 condition, which check (the broker's CheckFilter)
// validates — refused with where it fails to parse, or because the broker's
// property filter is off.
func receiveFilter(f *v2.FilterExpression, check func(typ, expr string) error) (typ, expr string, st *v2.Status) {
	switch f.GetType() {
	case v2.FilterType_TAG, v2.FilterType_FILTER_TYPE_UNSPECIFIED:
	case v2.FilterType_SQL:
		if err := check(broker.ExprSQL92, f.GetExpression()); err != nil {
			return "", "", &v2.Status{Code: v2.Code_ILLEGAL_FILTER_EXPRESSION, Message: err.Error()}
		}
		return broker.ExprSQL92, f.GetExpression(), nil
	default:
		return "", "", &v2.Status{Code: v2.Code_ILLEGAL_FILTER_EXPRESSION, Message: "unknown filter type " + f.GetType().String()}
	}
	te, err := message.ParseTagExpression(f.GetExpression())
	if err != nil {
		return "", "", &v2.Status{Code: v2.Code_ILLEGAL_FILTER_EXPRESSION, Message: err.Error()}
	}
	return broker.ExprTag, te.String(), nil
}

// consumeNames checks the group and topic a consume RPC names and returns
// the broker's (namespace-folded) names for them.
func consumeNames(meta callMeta, group, topic *v2.Resource) (string, string, *v2.Status) {
	g, err := meta.groupName(group)
	if err != nil {
		return "", "", statusOf(err)
	}
	t, err := meta.topicName(topic)
	if err != nil {
		return "", "", statusOf(err)
	}
	return g, t, nil
}
