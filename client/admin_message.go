package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// defaultQueryMax bounds a key query when the caller gives no maximum.
const defaultQueryMax = 64

// QueryMessageByKey returns up to max messages of topic with key among
// their KEYS (or as their MsgID, the unique id) stored between begin and end (zero
// times: no bound), from every broker of the topic, oldest first.
func (a *Admin) QueryMessageByKey(ctx context.Context, topic, key string, begin, end time.Time, max int) ([]*MessageExt, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "empty key")
	}
	if max <= 0 {
		max = defaultQueryMax
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	req := &pb.QueryMessageRequest{Topic: topic, Key: key, Max: int32(max)}
	if !begin.IsZero() {
		req.BeginMs = begin.UnixMilli()
	}
	if !end.IsZero() {
		req.EndMs = end.UnixMilli()
	}
	var out []*MessageExt
	for _, bd := range r.Brokers {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		var resp *pb.QueryMessageResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.QueryMessage(ctx, req)
			return resp.GetStatus(), err
		})
		if errors.Is(err, ErrQueryNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("query %q in %q on %s: %w", key, topic, bd.BrokerName, err)
		}
		for _, rec := range resp.GetRecords() {
			m, err := extFromRecord(rec, bd.BrokerName)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// IDKind says how ViewMessage matched an id.
type IDKind int

const (
	// ByOffsetMsgID: the id is an offset message id (MessageExt.OffsetMsgID:
	// store host + CommitLog offset) and the broker at that host has the
	// message.
	ByOffsetMsgID IDKind = iota + 1
	// ByMsgID: the id is a message id (MessageExt.MsgID: the unique id,
	// UNIQ_KEY), found through the brokers' indexes.
	ByMsgID
)

// String names the kind.
func (k IDKind) String() string {
	switch k {
	case ByOffsetMsgID:
		return "offset msg id"
	case ByMsgID:
		return "msg id"
	}
	return "unknown"
}

// MessageLookup is the result of ViewMessage.
type MessageLookup struct {
	MatchedBy IDKind
	// Messages: one for an offset message id; for a msg id every stored
	// copy (a retried send may have stored a message twice).
	Messages []*MessageExt
}

// ViewOption modifies ViewMessage.
type ViewOption func(*viewOptions)

type viewOptions struct{ topic string }

// InTopic limits a msg id (unique id) lookup to one topic (without it, every topic
// is searched).
func InTopic(topic string) ViewOption { return func(o *viewOptions) { o.topic = topic } }

// ViewMessage finds a message by either of its ids, like RocketMQ's
// viewMessage: id may be its MsgID (the unique id, UNIQ_KEY) or its
// OffsetMsgID. An id that reads as an offset message id (32 or 56 hex
// characters naming a host and a CommitLog offset) is first asked of the
// broker at that host; an id that is not one, or that this broker does not
// have, is looked up as a MsgID on every broker (through their key
// indexes; InTopic narrows the search). Both kinds are 32 hex characters
// for IPv4 hosts, so the result says which matched. Nothing found is an
// error matching ErrQueryNotFound.
func (a *Admin) ViewMessage(ctx context.Context, id string, opts ...ViewOption) (*MessageLookup, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var vo viewOptions
	for _, o := range opts {
		o(&vo)
	}
	var offsetErr error
	if host, _, err := message.ParseOffsetMsgID(id); err == nil {
		m, err := a.viewByOffsetID(ctx, host.String(), id)
		if err == nil {
			return &MessageLookup{MatchedBy: ByOffsetMsgID, Messages: []*MessageExt{m}}, nil
		}
		offsetErr = err
	}
	// A msg id is whatever id the producer gave: Bolide's and RocketMQ 4's
	// clients make 32 hex characters, RocketMQ 5's 34, an application its
	// own (Message.UniqueID); the index holds it as a key.
	if id == "" || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7F }) {
		if offsetErr != nil {
			return nil, offsetErr
		}
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "%q is neither a msg id (unique id) nor an offset msg id", id)
	}
	topics := []string{vo.topic}
	if vo.topic == "" {
		all, err := a.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		topics = all
	}
	topics = slices.DeleteFunc(topics, func(t string) bool { return message.ValidateTopic(t) != nil })
	msgs, err := a.queryTopics(ctx, topics, id)
	if err != nil {
		return nil, err
	}
	var found []*MessageExt
	for _, m := range msgs {
		if m.MsgID == id {
			found = append(found, m)
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].StoreTimestamp.Before(found[j].StoreTimestamp) })
	if len(found) == 0 {
		if offsetErr != nil {
			return nil, fmt.Errorf("message %s: %w; not found as a msg id (unique id) either", id, offsetErr)
		}
		return nil, codeErr(pb.Code_QUERY_NOT_FOUND, "no message with msg id %s", id)
	}
	return &MessageLookup{MatchedBy: ByMsgID, Messages: found}, nil
}

func (a *Admin) viewByOffsetID(ctx context.Context, addr, offsetMsgID string) (*MessageExt, error) {
	var resp *pb.ViewMessageResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = c.ViewMessage(ctx, &pb.ViewMessageRequest{MsgId: offsetMsgID}) // msg_id: the offset id
		return resp.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("view message %s: %w", offsetMsgID, err)
	}
	name := ""
	if ci, err := a.ClusterInfo(ctx); err == nil {
		name = ci.brokerName(addr)
	}
	m, err := extFromRecord(resp.GetRecord(), name)
	if err != nil {
		return nil, err
	}
	if m.OffsetMsgID != offsetMsgID {
		return nil, codeErr(pb.Code_QUERY_NOT_FOUND, "broker %s returned message %s for %s", addr, m.OffsetMsgID, offsetMsgID)
	}
	return m, nil
}

// ViewMessageAt returns the message at offset of queue mq (RocketMQ's
// queryMsgByOffset): one pull of one message from the queue's broker group
// (its master, or its lowest slave when it has none), without a consumer
// group and without waiting. An offset at which the queue holds no message
// (below its first or at or past its last) is an error matching
// ErrQueryNotFound that gives the queue's offsets.
func (a *Admin) ViewMessageAt(ctx context.Context, mq MessageQueue, offset int64) (*MessageExt, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateTopic(mq.Topic); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if mq.QueueID < 0 || offset < 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "queue id and offset must not be negative, got %d and %d", mq.QueueID, offset)
	}
	bd, err := a.brokerData(ctx, mq.Topic, mq.BrokerName)
	if err != nil {
		return nil, err
	}
	addr := bd.ReadAddr()
	if addr == "" {
		return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no address", mq.BrokerName)
	}
	var resp *pb.PullResponse
	err = a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = c.Pull(ctx, &pb.PullRequest{Topic: mq.Topic, QueueId: mq.QueueID, Offset: offset, MaxMessages: 1,
			TagExpression: "*", CommitOffset: -1})
		return resp.GetStatus(), err
	})
	if err != nil {
		return nil, fmt.Errorf("view %s at offset %d: %w", mq, offset, err)
	}
	if recs := resp.GetRecords(); resp.GetPullStatus() == pb.PullStatus_FOUND && len(recs) > 0 {
		m, err := extFromRecord(recs[0], mq.BrokerName)
		if err != nil {
			return nil, fmt.Errorf("view %s at offset %d: %w", mq, offset, err)
		}
		if m.QueueOffset == offset {
			return m, nil
		}
	}
	minOff, maxOff := resp.GetMinOffset(), resp.GetMaxOffset()
	if minOff >= maxOff {
		return nil, codeErr(pb.Code_QUERY_NOT_FOUND, "queue %s has no message at offset %d (it holds none; its next offset is %d)",
			mq, offset, maxOff)
	}
	return nil, codeErr(pb.Code_QUERY_NOT_FOUND, "queue %s has no message at offset %d (its offsets are %d..%d)",
		mq, offset, minOff, maxOff-1)
}
