package client

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// defaultBrowseMax is how many messages BrowseQueue returns when the caller
// gives no maximum.
const defaultBrowseMax = 32

// BrowseQueue returns up to max messages of queue mq from offset from on,
// in queue order (RocketMQ's printMsgByQueue), and next: the offset after
// the last message returned, where the following page starts. It pulls
// without a consumer group, so no group's offset moves; it needs the same
// permission as ViewMessageAt. An offset below the queue's first message
// (removed by retention) starts at the first message; the queue's max
// offset gives no message and next = from; an offset past it is an error
// matching ErrQueryNotFound that gives the queue's offsets. max ≤ 0 means
// 32.
func (a *Admin) BrowseQueue(ctx context.Context, mq MessageQueue, from int64, max int) (msgs []*MessageExt, next int64, err error) {
	if err := a.check(); err != nil {
		return nil, from, err
	}
	if err := message.ValidateTopic(mq.Topic); err != nil {
		return nil, from, codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if mq.QueueID < 0 || from < 0 {
		return nil, from, codeErr(pb.Code_INVALID_PARAMETER, "queue id and offset must not be negative, got %d and %d", mq.QueueID, from)
	}
	if max <= 0 {
		max = defaultBrowseMax
	}
	bd, err := a.brokerData(ctx, mq.Topic, mq.BrokerName)
	if err != nil {
		return nil, from, err
	}
	addr := bd.ReadAddr()
	if addr == "" {
		return nil, from, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no address", mq.BrokerName)
	}
	return a.readQueue(ctx, addr, mq, from, -1, max)
}

// readQueue pulls mq from the broker at addr, without a group, from offset
// from up to offset to (exclusive; < 0: the queue's end), at most max
// messages. next is the offset after the last message returned.
func (a *Admin) readQueue(ctx context.Context, addr string, mq MessageQueue, from, to int64, max int) ([]*MessageExt, int64, error) {
	var out []*MessageExt
	offset := from
	for len(out) < max && (to < 0 || offset < to) {
		want := max - len(out)
		if to >= 0 && to-offset < int64(want) {
			want = int(to - offset)
		}
		var resp *pb.PullResponse
		err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
			var err error
			resp, err = c.Pull(ctx, &pb.PullRequest{Topic: mq.Topic, QueueId: mq.QueueID, Offset: offset,
				MaxMessages: int32(want), TagExpression: "*", CommitOffset: -1})
			return resp.GetStatus(), err
		})
		if err != nil {
			return nil, offset, fmt.Errorf("read %s from offset %d: %w", mq, offset, err)
		}
		switch resp.GetPullStatus() {
		case pb.PullStatus_FOUND:
			d := recordDecoder{brokerName: mq.BrokerName}
			for _, rec := range resp.GetRecords() {
				m, err := d.decode(rec)
				if err != nil {
					return nil, offset, fmt.Errorf("read %s from offset %d: %w", mq, offset, err)
				}
				if m.QueueOffset < offset || (to >= 0 && m.QueueOffset >= to) || len(out) == max {
					continue
				}
				out = append(out, m)
				offset = m.QueueOffset + 1
			}
			if n := resp.GetNextOffset(); n > offset && len(out) < max {
				offset = n
			}
		case pb.PullStatus_NO_MATCHED_MESSAGE:
			// Nothing is filtered with "*"; a gap the broker skipped.
			if resp.GetNextOffset() <= offset {
				return out, offset, nil
			}
			offset = resp.GetNextOffset()
		case pb.PullStatus_OFFSET_ILLEGAL:
			minOff, maxOff := resp.GetMinOffset(), resp.GetMaxOffset()
			if offset < minOff && len(out) == 0 {
				offset = minOff // removed by retention: start at the first message kept
				continue
			}
			if minOff >= maxOff {
				return nil, from, codeErr(pb.Code_QUERY_NOT_FOUND, "queue %s has no message at offset %d (it holds none; its next offset is %d)",
					mq, offset, maxOff)
			}
			return nil, from, codeErr(pb.Code_QUERY_NOT_FOUND, "queue %s has no message at offset %d (its offsets are %d..%d)",
				mq, offset, minOff, maxOff-1)
		default: // NO_NEW_MESSAGE: the end of the queue
			return out, offset, nil
		}
	}
	return out, offset, nil
}

// MessagesByTime returns the messages of topic stored at or after begin
// and before end (zero times: no bound), from every queue of every broker
// group of the topic, oldest first, at most max (≤ 0: 64). Each queue's
// range is found with SearchOffset (its first message stored at or after
// each time) and read as BrowseQueue reads; no group's offset moves.
// A result of exactly max messages may have been cut: ask for one more
// than you show to know whether it was.
func (a *Admin) MessagesByTime(ctx context.Context, topic string, begin, end time.Time, max int) ([]*MessageExt, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateTopic(topic); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if !begin.IsZero() && !end.IsZero() && !end.After(begin) {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "the end of the range (%s) is not after its beginning (%s)",
			end.UTC().Format(time.RFC3339Nano), begin.UTC().Format(time.RFC3339Nano))
	}
	if max <= 0 {
		max = defaultQueryMax
	}
	// Store times are milliseconds.
	begin, end = begin.Truncate(time.Millisecond), end.Truncate(time.Millisecond)
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	addrs := make(map[string]string, len(r.Brokers))
	for _, bd := range r.Brokers {
		addrs[bd.BrokerName] = bd.ReadAddr()
	}
	var out []*MessageExt
	for _, qd := range r.Queues {
		addr := addrs[qd.BrokerName]
		if addr == "" || !qd.Perm.Readable() {
			continue
		}
		for q := int32(0); q < qd.ReadQueues; q++ {
			mq := MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: q}
			// A queue's store times only grow, so its oldest max messages
			// in the range are all it can add to the oldest max overall.
			msgs, err := a.queueByTime(ctx, addr, mq, begin, end, max)
			if err != nil {
				return nil, err
			}
			out = append(out, msgs...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// queueByTime reads the messages of one queue stored in [begin, end).
func (a *Admin) queueByTime(ctx context.Context, addr string, mq MessageQueue, begin, end time.Time, max int) ([]*MessageExt, error) {
	lo, err := a.searchOffset(ctx, addr, mq, begin)
	if err != nil {
		return nil, err
	}
	hi := int64(-1)
	if !end.IsZero() {
		if hi, err = a.searchOffset(ctx, addr, mq, end); err != nil {
			return nil, err
		}
		if hi <= lo {
			return nil, nil
		}
	}
	msgs, _, err := a.readQueue(ctx, addr, mq, lo, hi, max)
	if err != nil {
		return nil, err
	}
	kept := msgs[:0]
	for _, m := range msgs {
		if (begin.IsZero() || !m.StoreTimestamp.Before(begin)) && (end.IsZero() || m.StoreTimestamp.Before(end)) {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

// searchOffset returns the offset of mq's first message stored at or after
// t (the queue's min offset for a zero t).
func (a *Admin) searchOffset(ctx context.Context, addr string, mq MessageQueue, t time.Time) (int64, error) {
	var off int64
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		if t.IsZero() {
			resp, err := c.GetQueueOffsets(ctx, &pb.GetQueueOffsetsRequest{Topic: mq.Topic, QueueId: mq.QueueID})
			off = resp.GetMinOffset()
			return resp.GetStatus(), err
		}
		resp, err := c.SearchOffset(ctx, &pb.SearchOffsetRequest{Topic: mq.Topic, QueueId: mq.QueueID, TimestampMs: t.UnixMilli()})
		off = resp.GetOffset()
		return resp.GetStatus(), err
	})
	if err != nil {
		return 0, fmt.Errorf("offset of %s at %s: %w", mq, t.UTC().Format(time.RFC3339Nano), err)
	}
	return off, nil
}
