package txn

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// outcome is how a transaction ended.
type outcome uint8

const (
	outcomeNone outcome = iota
	outcomeCommit
	outcomeRollback
	outcomeDiscard
)

func (o outcome) String() string {
	switch o {
	case outcomeCommit:
		return "COMMIT"
	case outcomeRollback:
		return "ROLLBACK"
	case outcomeDiscard:
		return "DISCARD"
	}
	return "NONE"
}

func parseOutcome(s string) outcome {
	switch s {
	case "COMMIT":
		return outcomeCommit
	case "ROLLBACK":
		return outcomeRollback
	case "DISCARD":
		return outcomeDiscard
	}
	return outcomeNone
}

const (
	// decidedTTL is how long an outcome stays in memory after it was
	// reached. Later repeats of an end are answered from the op records
	// (through the IndexFile, key = transaction id).
	decidedTTL = time.Minute
	// checkBatch bounds the half messages re-appended by one CommitLog
	// append during a check pass.
	checkBatch = 128
	// lookupSlack widens the time range of index lookups around a half
	// message's born time (producer clocks drift).
	lookupSlack = 10 * time.Minute
)

// halfCopy locates one stored copy of a half message.
type halfCopy struct {
	queueOffset int64
	phys        int64
	storeMS     int64
}

// txn is a transaction without an outcome, as the service tracks it.
type txn struct {
	// mu serialises ending and checking this transaction; the fields below
	// are guarded by Service.mu.
	mu sync.Mutex

	id, group, topic, uniq string
	queueID                int32
	copies                 []int64 // half-queue offsets of the copies seen
	cur                    halfCopy
	firstStoreMS           int64
	bornMS                 int64
	checkTimes             int32
	immunity               time.Duration
	nextCheckMS            int64
	verified               bool // the store was searched for a lost outcome
	outcome                outcome
}

type decidedEntry struct {
	outcome outcome
	at      time.Time
}

type decidedKey struct {
	id string
	at time.Time
}

// counters are the service's counters since the broker started.
type counters struct {
	halfMessages, checks, checksSent, checksNoProducer atomic.Int64
	commits, rollbacks, discards                       atomic.Int64
	duplicates, conflicts, unknownAnswers              atomic.Int64
}

// Service is the transaction service of a master broker. It leads (loads
// the state, tails the half queue and checks back) while the role gate
// says master; End, Pending and Stats serve requests.
//
// Lock order: a transaction's txn.mu before Service.mu; life is never held
// with either.
type Service struct {
	host       Host
	brokerName string
	opts       Options
	log        *zap.Logger

	// life guards the activation: Lead starts one, the end of its context
	// stops it. ready is closed once the running activation has loaded its
	// state (at once while inactive).
	life   sync.Mutex
	active bool
	closed bool
	ready  chan struct{}
	// ctx is the running activation's context (read by its goroutine).
	ctx context.Context

	mu       sync.Mutex
	pending  map[string]*txn
	decided  map[string]decidedEntry
	expiry   []decidedKey    // decided, oldest first
	tail     int64           // next half-queue offset to read
	opRefs   map[int64]int64 // op-queue offset → highest half offset it names
	inflight map[*txn]int64  // ends being written → a lower bound of their op offset
	halfOff  int64           // consume offsets last committed
	opOff    int64

	stats counters
}

// New returns the transaction service of broker brokerName. It does
// nothing until the role gate calls Lead.
func New(h Host, brokerName string, opts Options, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Service{host: h, brokerName: brokerName, opts: opts, log: log, ready: make(chan struct{}), ctx: context.Background()}
	close(s.ready)
	s.reset()
	return s
}

// reset empties the in-memory state (it is rebuilt by load).
func (s *Service) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending, s.decided, s.expiry = make(map[string]*txn), make(map[string]decidedEntry), nil
	s.opRefs, s.inflight = make(map[int64]int64), make(map[*txn]int64)
	s.tail, s.halfOff, s.opOff = 0, -1, -1
}

// Lead runs the service until ctx ends: it loads the state from the store
// (the half and op queues replicate with the CommitLog), then tails the
// half queue and checks back. The role gate calls it when the broker
// becomes the master and cancels ctx when it stops being one; wait returns
// once the service has stopped, its progress committed to the offset table.
func (s *Service) Lead(ctx context.Context) (wait func()) {
	s.reset()
	ready, done := make(chan struct{}), make(chan struct{})
	s.life.Lock()
	s.ctx, s.ready, s.active = ctx, ready, true
	s.life.Unlock()
	go func() {
		defer close(done)
		s.run(ctx, ready)
	}()
	return func() {
		<-done
		s.life.Lock()
		s.active = false
		s.life.Unlock()
	}
}

// Close refuses requests from now on (SHUTTING_DOWN). The role gate stops
// the service itself; its progress is in the offset table.
func (s *Service) Close() {
	s.life.Lock()
	s.closed = true
	s.life.Unlock()
}

// tick is how often the service looks for due checks.
func (s *Service) tick() time.Duration {
	return min(max(min(s.opts.Timeout, s.opts.CheckInterval)/5, 10*time.Millisecond), time.Second)
}

func (s *Service) run(ctx context.Context, ready chan struct{}) {
	if err := s.load(); err != nil {
		// Keep serving what can be served: ends still work on pending
		// transactions found later by the tailer.
		s.log.Error("load transaction state", zap.Error(err))
	}
	close(ready)
	t := time.NewTicker(s.tick())
	defer t.Stop()
	for {
		arrived := s.host.HalfArrival()
		s.tailHalf(nil)
		select {
		case <-ctx.Done():
			s.advance()
			return
		case <-arrived:
			continue
		case <-t.C:
		}
		now := time.Now()
		s.checkDue(now)
		s.advance()
		s.prune(now)
	}
}

// waitReady waits until the state is loaded; it refuses when the broker
// is not a master.
func (s *Service) waitReady(ctx context.Context) error {
	s.life.Lock()
	closed := s.closed
	s.life.Unlock()
	if closed {
		return errcode.Errorf(errcode.ShuttingDown, "broker %s is stopping", s.brokerName)
	}
	// Promoted (or demoted) since the gate's watcher last looked: the
	// gate applies the role now.
	leads := s.host.SyncRole()
	s.life.Lock()
	ready, active := s.ready, s.active && s.ctx.Err() == nil
	s.life.Unlock()
	if !leads || !active {
		return errcode.Errorf(errcode.NotMaster, "broker %s is not a master: transactions end on the master", s.brokerName)
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return errcode.Errorf(errcode.Timeout, "transaction state is still loading: %v", ctx.Err())
	}
}

// ---- loading and tailing ----------------------------------------------

// load rebuilds the state: op records from the op consume offset, then the
// half queue from the half consume offset, skipping what the op records
// say has ended.
func (s *Service) load() error {
	start := time.Now()
	// Everything already written must be in the queues first: an op
	// record missed here would leave its transaction looking pending.
	if err := s.host.WaitDispatched(s.ctx); err != nil {
		return fmt.Errorf("wait for dispatch: %w", err)
	}
	halfFrom := s.host.ConsumeOffset(message.TransHalfTopic)
	if minOff, _ := s.host.QueueOffsets(message.TransHalfTopic); halfFrom < minOff {
		halfFrom = minOff
	}
	opFrom := s.host.ConsumeOffset(message.TransOpHalfTopic)
	if minOff, _ := s.host.QueueOffsets(message.TransOpHalfTopic); opFrom < minOff {
		opFrom = minOff
	}
	endedAt := make(map[int64]outcome) // half offset → outcome
	endedID := make(map[string]outcome)
	var ops int
	err := s.scan(message.TransOpHalfTopic, opFrom, func(qo int64, m *message.Ext) {
		ops++
		o := parseOutcome(m.Properties[PropertyOutcome])
		if o == outcomeNone {
			o = outcomeRollback // an op record without outcome: ended, as RocketMQ reads it
		}
		offs := parseOpBody(m.Body)
		hi := int64(-1)
		for _, off := range offs {
			endedAt[off] = o
			hi = max(hi, off)
		}
		if id := m.Properties[message.PropertyTransactionID]; id != "" {
			endedID[id] = o
		}
		if hi >= halfFrom {
			s.mu.Lock()
			s.opRefs[qo] = hi
			s.mu.Unlock()
		}
	})
	if err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	for id, o := range endedID {
		s.rememberLocked(id, o, now)
	}
	s.tail = halfFrom
	s.halfOff, s.opOff = halfFrom, opFrom
	s.mu.Unlock()
	halfs := 0
	s.tailHalf(func(m *message.Ext, id string) {
		halfs++
		if o, ok := endedAt[m.QueueOffset]; ok {
			if _, known := s.decided[id]; !known {
				s.rememberLocked(id, o, now)
			}
		}
	})
	s.mu.Lock()
	pending := len(s.pending)
	s.mu.Unlock()
	s.log.Info("transaction state loaded", zap.Int64("halfFrom", halfFrom), zap.Int64("opFrom", opFrom),
		zap.Int("opRecords", ops), zap.Int("halfRecords", halfs), zap.Int("pending", pending),
		zap.Duration("took", time.Since(start)))
	return nil
}

// scan reads a queue of the store from an offset to its end.
func (s *Service) scan(topic string, from int64, fn func(qo int64, m *message.Ext)) error {
	for {
		res, err := s.host.GetMessages(topic, from, 256)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", topic, from, err)
		}
		switch res.Status {
		case store.Found:
		case store.NoMatchedMessage, store.OffsetTooSmall:
			if res.NextOffset <= from {
				return nil
			}
			from = res.NextOffset
			continue
		default:
			return nil
		}
		for i, rec := range res.Records {
			m, err := message.Decode(rec)
			if err != nil {
				s.log.Warn("skip undecodable record", zap.String("topic", topic), zap.Int64("offset", res.QueueOffsets[i]), zap.Error(err))
				continue
			}
			fn(res.QueueOffsets[i], m)
		}
		from = res.NextOffset
	}
}

// tailHalf ingests the half queue from the tail to its end. before, if
// set, runs under the lock ahead of each ingest (loading uses it).
func (s *Service) tailHalf(before func(m *message.Ext, id string)) {
	s.mu.Lock()
	from := s.tail
	s.mu.Unlock()
	for s.ctx.Err() == nil {
		res, err := s.host.GetMessages(message.TransHalfTopic, from, 256)
		if err != nil {
			s.log.Warn("read half queue", zap.Int64("offset", from), zap.Error(err))
			return
		}
		switch res.Status {
		case store.Found:
		case store.NoMatchedMessage, store.OffsetTooSmall:
			// Records removed by retention.
			if res.NextOffset <= from {
				return
			}
			s.mu.Lock()
			s.tail = max(s.tail, res.NextOffset)
			s.mu.Unlock()
			from = res.NextOffset
			continue
		default:
			return
		}
		msgs := make([]*message.Ext, len(res.Records))
		for i, rec := range res.Records {
			m, err := message.Decode(rec)
			if err != nil {
				s.log.Warn("skip undecodable half record", zap.Int64("offset", res.QueueOffsets[i]), zap.Error(err))
				continue
			}
			msgs[i] = m
		}
		s.mu.Lock()
		for _, m := range msgs {
			if m == nil || m.QueueOffset < s.tail {
				continue
			}
			if before != nil {
				before(m, ID(m))
			}
			s.ingestLocked(m)
		}
		s.tail = max(s.tail, res.NextOffset)
		s.mu.Unlock()
		from = res.NextOffset
	}
}

// ID is the transaction id of a stored half message (or of a copy of one).
func ID(m *message.Ext) string {
	if id := m.Properties[message.PropertyTransactionID]; id != "" {
		return id
	}
	return m.UniqueID()
}

func propInt(m *message.Ext, k string) int64 {
	v, err := strconv.ParseInt(m.Properties[k], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// ingestLocked adds a copy of a half message to its pending transaction,
// creating it, unless the transaction already ended. s.mu is held.
func (s *Service) ingestLocked(m *message.Ext) *txn {
	id := ID(m)
	if id == "" {
		return nil
	}
	c := halfCopy{queueOffset: m.QueueOffset, phys: m.PhysicalOffset, storeMS: m.StoreTimestamp}
	ct := int32(propInt(m, message.PropertyTransactionCheckTimes))
	if t := s.pending[id]; t != nil {
		if !slices.Contains(t.copies, c.queueOffset) {
			t.copies = append(t.copies, c.queueOffset)
		}
		if c.queueOffset > t.cur.queueOffset {
			t.cur = c
			t.checkTimes = max(t.checkTimes, ct)
			s.scheduleLocked(t)
		}
		return t
	}
	if _, ok := s.decided[id]; ok {
		return nil // a late copy (a producer's retry) of an ended transaction
	}
	qid, _ := strconv.Atoi(m.Properties[message.PropertyRealQueueID])
	t := &txn{
		id: id, group: m.Properties[message.PropertyProducerGroup], topic: m.Properties[message.PropertyRealTopic],
		uniq: m.UniqueID(), queueID: int32(qid), copies: []int64{c.queueOffset}, cur: c,
		firstStoreMS: c.storeMS, bornMS: m.BornTimestamp, checkTimes: ct,
		immunity: time.Duration(propInt(m, message.PropertyCheckImmunityTime)) * time.Second,
	}
	s.scheduleLocked(t)
	s.pending[id] = t
	if ct == 0 {
		s.stats.halfMessages.Add(1)
	}
	return t
}

// scheduleLocked sets when t is next checked: the timeout (or the
// message's immunity time) after the first copy was stored, then a check
// interval after each re-appended copy.
func (s *Service) scheduleLocked(t *txn) {
	if t.checkTimes == 0 {
		t.nextCheckMS = t.cur.storeMS + max(s.opts.Timeout, t.immunity).Milliseconds()
		return
	}
	t.nextCheckMS = t.cur.storeMS + s.opts.CheckInterval.Milliseconds()
}

// rememberLocked keeps an outcome in memory for decidedTTL.
func (s *Service) rememberLocked(id string, o outcome, now time.Time) {
	s.decided[id] = decidedEntry{outcome: o, at: now}
	s.expiry = append(s.expiry, decidedKey{id: id, at: now})
}

// prune forgets outcomes older than decidedTTL.
func (s *Service) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for ; i < len(s.expiry) && now.Sub(s.expiry[i].at) > decidedTTL; i++ {
		k := s.expiry[i]
		if d, ok := s.decided[k.id]; ok && d.at.Equal(k.at) {
			delete(s.decided, k.id)
		}
	}
	if i > 0 {
		s.expiry = slices.Delete(s.expiry, 0, i)
	}
}

// advance computes the internal group's consume offsets and commits them
// to the offset table: the half queue from its oldest copy still pending,
// the op queue from its oldest op record that names a half offset at or
// past that.
func (s *Service) advance() {
	s.mu.Lock()
	if s.halfOff < 0 {
		s.mu.Unlock()
		return // the state was never loaded
	}
	h := s.tail
	for _, t := range s.pending {
		h = min(h, t.cur.queueOffset)
	}
	_, o := s.host.QueueOffsets(message.TransOpHalfTopic)
	for qo, hi := range s.opRefs {
		if hi < h {
			delete(s.opRefs, qo)
			continue
		}
		o = min(o, qo)
	}
	for _, lo := range s.inflight {
		o = min(o, lo)
	}
	// Half first: a snapshot of the table taken between the two commits
	// then holds the new half offset with the old, lower, op offset —
	// which only makes a restart read more op records.
	if h > s.halfOff {
		s.halfOff = h
		s.host.CommitOffset(message.TransHalfTopic, h)
	}
	if o > s.opOff {
		s.opOff = o
		s.host.CommitOffset(message.TransOpHalfTopic, o)
	}
	s.mu.Unlock()
}
