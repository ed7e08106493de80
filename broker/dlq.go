package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Dead-letter listing and replay marks.
//
// A replayed dead letter is marked so that replaying the whole queue again
// skips it. The mark is a small JSON record appended to the CommitLog in
// queue 0 of ReplayMarkTopic, a topic kept out of the topic table (it is not
// routed, listed or pullable). Being a log record, a mark is flushed and
// replicated to slaves like any message, so a promoted slave knows it. The
// broker keeps the marks in memory, keyed by the dead letter's CommitLog
// offset (never reused, unlike a queue offset after the DLQ topic is
// deleted and created again), and catches up with the marker queue on
// every access, so marks that reached a slave by replication are seen too.
// A mark is always newer than its dead letter, so retention never deletes
// a mark while its dead letter is kept.

// ReplayMarkTopic holds replay marks (see above).
const ReplayMarkTopic = "rmq_sys_DLQ_REPLAYED"

// replayMarkRecord is the body of a mark.
type replayMarkRecord struct {
	Group       string `json:"group"`
	DLQOffset   int64  `json:"dlqCommitLogOffset"`
	DLQMsgID    string `json:"dlqMsgId"`
	AtMS        int64  `json:"atMs"`
	Topic       string `json:"topic"`
	MsgID       string `json:"msgId"`
	NewUniqueID string `json:"uniqueId"`
}

func (r *replayMarkRecord) toProto() *pb.ReplayMark {
	return &pb.ReplayMark{AtMs: r.AtMS, Topic: r.Topic, MsgId: r.MsgID, UniqueId: r.NewUniqueID}
}

// replayMarks caches the marks read from ReplayMarkTopic.
type replayMarks struct {
	// mu protects next and marks, and orders mark writes.
	mu    sync.Mutex
	next  int64                       // marker queue offset read up to
	marks map[int64]*replayMarkRecord // dead letter's CommitLog offset → mark
}

// catchUpMarksLocked reads the marks appended since the last call;
// b.dlqMarks.mu must be held.
func (b *Broker) catchUpMarksLocked() error {
	rm := &b.dlqMarks
	if rm.marks == nil {
		rm.marks = make(map[int64]*replayMarkRecord)
	}
	for {
		res, err := b.store.GetMessages(ReplayMarkTopic, 0, rm.next, 256, 4<<20, nil)
		if err != nil {
			return storeError(err)
		}
		switch res.Status {
		case store.Found:
		case store.OffsetTooSmall, store.OffsetOverflowBadly:
			if res.NextOffset == rm.next {
				return nil
			}
			rm.next = res.NextOffset
			continue
		default:
			return nil
		}
		for _, rec := range res.Records {
			m, err := message.Decode(rec)
			if err != nil {
				b.log.Warn("replay mark unreadable; skipped", zap.Error(err))
				continue
			}
			var r replayMarkRecord
			if err := json.Unmarshal(m.Body, &r); err != nil {
				b.log.Warn("replay mark malformed; skipped", zap.Error(err))
				continue
			}
			if _, ok := rm.marks[r.DLQOffset]; !ok {
				rm.marks[r.DLQOffset] = &r
			}
		}
		rm.next = res.QueueOffsets[len(res.QueueOffsets)-1] + 1
	}
}

// replayMarksFor returns the marks of the given dead letters (by CommitLog
// offset).
func (b *Broker) replayMarksFor(offsets []int64) (map[int64]*replayMarkRecord, error) {
	b.dlqMarks.mu.Lock()
	defer b.dlqMarks.mu.Unlock()
	if err := b.catchUpMarksLocked(); err != nil {
		return nil, err
	}
	out := make(map[int64]*replayMarkRecord)
	for _, off := range offsets {
		if r := b.dlqMarks.marks[off]; r != nil {
			out[off] = r
		}
	}
	return out, nil
}

// DeadLetterQuery selects dead letters of a group.
type DeadLetterQuery struct {
	Group   string
	Offset  int64
	Max     int
	SinceMS int64
	IDs     []string
}

// maxDLQScan bounds the dead letters one listing reads.
const maxDLQScan = 10000

// DeadLetters lists a group's dead letters on this broker from q.Offset,
// oldest first; next continues the listing.
func (b *Broker) DeadLetters(q DeadLetterQuery) (entries []*pb.DeadLetterEntry, next, minOff, maxOff int64, err error) {
	if err := message.ValidateGroup(q.Group); err != nil {
		return nil, 0, 0, 0, wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	topic := message.DLQTopic(q.Group)
	if _, ok := b.topics.get(topic); !ok {
		return nil, 0, 0, 0, nil
	}
	limit := q.Max
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	minOff, maxOff = b.store.QueueOffsets(topic, 0)
	off := max(q.Offset, minOff)
	scanned := 0
	var phys []int64
	for len(entries) < limit && scanned < maxDLQScan && off < maxOff {
		res, err := b.store.GetMessages(topic, 0, off, min(256, limit-len(entries)+32), 16<<20, nil)
		if err != nil {
			return nil, 0, 0, 0, storeError(err)
		}
		if res.Status != store.Found {
			if res.NextOffset > off {
				off = res.NextOffset
				continue
			}
			break
		}
		for i, rec := range res.Records {
			if len(entries) == limit {
				break
			}
			off = res.QueueOffsets[i] + 1
			scanned++
			m, err := message.Decode(rec)
			if err != nil {
				b.log.Warn("dead letter unreadable; skipped", zap.Int64("queueOffset", res.QueueOffsets[i]), zap.Error(err))
				continue
			}
			if q.SinceMS > 0 && m.StoreTimestamp < q.SinceMS {
				continue
			}
			e := deadLetterEntry(m, rec)
			if len(q.IDs) > 0 && !slices.Contains(q.IDs, e.MsgId) && !slices.Contains(q.IDs, e.UniqueId) && !slices.Contains(q.IDs, e.OriginMsgId) {
				continue
			}
			entries = append(entries, e)
			phys = append(phys, m.PhysicalOffset)
		}
	}
	marks, err := b.replayMarksFor(phys)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	for i, e := range entries {
		if r := marks[phys[i]]; r != nil {
			e.Replayed = r.toProto()
		}
	}
	return entries, off, minOff, maxOff, nil
}

func deadLetterEntry(m *message.Ext, rec []byte) *pb.DeadLetterEntry {
	p := m.Properties
	ms := func(k string) int64 {
		v, _ := strconv.ParseInt(p[k], 10, 64)
		return v
	}
	e := &pb.DeadLetterEntry{
		QueueOffset: m.QueueOffset, MsgId: m.MsgID(), UniqueId: m.UniqueID(),
		OriginTopic: p[message.PropertyDLQOriginTopic], OriginMsgId: p[message.PropertyDLQOriginMessageID],
		ReconsumeTimes: m.ReconsumeTimes, FirstFailureMs: ms(PropertyFirstFailureMS), LastFailureMs: m.StoreTimestamp,
		Reason: p[PropertyFailureReason], Record: rec,
	}
	if e.OriginTopic == "" {
		e.OriginTopic = p[message.PropertyRetryTopic]
	}
	if e.OriginMsgId == "" {
		e.OriginMsgId = p[message.PropertyOriginMessageID]
	}
	if e.FirstFailureMs == 0 {
		e.FirstFailureMs = m.StoreTimestamp
	}
	return e
}

// MarkReplayed records that the dead letter at queueOffset of the group's
// DLQ was replayed. It returns the mark in force and whether it existed.
func (b *Broker) MarkReplayed(ctx context.Context, group string, queueOffset int64, msgID string, mark *pb.ReplayMark) (*pb.ReplayMark, bool, error) {
	if err := message.ValidateGroup(group); err != nil {
		return nil, false, wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	if mark == nil {
		return nil, false, wire.Errorf(pb.Code_INVALID_PARAMETER, "no replay mark given")
	}
	if err := b.checkWritable(); err != nil {
		return nil, false, err
	}
	topic := message.DLQTopic(group)
	res, err := b.store.GetMessages(topic, 0, queueOffset, 1, 16<<20, nil)
	if err != nil {
		return nil, false, storeError(err)
	}
	if res.Status != store.Found || res.QueueOffsets[0] != queueOffset {
		return nil, false, wire.Errorf(pb.Code_QUERY_NOT_FOUND, "no dead letter at offset %d of %s on broker %s", queueOffset, topic, b.opts.BrokerName)
	}
	m, err := message.Decode(res.Records[0])
	if err != nil {
		return nil, false, storeError(err)
	}
	if msgID != "" && m.MsgID() != msgID {
		return nil, false, wire.Errorf(pb.Code_QUERY_NOT_FOUND, "the dead letter at offset %d of %s is %s, not %s", queueOffset, topic, m.MsgID(), msgID)
	}
	rm := &b.dlqMarks
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if err := b.catchUpMarksLocked(); err != nil {
		return nil, false, err
	}
	if r := rm.marks[m.PhysicalOffset]; r != nil {
		return r.toProto(), true, nil
	}
	r := &replayMarkRecord{Group: group, DLQOffset: m.PhysicalOffset, DLQMsgID: m.MsgID(), AtMS: mark.AtMs,
		Topic: mark.Topic, MsgID: mark.MsgId, NewUniqueID: mark.UniqueId}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, false, err
	}
	if err := b.checkInSync(); err != nil {
		return nil, false, err
	}
	put, err := b.store.PutBatch(ctx, []*message.Ext{{Message: message.Message{Topic: ReplayMarkTopic, Body: body,
		Properties: map[string]string{message.PropertyKeys: group}}, BornTimestamp: time.Now().UnixMilli()}}, nil)
	if err != nil {
		return nil, false, storeError(err)
	}
	if err := b.waitReplicated(ctx, put); err != nil {
		return nil, false, err
	}
	// Cached now; the catch-up that reads the record back keeps this one.
	rm.marks[r.DLQOffset] = r
	return r.toProto(), false, nil
}
