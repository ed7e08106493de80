package retry

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// ReplayMarkTopic holds replay marks (see the package documentation).
const ReplayMarkTopic = "rmq_sys_DLQ_REPLAYED"

// ReplayMark records that a dead letter was replayed.
type ReplayMark struct {
	AtMS int64
	// Topic the replayed message was sent to, and its ids.
	Topic    string
	MsgID    string
	UniqueID string
}

// DeadLetter is one message in %DLQ%<group>.
type DeadLetter struct {
	// QueueOffset in %DLQ%<group>.
	QueueOffset int64
	// MsgID is the dead letter's offset message id.
	MsgID       string
	UniqueID    string
	OriginTopic string
	OriginMsgID string
	// ReconsumeTimes is the count the message was dead-lettered with.
	ReconsumeTimes int32
	// FirstFailureMS is when the message was first sent back,
	// LastFailureMS when it was dead-lettered.
	FirstFailureMS int64
	LastFailureMS  int64
	// Reason is the consumer's last reason ("" when it gave none).
	Reason string
	// Record is the stored dead letter.
	Record []byte
	// Replayed is set once the entry was replayed.
	Replayed *ReplayMark
}

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

func (r *replayMarkRecord) mark() ReplayMark {
	return ReplayMark{AtMS: r.AtMS, Topic: r.Topic, MsgID: r.MsgID, UniqueID: r.NewUniqueID}
}

// replayMarks caches the marks read from ReplayMarkTopic.
type replayMarks struct {
	// mu protects next and marks, and orders mark writes.
	mu    sync.Mutex
	next  int64                       // marker queue offset read up to
	marks map[int64]*replayMarkRecord // dead letter's CommitLog offset → mark
}

// catchUpMarksLocked reads the marks appended since the last call;
// s.marks.mu must be held.
func (s *Service) catchUpMarksLocked() error {
	rm := &s.marks
	if rm.marks == nil {
		rm.marks = make(map[int64]*replayMarkRecord)
	}
	for {
		res, err := s.h.GetMessages(ReplayMarkTopic, 0, rm.next, 256, 4<<20)
		if err != nil {
			return err
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
				s.log.Warn("replay mark unreadable; skipped", zap.Error(err))
				continue
			}
			var r replayMarkRecord
			if err := json.Unmarshal(m.Body, &r); err != nil {
				s.log.Warn("replay mark malformed; skipped", zap.Error(err))
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
func (s *Service) replayMarksFor(offsets []int64) (map[int64]*replayMarkRecord, error) {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	if err := s.catchUpMarksLocked(); err != nil {
		return nil, err
	}
	out := make(map[int64]*replayMarkRecord)
	for _, off := range offsets {
		if r := s.marks.marks[off]; r != nil {
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
func (s *Service) DeadLetters(q DeadLetterQuery) (entries []DeadLetter, next, minOff, maxOff int64, err error) {
	if err := message.ValidateGroup(q.Group); err != nil {
		return nil, 0, 0, 0, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	topic := message.DLQTopic(q.Group)
	if !s.h.HasTopic(topic) {
		return nil, 0, 0, 0, nil
	}
	limit := q.Max
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	minOff, maxOff = s.h.QueueOffsets(topic, 0)
	off := max(q.Offset, minOff)
	scanned := 0
	var phys []int64
	for len(entries) < limit && scanned < maxDLQScan && off < maxOff {
		res, err := s.h.GetMessages(topic, 0, off, min(256, limit-len(entries)+32), 16<<20)
		if err != nil {
			return nil, 0, 0, 0, err
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
				s.log.Warn("dead letter unreadable; skipped", zap.Int64("queueOffset", res.QueueOffsets[i]), zap.Error(err))
				continue
			}
			if q.SinceMS > 0 && m.StoreTimestamp < q.SinceMS {
				continue
			}
			e := deadLetter(m, rec)
			if len(q.IDs) > 0 && !slices.Contains(q.IDs, e.MsgID) && !slices.Contains(q.IDs, e.UniqueID) && !slices.Contains(q.IDs, e.OriginMsgID) {
				continue
			}
			entries = append(entries, e)
			phys = append(phys, m.PhysicalOffset)
		}
	}
	marks, err := s.replayMarksFor(phys)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	for i := range entries {
		if r := marks[phys[i]]; r != nil {
			mk := r.mark()
			entries[i].Replayed = &mk
		}
	}
	return entries, off, minOff, maxOff, nil
}

func deadLetter(m *message.Ext, rec []byte) DeadLetter {
	p := m.Properties
	ms := func(k string) int64 {
		v, _ := strconv.ParseInt(p[k], 10, 64)
		return v
	}
	e := DeadLetter{
		QueueOffset: m.QueueOffset, MsgID: m.MsgID(), UniqueID: m.UniqueID(),
		OriginTopic: p[message.PropertyDLQOriginTopic], OriginMsgID: p[message.PropertyDLQOriginMessageID],
		ReconsumeTimes: m.ReconsumeTimes, FirstFailureMS: ms(PropertyFirstFailureMS), LastFailureMS: m.StoreTimestamp,
		Reason: p[PropertyFailureReason], Record: rec,
	}
	if e.OriginTopic == "" {
		e.OriginTopic = p[message.PropertyRetryTopic]
	}
	if e.OriginMsgID == "" {
		e.OriginMsgID = p[message.PropertyOriginMessageID]
	}
	if e.FirstFailureMS == 0 {
		e.FirstFailureMS = m.StoreTimestamp
	}
	return e
}

// MarkReplayed records that the dead letter at queueOffset of the group's
// DLQ was replayed. It returns the mark in force and whether it existed.
func (s *Service) MarkReplayed(ctx context.Context, group string, queueOffset int64, msgID string, mark *ReplayMark) (ReplayMark, bool, error) {
	if err := message.ValidateGroup(group); err != nil {
		return ReplayMark{}, false, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if mark == nil {
		return ReplayMark{}, false, errcode.Errorf(errcode.InvalidParameter, "no replay mark given")
	}
	if err := s.h.Writable(); err != nil {
		return ReplayMark{}, false, err
	}
	topic := message.DLQTopic(group)
	res, err := s.h.GetMessages(topic, 0, queueOffset, 1, 16<<20)
	if err != nil {
		return ReplayMark{}, false, err
	}
	if res.Status != store.Found || res.QueueOffsets[0] != queueOffset {
		return ReplayMark{}, false, errcode.Errorf(errcode.QueryNotFound, "no dead letter at offset %d of %s on broker %s", queueOffset, topic, s.brokerName)
	}
	m, err := message.Decode(res.Records[0])
	if err != nil {
		// A corrupt record: a system error (errcode.Of), as any uncoded error.
		return ReplayMark{}, false, err
	}
	if msgID != "" && m.MsgID() != msgID {
		return ReplayMark{}, false, errcode.Errorf(errcode.QueryNotFound, "the dead letter at offset %d of %s is %s, not %s", queueOffset, topic, m.MsgID(), msgID)
	}
	rm := &s.marks
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if err := s.catchUpMarksLocked(); err != nil {
		return ReplayMark{}, false, err
	}
	if r := rm.marks[m.PhysicalOffset]; r != nil {
		return r.mark(), true, nil
	}
	r := &replayMarkRecord{Group: group, DLQOffset: m.PhysicalOffset, DLQMsgID: m.MsgID(), AtMS: mark.AtMS,
		Topic: mark.Topic, MsgID: mark.MsgID, NewUniqueID: mark.UniqueID}
	body, err := json.Marshal(r)
	if err != nil {
		return ReplayMark{}, false, err
	}
	if _, err := s.h.Store(ctx, &message.Ext{Message: message.Message{Topic: ReplayMarkTopic, Body: body,
		Properties: map[string]string{message.PropertyKeys: group}}, BornTimestamp: time.Now().UnixMilli()}); err != nil {
		return ReplayMark{}, false, err
	}
	// Cached now; the catch-up that reads the record back keeps this one.
	rm.marks[r.DLQOffset] = r
	return r.mark(), false, nil
}
