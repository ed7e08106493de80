package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// opBody is RocketMQ's op record body: half offsets, each followed by ",".
func opBody(offs []int64) []byte {
	var sb strings.Builder
	for _, o := range offs {
		sb.WriteString(strconv.FormatInt(o, 10))
		sb.WriteByte(',')
	}
	return []byte(sb.String())
}

func parseOpBody(b []byte) []int64 {
	var out []int64
	for _, f := range strings.Split(string(b), ",") {
		if v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func (s *Service) opMessage(t *txn, copies []int64, o outcome) *message.Ext {
	return &message.Ext{
		Message: message.Message{Topic: message.TransOpHalfTopic, Body: opBody(copies), Properties: map[string]string{
			message.PropertyTags:          opTag,
			message.PropertyKeys:          t.id,
			message.PropertyTransactionID: t.id,
			message.PropertyProducerGroup: t.group,
			PropertyOutcome:               o.String(),
		}},
		BornTimestamp: time.Now().UnixMilli(),
	}
}

func cloneProps(p map[string]string) map[string]string {
	out := make(map[string]string, len(p)+1)
	for k, v := range p {
		out[k] = v
	}
	return out
}

// RealMessage is the committed form of a stored half message: its real
// topic and queue, properties minus REAL_* and TRAN_MSG, sysflag COMMIT.
func RealMessage(m *message.Ext) (*message.Ext, error) {
	r, err := message.Restore(m, message.PropertyTransactionPrepared)
	if err != nil {
		return nil, err
	}
	r.Properties[message.PropertyTransactionPreparedQOff] = strconv.FormatInt(m.QueueOffset, 10)
	r.SysFlag = m.SysFlag - message.TransactionType(m.SysFlag) + message.SysFlagTransCommit
	r.PreparedTransactionOffset = m.PhysicalOffset
	return r, nil
}

// copyMessage is a new copy of a half message for topic/queue, with props
// changed by set.
func copyMessage(m *message.Ext, topic string, set map[string]string) *message.Ext {
	props := cloneProps(m.Properties)
	for k, v := range set {
		props[k] = v
	}
	return &message.Ext{
		Message:        message.Message{Topic: topic, Flag: m.Flag, Body: m.Body, Properties: props},
		QueueID:        0,
		SysFlag:        m.SysFlag - message.TransactionType(m.SysFlag),
		BornTimestamp:  m.BornTimestamp,
		BornHost:       m.BornHost,
		ReconsumeTimes: m.ReconsumeTimes,
	}
}

// finish writes the outcome of t, which the caller has locked (t.mu) and
// which has none yet: the real message (commit) or the discarded copy
// (discard) from m, then the op record, in one append. extra=false writes
// only the op record (repairing a lost one). Once the first record is
// written the transaction has ended, whatever the flush wait says.
func (s *Service) finish(ctx context.Context, t *txn, m *message.Ext, o outcome, extra bool) ([]store.PutResult, error) {
	if err := s.host.Writable(); err != nil {
		return nil, err
	}
	if err := s.host.InSync(); err != nil {
		return nil, err
	}
	var entries []*message.Ext
	if extra {
		switch o {
		case outcomeCommit:
			real, err := RealMessage(m)
			if err != nil {
				return nil, fmt.Errorf("transaction %s: %w", t.id, err)
			}
			entries = append(entries, real)
		case outcomeDiscard:
			entries = append(entries, copyMessage(m, message.TransCheckMaxTopic, map[string]string{
				PropertyDiscardTime: strconv.FormatInt(time.Now().UnixMilli(), 10),
			}))
		}
	}
	s.mu.Lock()
	copies := slices.Clone(t.copies)
	_, opLow := s.host.QueueOffsets(message.TransOpHalfTopic)
	s.inflight[t] = opLow
	s.mu.Unlock()
	slices.Sort(copies)
	entries = append(entries, s.opMessage(t, copies, o))
	res, err := s.host.Append(context.WithoutCancel(ctx), entries)
	s.mu.Lock()
	delete(s.inflight, t)
	if len(res) > 0 {
		t.outcome = o
		if s.pending[t.id] == t {
			delete(s.pending, t.id)
		}
		s.rememberLocked(t.id, o, time.Now())
		if len(res) == len(entries) {
			s.opRefs[res[len(res)-1].QueueOffset] = copies[len(copies)-1]
		}
	}
	s.mu.Unlock()
	if len(res) > 0 {
		switch o {
		case outcomeCommit:
			s.stats.commits.Add(1)
		case outcomeRollback:
			s.stats.rollbacks.Add(1)
		case outcomeDiscard:
			s.stats.discards.Add(1)
		}
	}
	if err != nil {
		return res, err
	}
	if err := s.host.WaitReplicated(ctx, res); err != nil {
		return res, err
	}
	return res, nil
}

// State is a producer's answer about its local transaction. The values
// are those of bolide.v1's TransactionState.
type State int32

// The states.
const (
	// StateUnknown: not decided yet; the service checks back later.
	StateUnknown  State = 0
	StateCommit   State = 1
	StateRollback State = 2
)

// EndRequest is a protocol-independent end of a transaction.
type EndRequest struct {
	ProducerGroup   string
	Topic           string
	CommitLogOffset int64
	// HalfQueueOffset is the half message's offset in the half queue
	// (RocketMQ's tranStateTableOffset).
	HalfQueueOffset int64
	MsgID           string // unique id, checked when set
	TransactionID   string // checked when set
	State           State
	FromCheck       bool
}

// EndResult is what an end did.
type EndResult struct {
	// Duplicate: the transaction had already ended this way.
	Duplicate bool
	// Stored is where a commit wrote the real message (nil otherwise).
	Stored *store.PutResult
	// QueueID of the real message.
	QueueID int32
}

func stateOutcome(st State) outcome {
	switch st {
	case StateCommit:
		return outcomeCommit
	case StateRollback:
		return outcomeRollback
	}
	return outcomeNone
}

// End commits or rolls back a half message, validated against the stored
// half message; see service Transaction in transaction.proto.
func (s *Service) End(ctx context.Context, req EndRequest) (EndResult, error) {
	if err := message.ValidateGroup(req.ProducerGroup); err != nil {
		return EndResult{}, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if err := s.waitReady(ctx); err != nil {
		return EndResult{}, err
	}
	want := stateOutcome(req.State)
	if want == outcomeNone {
		if req.State != StateUnknown {
			return EndResult{}, errcode.Errorf(errcode.InvalidParameter, "unknown transaction state %d", req.State)
		}
		// Not decided yet: the check service asks again later.
		if req.FromCheck {
			s.stats.unknownAnswers.Add(1)
		}
		return EndResult{}, nil
	}
	m, err := s.host.ReadMessage(req.CommitLogOffset)
	if err != nil || m.Topic != message.TransHalfTopic {
		return EndResult{}, errcode.Errorf(errcode.TransactionNotFound, "no half message at CommitLog offset %d", req.CommitLogOffset)
	}
	id := ID(m)
	switch {
	case m.QueueOffset != req.HalfQueueOffset:
		err = fmt.Errorf("half queue offset %d does not match the half message's %d", req.HalfQueueOffset, m.QueueOffset)
	case m.Properties[message.PropertyProducerGroup] != req.ProducerGroup:
		err = fmt.Errorf("producer group %q does not match the half message's %q", req.ProducerGroup, m.Properties[message.PropertyProducerGroup])
	case req.Topic != "" && req.Topic != m.Properties[message.PropertyRealTopic]:
		err = fmt.Errorf("topic %q does not match the half message's %q", req.Topic, m.Properties[message.PropertyRealTopic])
	case req.TransactionID != "" && req.TransactionID != id:
		err = fmt.Errorf("transaction id %q does not match the half message's %q", req.TransactionID, id)
	case req.MsgID != "" && req.MsgID != m.UniqueID() && req.MsgID != m.MsgID():
		err = fmt.Errorf("message id %q does not match the half message's %q", req.MsgID, m.UniqueID())
	case id == "":
		err = errors.New("the half message has no transaction id")
	}
	if err != nil {
		return EndResult{}, errcode.Errorf(errcode.InvalidParameter, "end transaction at CommitLog offset %d: %v", req.CommitLogOffset, err)
	}
	s.mu.Lock()
	t := s.pending[id]
	var ended outcome
	if t == nil {
		if d, ok := s.decided[id]; ok {
			ended = d.outcome
		} else if m.QueueOffset >= s.tail {
			t = s.ingestLocked(m) // not read by the tailer yet
		}
	}
	s.mu.Unlock()
	if t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		s.mu.Lock()
		ended = t.outcome
		s.mu.Unlock()
		if ended == outcomeNone {
			res, err := s.finish(ctx, t, m, want, true)
			out := EndResult{}
			if want == outcomeCommit && len(res) > 1 {
				out.Stored, out.QueueID = &res[0], t.queueID
			}
			if err == nil {
				s.log.Debug("transaction ended", zap.String("id", id), zap.Stringer("outcome", want), zap.Bool("fromCheck", req.FromCheck))
			}
			return out, err
		}
	}
	if ended == outcomeNone {
		// Ended long ago: the op records know how.
		ended = s.lookup(id, m)
	}
	switch {
	case ended == outcomeNone:
		return EndResult{}, errcode.Errorf(errcode.TransactionNotFound, "transaction %s is neither pending nor known to have ended on broker %s", id, s.brokerName)
	case ended == want:
		s.stats.duplicates.Add(1)
		return EndResult{Duplicate: true}, nil
	}
	s.stats.conflicts.Add(1)
	return EndResult{}, errcode.Errorf(errcode.TransactionStateConflict, "transaction %s was already ended with %s; %s refused", id, ended, want)
}

// lookup searches the store for how a transaction ended: its op record
// (through the IndexFile, key = transaction id). It returns outcomeNone
// when none is found (or the index is off).
func (s *Service) lookup(id string, m *message.Ext) outcome {
	begin, end := m.BornTimestamp-lookupSlack.Milliseconds(), time.Now().Add(time.Minute).UnixMilli()
	ops, err := s.host.QueryByKey(message.TransOpHalfTopic, id, begin, end, 8)
	if err != nil {
		return outcomeNone
	}
	for _, op := range ops {
		if op.Properties[message.PropertyTransactionID] == id {
			if o := parseOutcome(op.Properties[PropertyOutcome]); o != outcomeNone {
				return o
			}
		}
	}
	return outcomeNone
}

// lost searches the store for an outcome written without its op record (a
// crash between the two records of one append): a committed real message
// or a discarded copy.
func (s *Service) lost(t *txn, m *message.Ext) outcome {
	if t.uniq == "" {
		return outcomeNone
	}
	begin, end := m.BornTimestamp-lookupSlack.Milliseconds(), time.Now().Add(time.Minute).UnixMilli()
	if msgs, err := s.host.QueryByKey(t.topic, t.uniq, begin, end, 8); err == nil {
		for _, r := range msgs {
			if message.TransactionType(r.SysFlag) == message.SysFlagTransCommit && ID(r) == t.id &&
				r.Properties[message.PropertyProducerGroup] == t.group {
				return outcomeCommit
			}
		}
	}
	if msgs, err := s.host.QueryByKey(message.TransCheckMaxTopic, t.uniq, begin, end, 8); err == nil {
		for _, r := range msgs {
			if ID(r) == t.id {
				return outcomeDiscard
			}
		}
	}
	return outcomeNone
}
