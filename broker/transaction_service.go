package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
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
	// pushWait is how long a check waits for room in a producer's
	// notification queue when every connected producer's queue is full.
	pushWait = 100 * time.Millisecond
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
	// are guarded by txnService.mu.
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

// txnStats are counters since the broker started.
type txnStats struct {
	halfMessages, checks, checksSent, checksNoProducer atomic.Int64
	commits, rollbacks, discards                       atomic.Int64
	duplicates, conflicts, unknownAnswers              atomic.Int64
}

// txnService is the transaction service of a master broker.
type txnService struct {
	b    *Broker
	opts TransactionOptions
	log  *zap.Logger
	// isMaster is b.IsMaster (tests replace it).
	isMaster atomic.Pointer[func() bool]

	// life guards the activation: a master runs the service (run), a
	// slave does not. ready is closed once the running service has loaded
	// its state (at once while inactive).
	life    sync.Mutex
	active  bool
	closed  bool
	ready   chan struct{}
	runStop context.CancelFunc
	runDone chan struct{}
	// The role watcher follows replication's role changes.
	watchStop context.CancelFunc
	watchDone chan struct{}
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
	rr       uint64

	stats txnStats
}

func newTxnService(b *Broker) *txnService {
	s := &txnService{b: b, opts: b.opts.Transaction, log: b.log.Named("transaction"), ready: make(chan struct{})}
	isMaster := b.IsMaster
	s.isMaster.Store(&isMaster)
	close(s.ready)
	s.reset()
	return s
}

// reset empties the in-memory state (it is rebuilt by load).
func (s *txnService) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending, s.decided, s.expiry = make(map[string]*txn), make(map[string]decidedEntry), nil
	s.opRefs, s.inflight = make(map[int64]int64), make(map[*txn]int64)
	s.tail, s.halfOff, s.opOff = 0, -1, -1
}

// master reports whether the broker is a master now.
func (s *txnService) master() bool { return (*s.isMaster.Load())() }

// roleWatch is how often the service looks at the broker's role.
const roleWatch = 500 * time.Millisecond

// start runs the service while the broker is a master (b.IsMaster: not a
// slave, not fenced), following role changes.
func (s *txnService) start() error {
	s.setMaster(s.master())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.life.Lock()
	s.watchStop, s.watchDone = cancel, done
	s.life.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(roleWatch)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.setMaster(s.master())
			}
		}
	}()
	return nil
}

// stop stops the service for good; its progress is in the offset table.
func (s *txnService) stop() {
	s.life.Lock()
	stop, done := s.watchStop, s.watchDone
	s.life.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	s.setMaster(false)
	s.life.Lock()
	s.closed = true
	s.life.Unlock()
}

// setMaster starts the service when the broker becomes a master (it loads
// the state from the store: the half and op queues replicate with the
// CommitLog) and stops it when the broker stops being one. Replication's
// role changes call it.
func (s *txnService) setMaster(master bool) {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed || master == s.active {
		return
	}
	if !master {
		s.runStop()
		<-s.runDone
		s.active = false
		return
	}
	s.reset()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	s.ctx, s.runStop, s.runDone, s.ready, s.active = ctx, cancel, done, ready, true
	go func() {
		defer close(done)
		s.run(ctx, ready)
	}()
}

// tick is how often the service looks for due checks.
func (s *txnService) tick() time.Duration {
	return min(max(min(s.opts.Timeout, s.opts.CheckInterval)/5, 10*time.Millisecond), time.Second)
}

func (s *txnService) run(ctx context.Context, ready chan struct{}) {
	if err := s.load(); err != nil {
		// Keep serving what can be served: ends still work on pending
		// transactions found later by the tailer.
		s.log.Error("load transaction state", zap.Error(err))
	}
	close(ready)
	sig := s.b.arrivalSignal(message.TransHalfTopic, 0)
	t := time.NewTicker(s.tick())
	defer t.Stop()
	for {
		arrived := sig.C()
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
func (s *txnService) waitReady(ctx context.Context) error {
	s.life.Lock()
	ready, active, closed := s.ready, s.active, s.closed
	s.life.Unlock()
	if closed {
		return wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", s.b.opts.BrokerName)
	}
	if !active && s.master() {
		// Promoted since the watcher last looked.
		s.setMaster(true)
		s.life.Lock()
		ready, active = s.ready, s.active
		s.life.Unlock()
	}
	if !active {
		return wire.Errorf(pb.Code_NOT_MASTER, "broker %s is not a master: transactions end on the master", s.b.opts.BrokerName)
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return wire.Errorf(pb.Code_TIMEOUT, "transaction state is still loading: %v", ctx.Err())
	}
}

// ---- loading and tailing ----------------------------------------------

// load rebuilds the state: op records from the op consume offset, then the
// half queue from the half consume offset, skipping what the op records
// say has ended.
func (s *txnService) load() error {
	start := time.Now()
	st := s.b.store
	// Everything already written must be in the queues first: an op
	// record missed here would leave its transaction looking pending.
	if err := st.WaitDispatched(s.ctx, st.CommitLog().MaxOffset()); err != nil {
		return fmt.Errorf("wait for dispatch: %w", err)
	}
	halfFrom := s.b.offsets.Query(TransactionGroup, message.TransHalfTopic, 0)
	if minOff, _ := st.QueueOffsets(message.TransHalfTopic, 0); halfFrom < minOff {
		halfFrom = minOff
	}
	opFrom := s.b.offsets.Query(TransactionGroup, message.TransOpHalfTopic, 0)
	if minOff, _ := st.QueueOffsets(message.TransOpHalfTopic, 0); opFrom < minOff {
		opFrom = minOff
	}
	endedAt := make(map[int64]outcome) // half offset → outcome
	endedID := make(map[string]outcome)
	var ops int
	err := s.scan(message.TransOpHalfTopic, opFrom, func(qo int64, m *message.Ext) {
		ops++
		o := parseOutcome(m.Properties[PropertyTransactionOutcome])
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
func (s *txnService) scan(topic string, from int64, fn func(qo int64, m *message.Ext)) error {
	for {
		res, err := s.b.store.GetMessages(topic, 0, from, 256, 4<<20, nil)
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
func (s *txnService) tailHalf(before func(m *message.Ext, id string)) {
	s.mu.Lock()
	from := s.tail
	s.mu.Unlock()
	for s.ctx.Err() == nil {
		res, err := s.b.store.GetMessages(message.TransHalfTopic, 0, from, 256, 4<<20, nil)
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
				before(m, halfID(m))
			}
			s.ingestLocked(m)
		}
		s.tail = max(s.tail, res.NextOffset)
		s.mu.Unlock()
		from = res.NextOffset
	}
}

// halfID is the transaction id of a stored half message.
func halfID(m *message.Ext) string {
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
func (s *txnService) ingestLocked(m *message.Ext) *txn {
	id := halfID(m)
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
func (s *txnService) scheduleLocked(t *txn) {
	if t.checkTimes == 0 {
		t.nextCheckMS = t.cur.storeMS + max(s.opts.Timeout, t.immunity).Milliseconds()
		return
	}
	t.nextCheckMS = t.cur.storeMS + s.opts.CheckInterval.Milliseconds()
}

// rememberLocked keeps an outcome in memory for decidedTTL.
func (s *txnService) rememberLocked(id string, o outcome, now time.Time) {
	s.decided[id] = decidedEntry{outcome: o, at: now}
	s.expiry = append(s.expiry, decidedKey{id: id, at: now})
}

// prune forgets outcomes older than decidedTTL.
func (s *txnService) prune(now time.Time) {
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
func (s *txnService) advance() {
	s.mu.Lock()
	if s.halfOff < 0 {
		s.mu.Unlock()
		return // the state was never loaded
	}
	h := s.tail
	for _, t := range s.pending {
		h = min(h, t.cur.queueOffset)
	}
	_, o := s.b.store.QueueOffsets(message.TransOpHalfTopic, 0)
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
		s.b.offsets.Commit(TransactionGroup, message.TransHalfTopic, 0, h)
	}
	if o > s.opOff {
		s.opOff = o
		s.b.offsets.Commit(TransactionGroup, message.TransOpHalfTopic, 0, o)
	}
	s.mu.Unlock()
}

// ---- ending ---------------------------------------------------------

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

func (s *txnService) opMessage(t *txn, copies []int64, o outcome) *message.Ext {
	return &message.Ext{
		Message: message.Message{Topic: message.TransOpHalfTopic, Body: opBody(copies), Properties: map[string]string{
			message.PropertyTags:          opTag,
			message.PropertyKeys:          t.id,
			message.PropertyTransactionID: t.id,
			message.PropertyProducerGroup: t.group,
			PropertyTransactionOutcome:    o.String(),
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

// realMessage is the committed form of a half message: its real topic and
// queue, properties minus REAL_* and TRAN_MSG, sysflag COMMIT.
func realMessage(m *message.Ext) (*message.Ext, error) {
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
func (s *txnService) finish(ctx context.Context, t *txn, m *message.Ext, o outcome, extra bool) ([]store.PutResult, error) {
	if err := s.b.checkWritable(); err != nil {
		return nil, err
	}
	if err := s.b.checkInSync(); err != nil {
		return nil, err
	}
	var entries []*message.Ext
	if extra {
		switch o {
		case outcomeCommit:
			real, err := realMessage(m)
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
	_, opLow := s.b.store.QueueOffsets(message.TransOpHalfTopic, 0)
	s.inflight[t] = opLow
	s.mu.Unlock()
	slices.Sort(copies)
	entries = append(entries, s.opMessage(t, copies, o))
	res, err := s.b.store.PutBatch(context.WithoutCancel(ctx), entries, make([]store.PutResult, 0, len(entries)))
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
		return res, storeError(err)
	}
	if err := s.b.waitReplicated(ctx, res); err != nil {
		return res, err
	}
	return res, nil
}

// EndTransactionRequest is a protocol-independent end of a transaction.
type EndTransactionRequest struct {
	ProducerGroup   string
	Topic           string
	CommitLogOffset int64
	// HalfQueueOffset is the half message's offset in the half queue
	// (RocketMQ's tranStateTableOffset).
	HalfQueueOffset int64
	MsgID           string // unique id, checked when set
	TransactionID   string // checked when set
	State           pb.TransactionState
	FromCheck       bool
}

// EndTransactionResult is what an end did.
type EndTransactionResult struct {
	// Duplicate: the transaction had already ended this way.
	Duplicate bool
	// Stored is where a commit wrote the real message (nil otherwise).
	Stored *store.PutResult
	// QueueID of the real message.
	QueueID int32
}

func stateOutcome(st pb.TransactionState) outcome {
	switch st {
	case pb.TransactionState_TRANSACTION_STATE_COMMIT:
		return outcomeCommit
	case pb.TransactionState_TRANSACTION_STATE_ROLLBACK:
		return outcomeRollback
	}
	return outcomeNone
}

// EndTransaction commits or rolls back a half message, validated against
// the stored half message; see service Transaction in transaction.proto.
func (b *Broker) EndTransaction(ctx context.Context, req EndTransactionRequest) (EndTransactionResult, error) {
	s := b.txn
	if err := message.ValidateGroup(req.ProducerGroup); err != nil {
		return EndTransactionResult{}, wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	if err := s.waitReady(ctx); err != nil {
		return EndTransactionResult{}, err
	}
	want := stateOutcome(req.State)
	if want == outcomeNone {
		if req.State != pb.TransactionState_TRANSACTION_STATE_UNKNOWN {
			return EndTransactionResult{}, wire.Errorf(pb.Code_INVALID_PARAMETER, "unknown transaction state %d", req.State)
		}
		// Not decided yet: the check service asks again later.
		if req.FromCheck {
			s.stats.unknownAnswers.Add(1)
		}
		return EndTransactionResult{}, nil
	}
	m, err := b.store.ReadMessage(req.CommitLogOffset)
	if err != nil || m.Topic != message.TransHalfTopic {
		return EndTransactionResult{}, wire.Errorf(pb.Code_TRANSACTION_NOT_FOUND, "no half message at CommitLog offset %d", req.CommitLogOffset)
	}
	id := halfID(m)
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
		return EndTransactionResult{}, wire.Errorf(pb.Code_INVALID_PARAMETER, "end transaction at CommitLog offset %d: %v", req.CommitLogOffset, err)
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
			out := EndTransactionResult{}
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
		return EndTransactionResult{}, wire.Errorf(pb.Code_TRANSACTION_NOT_FOUND, "transaction %s is neither pending nor known to have ended on broker %s", id, b.opts.BrokerName)
	case ended == want:
		s.stats.duplicates.Add(1)
		return EndTransactionResult{Duplicate: true}, nil
	}
	s.stats.conflicts.Add(1)
	return EndTransactionResult{}, wire.Errorf(pb.Code_TRANSACTION_STATE_CONFLICT, "transaction %s was already ended with %s; %s refused", id, ended, want)
}

// lookup searches the store for how a transaction ended: its op record
// (through the IndexFile, key = transaction id). It returns outcomeNone
// when none is found (or the index is off).
func (s *txnService) lookup(id string, m *message.Ext) outcome {
	begin, end := m.BornTimestamp-lookupSlack.Milliseconds(), time.Now().Add(time.Minute).UnixMilli()
	ops, err := s.b.store.QueryByKey(message.TransOpHalfTopic, id, begin, end, 8)
	if err != nil {
		return outcomeNone
	}
	for _, op := range ops {
		if op.Properties[message.PropertyTransactionID] == id {
			if o := parseOutcome(op.Properties[PropertyTransactionOutcome]); o != outcomeNone {
				return o
			}
		}
	}
	return outcomeNone
}

// lost searches the store for an outcome written without its op record (a
// crash between the two records of one append): a committed real message
// or a discarded copy.
func (s *txnService) lost(t *txn, m *message.Ext) outcome {
	if t.uniq == "" {
		return outcomeNone
	}
	begin, end := m.BornTimestamp-lookupSlack.Milliseconds(), time.Now().Add(time.Minute).UnixMilli()
	if msgs, err := s.b.store.QueryByKey(t.topic, t.uniq, begin, end, 8); err == nil {
		for _, r := range msgs {
			if message.TransactionType(r.SysFlag) == message.SysFlagTransCommit && halfID(r) == t.id &&
				r.Properties[message.PropertyProducerGroup] == t.group {
				return outcomeCommit
			}
		}
	}
	if msgs, err := s.b.store.QueryByKey(message.TransCheckMaxTopic, t.uniq, begin, end, 8); err == nil {
		for _, r := range msgs {
			if halfID(r) == t.id {
				return outcomeDiscard
			}
		}
	}
	return outcomeNone
}

// ---- checking -------------------------------------------------------

// checkDue checks every pending transaction whose time has come.
func (s *txnService) checkDue(now time.Time) {
	nowMS := now.UnixMilli()
	s.mu.Lock()
	var due []*txn
	for _, t := range s.pending {
		if t.nextCheckMS <= nowMS {
			due = append(due, t)
		}
	}
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	s.mu.Lock()
	sort.Slice(due, func(i, j int) bool { return due[i].cur.queueOffset < due[j].cur.queueOffset })
	s.mu.Unlock()
	for len(due) > 0 && s.ctx.Err() == nil {
		n := min(len(due), checkBatch)
		s.checkBatch(due[:n])
		due = due[n:]
	}
}

// checkItem is one transaction a check pass handles.
type checkItem struct {
	t          *txn
	m          *message.Ext // its newest copy
	checkTimes int32
	group      string
}

// checkBatch checks some due transactions: each is re-appended with one
// more check (one append for all), then a check is pushed to a producer of
// its group; those checked CheckMax times are discarded instead.
func (s *txnService) checkBatch(ts []*txn) {
	var locked []*txn
	for _, t := range ts {
		if t.mu.TryLock() { // busy: being ended right now
			locked = append(locked, t)
		}
	}
	unlock := func() {
		for _, t := range locked {
			t.mu.Unlock()
		}
		locked = nil
	}
	defer unlock()
	var recheck, discard []checkItem
	nowMS := time.Now().UnixMilli()
	for _, t := range locked {
		s.mu.Lock()
		live := t.outcome == outcomeNone && s.pending[t.id] == t && t.nextCheckMS <= nowMS
		cur, ct, verified, group := t.cur, t.checkTimes, t.verified, t.group
		s.mu.Unlock()
		if !live {
			continue
		}
		m, err := s.b.store.ReadMessage(cur.phys)
		if err != nil {
			// Removed by retention: nothing left to check or commit.
			s.log.Warn("half message is gone; forgetting the transaction", zap.String("id", t.id), zap.Int64("offset", cur.phys), zap.Error(err))
			s.mu.Lock()
			if s.pending[t.id] == t {
				delete(s.pending, t.id)
			}
			s.mu.Unlock()
			continue
		}
		if !verified {
			// A transaction found pending after a restart, or a late copy
			// of one: make sure the store holds no outcome for it.
			o, repair := s.lookup(t.id, m), false
			if o == outcomeNone {
				o, repair = s.lost(t, m), true
			}
			s.mu.Lock()
			t.verified = true
			s.mu.Unlock()
			if o != outcomeNone {
				s.log.Info("transaction had already ended", zap.String("id", t.id), zap.Stringer("outcome", o))
				if repair {
					if _, err := s.finish(s.ctx, t, m, o, false); err != nil {
						s.log.Warn("write op record", zap.String("id", t.id), zap.Error(err))
					}
				} else {
					s.mu.Lock()
					t.outcome = o
					delete(s.pending, t.id)
					s.rememberLocked(t.id, o, time.Now())
					s.mu.Unlock()
				}
				continue
			}
		}
		it := checkItem{t: t, m: m, checkTimes: ct, group: group}
		if int(ct) >= s.opts.CheckMax {
			discard = append(discard, it)
		} else {
			recheck = append(recheck, it)
		}
	}
	for _, it := range discard {
		if _, err := s.finish(s.ctx, it.t, it.m, outcomeDiscard, true); err != nil {
			s.log.Warn("discard half message", zap.String("id", it.t.id), zap.Error(err))
			continue
		}
		s.log.Info("half message discarded after the maximum number of checks", zap.String("id", it.t.id),
			zap.String("group", it.group), zap.String("topic", it.t.topic), zap.Int32("checks", it.checkTimes))
	}
	if len(recheck) == 0 {
		return
	}
	if !s.master() {
		return // demoted: the new master checks
	}
	copies := make([]*message.Ext, len(recheck))
	for i, it := range recheck {
		copies[i] = copyMessage(it.m, message.TransHalfTopic, map[string]string{
			message.PropertyTransactionCheckTimes: strconv.Itoa(int(it.checkTimes) + 1),
		})
	}
	res, err := s.b.store.PutBatch(s.ctx, copies, make([]store.PutResult, 0, len(copies)))
	if err != nil && len(res) == 0 {
		s.log.Warn("re-append half messages for check", zap.Error(err))
		return
	}
	type push struct {
		group string
		check *pb.TransactionCheck
	}
	var pushes []push
	s.mu.Lock()
	for i, r := range res {
		it := recheck[i]
		t := it.t
		if !slices.Contains(t.copies, r.QueueOffset) {
			t.copies = append(t.copies, r.QueueOffset)
		}
		if r.QueueOffset > t.cur.queueOffset {
			t.cur = halfCopy{queueOffset: r.QueueOffset, phys: r.PhysicalOffset, storeMS: r.StoreTimestamp}
		}
		t.checkTimes = max(t.checkTimes, it.checkTimes+1)
		s.scheduleLocked(t)
		pushes = append(pushes, push{group: it.group, check: &pb.TransactionCheck{
			ProducerGroup: it.group, Topic: t.topic, QueueId: t.queueID,
			CommitLogOffset: r.PhysicalOffset, TranStateTableOffset: r.QueueOffset,
			MsgId: t.uniq, TransactionId: t.id, OffsetMsgId: r.MsgID, CheckTimes: it.checkTimes + 1,
			BrokerName: s.b.opts.BrokerName,
		}})
	}
	s.mu.Unlock()
	unlock() // the producers' answers need the transactions
	for _, p := range pushes {
		rec, err := s.b.store.ReadRecord(p.check.CommitLogOffset)
		if err != nil {
			continue
		}
		p.check.Record = rec
		s.stats.checks.Add(1)
		if s.pushCheck(p.group, p.check) {
			s.stats.checksSent.Add(1)
		} else {
			s.stats.checksNoProducer.Add(1)
		}
	}
}

// pushCheck hands a check to a connected producer of group (round robin),
// waiting briefly when every one's queue is full. It reports whether one
// took it.
func (s *txnService) pushCheck(group string, c *pb.TransactionCheck) bool {
	conns := s.b.consumers.producersOf(group)
	if len(conns) == 0 {
		s.log.Debug("no live producer for a check", zap.String("group", group), zap.String("id", c.TransactionId))
		return false
	}
	msg := &pb.BrokerMessage{Kind: &pb.BrokerMessage_CheckTransaction{CheckTransaction: c}}
	s.mu.Lock()
	start := int(s.rr % uint64(len(conns)))
	s.rr++
	s.mu.Unlock()
	for i := range conns {
		select {
		case conns[(start+i)%len(conns)].notify <- msg:
			return true
		default:
		}
	}
	t := time.NewTimer(pushWait)
	defer t.Stop()
	select {
	case conns[start].notify <- msg:
		return true
	case <-t.C:
	case <-s.ctx.Done():
	}
	return false
}

// ---- inspection -----------------------------------------------------

// TransactionStats is the state and counters of the transaction service.
type TransactionStats struct {
	Pending, OldestPendingAgeMS                    int64
	HalfMessages, Checks, ChecksSent, ChecksNoProd int64
	Commits, Rollbacks, Discards                   int64
	Duplicates, Conflicts, UnknownAnswers          int64
	HalfConsumeOffset, HalfMaxOffset               int64
	OpConsumeOffset, OpMaxOffset, DiscardedTotal   int64
}

// TransactionStats reports the transaction service's state and counters.
func (b *Broker) TransactionStats() TransactionStats {
	s := b.txn
	now := time.Now().UnixMilli()
	st := TransactionStats{
		HalfMessages: s.stats.halfMessages.Load(), Checks: s.stats.checks.Load(), ChecksSent: s.stats.checksSent.Load(),
		ChecksNoProd: s.stats.checksNoProducer.Load(), Commits: s.stats.commits.Load(), Rollbacks: s.stats.rollbacks.Load(),
		Discards: s.stats.discards.Load(), Duplicates: s.stats.duplicates.Load(), Conflicts: s.stats.conflicts.Load(),
		UnknownAnswers: s.stats.unknownAnswers.Load(),
	}
	s.mu.Lock()
	st.Pending = int64(len(s.pending))
	for _, t := range s.pending {
		st.OldestPendingAgeMS = max(st.OldestPendingAgeMS, now-t.firstStoreMS)
	}
	st.HalfConsumeOffset, st.OpConsumeOffset = max(s.halfOff, 0), max(s.opOff, 0)
	s.mu.Unlock()
	_, st.HalfMaxOffset = b.store.QueueOffsets(message.TransHalfTopic, 0)
	_, st.OpMaxOffset = b.store.QueueOffsets(message.TransOpHalfTopic, 0)
	_, st.DiscardedTotal = b.store.QueueOffsets(message.TransCheckMaxTopic, 0)
	return st
}

// PendingTransaction is a transaction without an outcome.
type PendingTransaction struct {
	Topic, Group, ID    string
	QueueID             int32
	CommitLogOffset     int64
	HalfQueueOffset     int64
	CheckTimes          int32
	BornMS, NextCheckMS int64
	FirstStoreMS        int64
}

// PendingTransactions lists up to max pending transactions of a group
// and/or topic ("" = any), oldest first, and the total pending. It waits
// for the state to be loaded and refuses when the broker is not a master.
func (b *Broker) PendingTransactions(ctx context.Context, group, topic string, max int) ([]PendingTransaction, int, error) {
	s := b.txn
	if err := s.waitReady(ctx); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	total := len(s.pending)
	var out []PendingTransaction
	for _, t := range s.pending {
		if (group != "" && t.group != group) || (topic != "" && t.topic != topic) {
			continue
		}
		out = append(out, PendingTransaction{Topic: t.topic, Group: t.group, ID: t.id, QueueID: t.queueID,
			CommitLogOffset: t.cur.phys, HalfQueueOffset: t.cur.queueOffset, CheckTimes: t.checkTimes,
			BornMS: t.bornMS, NextCheckMS: t.nextCheckMS, FirstStoreMS: t.firstStoreMS})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].FirstStoreMS < out[j].FirstStoreMS })
	if len(out) > max {
		out = out[:max]
	}
	return out, total, nil
}

// DiscardedTransaction is an entry of TRANS_CHECK_MAX_TIME_TOPIC.
type DiscardedTransaction struct {
	Msg    *message.Ext
	Record []byte
}

// DiscardedTransactions reads TRANS_CHECK_MAX_TIME_TOPIC from offset: up
// to max entries of a group and/or topic ("" = any). It returns the
// entries, the offset to continue from and the queue's bounds.
func (b *Broker) DiscardedTransactions(offset int64, max int, group, topic string) (entries []DiscardedTransaction, next, minOff, maxOff int64, err error) {
	minOff, maxOff = b.store.QueueOffsets(message.TransCheckMaxTopic, 0)
	next = offset
	if next < minOff {
		next = minOff
	}
	for pages := 0; len(entries) < max && next < maxOff && pages < 64; pages++ {
		res, err := b.store.GetMessages(message.TransCheckMaxTopic, 0, next, max-len(entries), 4<<20, nil)
		if err != nil {
			return nil, next, minOff, maxOff, storeError(err)
		}
		if res.NextOffset <= next {
			break
		}
		for _, rec := range res.Records {
			m, err := message.Decode(rec)
			if err != nil {
				continue
			}
			if (group != "" && m.Properties[message.PropertyProducerGroup] != group) ||
				(topic != "" && m.Properties[message.PropertyRealTopic] != topic) {
				continue
			}
			entries = append(entries, DiscardedTransaction{Msg: m, Record: rec})
		}
		next = res.NextOffset
	}
	return entries, next, minOff, maxOff, nil
}
