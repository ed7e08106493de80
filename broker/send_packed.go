package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// PackedSent is what SendPacked stored.
type PackedSent struct {
	Results []store.PutResult
	// Queues holds each message's queue when the send's did not hold for
	// all (a repeat answered with an earlier copy stored elsewhere, a
	// delayed message parked in its level's queue); nil: all the send's.
	Queues []int32
}

// QueueID is the queue of the i-th message of a send to queue sendQueue.
func (s PackedSent) QueueID(i int, sendQueue int32) int32 {
	if s.Queues == nil {
		return sendQueue
	}
	return s.Queues[i]
}

// SendPacked stores the messages of packed (message.Packed entries, all to
// queueID of topicName) as Send stores the same messages: the same checks,
// deduplication, rewrites, acknowledgement and metrics. Messages that are
// not transactional, sent to a topic that is not a retry or system topic,
// become records by copying their parts (message.EncodePacked), with no
// property map built; a delayed one has its properties edited as Send's
// rewrite changes them (delay.Placement). A batch holding a half message,
// or sent to a retry topic, is decoded and sent through Send's path.
// packed is not kept after SendPacked returns.
func (b *Broker) SendPacked(ctx context.Context, topicName string, queueID int32, packed []byte) (PackedSent, error) {
	start := time.Now()
	sc := packedScratches.Get().(*packedScratch)
	defer sc.release()
	var (
		sent PackedSent
		e    *topicEntry
	)
	err := sc.parse(packed, b.opts.MaxBatchMessages)
	switch {
	case err != nil:
	case sc.scan(topicName):
		sent, e, err = b.sendPlainPacked(ctx, topicName, queueID, sc)
	default:
		sent, e, err = b.sendUnpacked(ctx, topicName, queueID, sc.entries)
	}
	b.countSend(ctx, start, e, len(sc.entries), func(i int) int { return len(sc.entries[i].Body) }, err)
	return sent, err
}

// sendUnpacked sends entries as messages with property maps, through
// Send's path.
func (b *Broker) sendUnpacked(ctx context.Context, topicName string, queueID int32, entries []message.Packed) (PackedSent, *topicEntry, error) {
	msgs := make([]*message.Ext, len(entries))
	for i := range entries {
		m, err := entries[i].Ext(topicName, queueID)
		if err != nil {
			return PackedSent{}, nil, errcode.Errorf(errcode.MessageIllegal, "packed message %d: %v", i, err)
		}
		msgs[i] = m
	}
	res, e, err := b.send(ctx, msgs, -1)
	if err != nil {
		return PackedSent{}, e, err
	}
	sent := PackedSent{Results: res}
	if slices.ContainsFunc(msgs, func(m *message.Ext) bool { return m.QueueID != queueID }) {
		sent.Queues = make([]int32, len(msgs))
		for i, m := range msgs {
			sent.Queues[i] = m.QueueID
		}
	}
	return sent, e, nil
}

// sendPlainPacked is SendPacked's path for messages stored from their
// entries (packedScratch.scan).
func (b *Broker) sendPlainPacked(ctx context.Context, topicName string, queueID int32, sc *packedScratch) (PackedSent, *topicEntry, error) {
	n := len(sc.entries)
	if err := b.admitSend(n, topicName); err != nil {
		return PackedSent{}, nil, err
	}
	e := b.topics.entry(topicName)
	if e == nil {
		if err := message.ValidateTopic(topicName); err != nil {
			return PackedSent{}, nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
		}
	}
	for i := range sc.entries {
		p := &sc.entries[i]
		var err error
		if e, err = b.checkSendTo(topicName, queueID, len(p.Body), len(p.Properties), e); err != nil {
			return PackedSent{}, nil, err
		}
	}
	if err := sc.encode(topicName, queueID, b.store.StoreHost(), b.store.Now().UnixMilli(), &b.opts.Delay, b.opts.BrokerName); err != nil {
		return PackedSent{}, e, storeError(err)
	}
	var window time.Duration
	if b.dedup != nil {
		window = b.dedupWindowOf(&e.cfg)
	}
	var res []store.PutResult
	var err error
	if window > 0 {
		res, err = b.sendDeduplicated(ctx, topicName, n, packedSend{b, sc}, window)
	} else {
		res, err = b.putPrepared(ctx, sc.prepared)
	}
	sent := PackedSent{Results: res}
	if len(sc.answers) > 0 {
		sent.Queues = slices.Clone(sc.answers)
	}
	return sent, e, err
}

// putPrepared is put for records encoded by the caller (store.PutPrepared).
func (b *Broker) putPrepared(ctx context.Context, recs []store.Prepared) ([]store.PutResult, error) {
	return b.acknowledged(ctx, func() ([]store.PutResult, error) {
		return b.store.PutPrepared(ctx, recs, make([]store.PutResult, 0, len(recs)))
	})
}

// packedSend is a send of packed plain messages, for sendDeduplicated.
type packedSend struct {
	b  *Broker
	sc *packedScratch
}

func (s packedSend) uniqueID(i int) string { return s.sc.prepared[i].UniqueKey }

func (s packedSend) putFresh(ctx context.Context, fresh []int) ([]store.PutResult, error) {
	recs := s.sc.prepared
	if len(fresh) < len(recs) {
		sub := make([]store.Prepared, len(fresh))
		for k, i := range fresh {
			sub[k] = recs[i]
		}
		recs = sub
	}
	return s.b.putPrepared(ctx, recs)
}

// answered records a repeat's queue: that of the copy answering it.
func (s packedSend) answered(i int, q int32, same int) {
	queues := s.sc.queues()
	if same >= 0 {
		q = queues[same]
	}
	queues[i] = q
}

// packedScratch is what SendPacked works in, kept in packedScratches for
// the next send.
type packedScratch struct {
	entries  []message.Packed
	meta     []packedMeta // what scan read of each entry
	values   []byte       // the entries' keys and unique ids, one after the other
	prepared []store.Prepared
	records  []byte // the encoded records, one after the other
	props    []byte // a delayed entry's edited properties, while it is encoded
	edits    []message.PropertyEdit
	answers  []int32 // the queues of the send's messages, when not all the send's
}

// packedMeta is what scan reads of an entry's properties for its
// dispatch: its tag's hash, TIMER_OUT_MS, and where its keys and unique id
// are in packedScratch.values (an empty span: none); and the values of
// the properties that ask for a delay (nil: absent), which encode places.
type packedMeta struct {
	tagsHash, timerOutMS     int64
	keys, keysEnd, id, idEnd int32
	delayed                  bool
	delay                    [len(delayProperties)][]byte
}

// delayProperties are the properties that ask for a delay: a level or a
// delivery time (delay.BrokerOptions.Place reads them).
var delayProperties = [...]string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS,
	message.PropertyTimerDelayMS, message.PropertyTimerDelaySec}

// property is the value of the delay property name (one of
// delayProperties) and whether the entry has it.
func (m *packedMeta) property(name string) (string, bool) {
	for i, n := range delayProperties {
		if n == name {
			return string(m.delay[i]), m.delay[i] != nil
		}
	}
	return "", false
}

// maxPooledRecords is the largest record buffer kept for the next send.
const maxPooledRecords = 4 << 20

var packedScratches = sync.Pool{New: func() any { return new(packedScratch) }}

func (sc *packedScratch) release() {
	if cap(sc.records) > maxPooledRecords || cap(sc.entries) > maxPooledBatch {
		return
	}
	clear(sc.entries)
	clear(sc.meta) // (its delay values point into the request too)
	clear(sc.prepared)
	sc.answers = sc.answers[:0]
	packedScratches.Put(sc)
}

// parse reads the entries of packed: at least one, at most limit.
func (sc *packedScratch) parse(packed []byte, limit int) error {
	sc.entries = sc.entries[:0]
	if len(packed) == 0 {
		return errcode.Errorf(errcode.InvalidParameter, "send request holds no message")
	}
	for len(packed) > 0 {
		if len(sc.entries) == limit {
			return errcode.Errorf(errcode.InvalidParameter, "batch of more than %d messages exceeds the limit of %d", limit, limit)
		}
		p, rest, err := message.NextPacked(packed)
		if err != nil {
			return errcode.Errorf(errcode.MessageIllegal, "packed message %d: %v", len(sc.entries), err)
		}
		sc.entries = append(sc.entries, p)
		packed = rest
	}
	return nil
}

// scan reads what the dispatch needs of each entry's properties, and
// reports whether the send can be stored from its entries: the topic is
// not a retry, dead-letter or system topic (Send's checks and rules for
// those are on messages), and no message is transactional (Send rewrites a
// half message into the half topic).
func (sc *packedScratch) scan(topicName string) bool {
	if message.IsRetryTopic(topicName) || message.IsDLQTopic(topicName) || message.IsSystemTopic(topicName) {
		return false
	}
	values := sc.values[:0]
	sc.meta = sc.meta[:0]
	for i := range sc.entries {
		p := &sc.entries[i]
		if message.TransactionType(p.SysFlag) != message.SysFlagTransNotType {
			return false
		}
		var m packedMeta
		half := false
		// (NextPacked checked the pairs: the walk finds no error.)
		_ = message.EachProperty(p.Properties, func(name, val []byte) error {
			switch string(name) {
			case message.PropertyTags:
				m.tagsHash = message.TagsHash(string(val))
			case message.PropertyKeys:
				m.keys = int32(len(values))
				values = append(values, val...)
				m.keysEnd = int32(len(values))
			case message.PropertyUniqueKey:
				m.id = int32(len(values))
				values = append(values, val...)
				m.idEnd = int32(len(values))
			case message.PropertyTimerOutMS:
				m.timerOutMS = message.ParseTimerOutMS(val)
			case message.PropertyDelayLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS, message.PropertyTimerDelaySec:
				m.delayed = true
				for i, n := range delayProperties {
					if n == string(name) {
						m.delay[i] = val // (an empty value is not nil: the property is there)
					}
				}
			case message.PropertyTransactionPrepared:
				half = true
			}
			return nil
		})
		if half {
			return false
		}
		sc.meta = append(sc.meta, m)
	}
	sc.values = values
	return true
}

// encode writes the entries' records for queueID of topicName, stored by
// storeHost, with now as the born time of those without one, and what
// their dispatch needs (read by scan). A delayed entry is placed as
// Send's rewrite places it (delay.BrokerOptions.Place, with the broker's
// delay options o and name brokerName) and written where it says, with its
// properties edited as it says. The queues of the messages are kept in
// answers when one is not queueID.
func (sc *packedScratch) encode(topicName string, queueID int32, storeHost netip.AddrPort, now int64, o *delay.BrokerOptions, brokerName string) error {
	recs := sc.records[:0]
	sc.prepared = sc.prepared[:0]
	sc.answers = sc.answers[:0]
	// The keys and ids outlive the send (the dispatch may run after the
	// answer): one string for the batch, cut into each record's.
	all := string(sc.values)
	moved := false // a message is stored in another queue than the send's
	for i := range sc.entries {
		p, m := &sc.entries[i], &sc.meta[i]
		if p.BornTimestamp == 0 {
			p.BornTimestamp = now
		}
		pr := store.Prepared{Topic: topicName, QueueID: queueID, Complete: true,
			Keys: all[m.keys:m.keysEnd], UniqueKey: all[m.id:m.idEnd], TagsHash: m.tagsHash, TimerOutMS: m.timerOutMS}
		entry := p
		if m.delayed {
			pl, err := o.Place(topicName, m.property, brokerName)
			if err != nil {
				return err
			}
			if pl.Rewrite {
				sc.edits = pl.AppendEdits(sc.edits[:0], topicName, queueID)
				if sc.props, err = message.AppendEditedProperties(sc.props[:0], p.Properties, sc.edits); err != nil {
					return fmt.Errorf("packed message %d: %w", i, err)
				}
				edited := *p
				edited.Properties = sc.props
				entry = &edited
				// The dispatch reads the rewritten properties.
				pr.DelayLevel = int32(pl.Level)
				if pl.TimerOut {
					pr.TimerOutMS = pl.TimerOutMS
				}
				if pl.Topic != "" {
					pr.Topic, pr.QueueID = pl.Topic, pl.QueueID
					moved = moved || pl.QueueID != queueID
				}
			}
		}
		var err error
		if recs, err = message.EncodePacked(recs, entry, pr.Topic, pr.QueueID, storeHost); err != nil {
			return err
		}
		sc.prepared = append(sc.prepared, pr)
	}
	sc.records = recs
	if moved {
		sc.queues() // the answer names each message's queue
	}
	// The records are cut once all are written (the buffer may have moved
	// as it grew).
	for i := range sc.prepared {
		rec := recs[:binary.BigEndian.Uint32(recs)]
		recs = recs[len(rec):]
		pr := &sc.prepared[i]
		pr.Record = rec[:len(rec):len(rec)]
		pr.SysFlag = int32(binary.BigEndian.Uint32(rec[message.PosSysFlag:]))
	}
	return nil
}

// queues returns the queues of the send's messages (those encoded so
// far), made on first use from where each is stored.
func (sc *packedScratch) queues() []int32 {
	if len(sc.answers) == 0 {
		for i := range sc.prepared {
			sc.answers = append(sc.answers, sc.prepared[i].QueueID)
		}
	}
	return sc.answers
}
