package pop

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/message"
)

// MaxInvisible is the longest invisible duration a request may ask for.
const MaxInvisible = 12 * time.Hour

// appendTimeout bounds a POP log append (flush and replication waits
// have their own, shorter, limits).
const appendTimeout = 30 * time.Second

// releaseDelay is how long the messages of a released client stay
// invisible (Apache's invisibleTimeMillisWhenClear).
const releaseDelay = time.Second

// dlqHold keeps a message that is being dead-lettered invisible; if the
// dead-letter write fails it is tried again after it.
const dlqHold = 30 * time.Second

// Request is one POP receive (broker.PopRequest).
type Request struct {
	Group, Topic  string
	QueueID       int32         // -1: any readable queue of the topic on this broker
	MaxMessages   int           // 0 → 32; capped by Options.MaxMessages
	Invisible     time.Duration // how long handed-out messages stay invisible; (0, 12h]
	TagExpression string        // "" or "*": all; "a || b" tags; or an SQL92 condition (ExpressionType)
	// ExpressionType says what TagExpression is: "" or "TAG" a tag
	// expression, "SQL92" a condition over the message's properties.
	ExpressionType string
	PollTimeout    time.Duration // long poll when nothing is ready; 0 answers at once; capped by LongPollMax
	ClientID       string        // who receives (needed for AutoRenew)
	AutoRenew      bool          // keep the messages invisible while ClientID is alive
	AttemptID      string        // FIFO: a retry with the same attempt id gets the same batch again
}

// Message is one message handed out (broker.PoppedMessage).
type Message struct {
	Record      []byte // the stored record (commitlog layout)
	QueueID     int32
	QueueOffset int64
	Attempt     int32     // delivery attempt, 1 on first delivery
	Handle      string    // receipt handle
	VisibleAt   time.Time // when it becomes visible again unless acknowledged
}

// QueueStats is the POP state of one queue (broker.PopQueueStats).
type QueueStats struct {
	QueueID     int32
	AckedOffset int64 // low watermark: every offset below is done
	NextOffset  int64 // next offset to hand out for the first time
	InFlight    int   // messages handed out and not done
	Redelivered int64 // redeliveries so far
}

// GroupConfig is what the service needs of a consumer group.
type GroupConfig struct {
	Fifo        bool
	MaxAttempts int
	// Backoff is the wait before the next delivery after a failed delivery
	// attempt (1-based).
	Backoff func(attempt int32) time.Duration
	// Refusal, when not nil, is why the group may not receive now (its
	// consumption is disabled): Pop answers it, before handing out anything
	// and again after each wait.
	Refusal error
}

// Filter is a compiled receive filter.
type Filter struct {
	TagCode func(int64) bool      // nil: every tag code
	Match   func(rec []byte) bool // nil: every record TagCode lets through
}

// TopicInfo is what the service needs of a topic.
type TopicInfo struct {
	ReadQueues int32
	Readable   bool
}

// Host is the broker as the service sees it. Errors carry errcode codes.
type Host interface {
	// Writable refuses on a broker that is not the master (NOT_MASTER).
	Writable() error
	// SyncRole applies the role now (the role gate) and reports whether the
	// master-only services lead.
	SyncRole() bool
	Topic(name string) (TopicInfo, bool)
	Group(group string) GroupConfig
	// Filter compiles a receive's filter (errcode SubscriptionParseFailed,
	// NoPermission for SQL92 on a broker that does not filter by it).
	Filter(exprType, expr string) (Filter, error)
	// GetMessages reads a queue; filter.TagCode sees tag codes,
	// filter.Match records (both optional).
	GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter Filter) (store.GetResult, error)
	QueueOffsets(topic string, queueID int32) (minOff, maxOff int64)
	// ConsumeOffset is the group's committed offset, or -1.
	ConsumeOffset(group, topic string, queueID int32) int64
	CommitOffset(group, topic string, queueID int32, offset int64)
	// AppendLog stores records in the POP log (one message each, one
	// append) as a send is stored, and returns the queue offset of the
	// last.
	AppendLog(ctx context.Context, bodies [][]byte) (int64, error)
	// WaitDispatched returns once every record in the CommitLog now is in
	// the consume queues.
	WaitDispatched(ctx context.Context) error
	// ConnectedClients returns the ids of the clients connected now
	// (sessions kept alive by heartbeats).
	ConnectedClients() map[string]bool
	// DeadLetter stores a copy of the stored record in the group's
	// dead-letter queue, as the retry service does.
	DeadLetter(ctx context.Context, group string, record []byte, attempt int32, maxAttempts int, reason string) error
}

// Options configure the service.
type Options struct {
	BrokerName       string
	SnapshotPath     string
	SnapshotInterval time.Duration // 5 s
	RenewInterval    time.Duration // how often auto-renewal looks (1 s)
	RenewMax         time.Duration // auto-renewal stops after (3 h)
	ClientIdle       time.Duration // a client not seen for this long is not renewed for (2 min)
	MaxMessages      int           // cap of a batch
	MaxBytes         int           // about this many record bytes a batch
	LongPollMax      time.Duration
}

func (o *Options) defaults() {
	if o.SnapshotInterval <= 0 {
		o.SnapshotInterval = 5 * time.Second
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = time.Second
	}
	if o.RenewMax <= 0 {
		o.RenewMax = 3 * time.Hour
	}
	if o.ClientIdle <= 0 {
		o.ClientIdle = 2 * time.Minute
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = 1024
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 4 << 20
	}
	if o.LongPollMax <= 0 {
		o.LongPollMax = 30 * time.Second
	}
}

// Service is the POP state machine of one broker.
type Service struct {
	h    Host
	opts Options
	log  *zap.Logger

	mu  sync.Mutex
	gts map[gtKey]*groupTopic

	// snapMu: operations hold it shared from their first state change to
	// the end of their POP log append; a snapshot holds it exclusively, so
	// the state it copies is exactly the log up to tailPos.
	snapMu  sync.RWMutex
	tailMu  sync.Mutex   // serialises reading the POP log
	tailPos atomic.Int64 // POP log queue offset the state covers
	seq     atomic.Uint64
	changes atomic.Int64 // state changes (a snapshot is skipped without)
	// snapChanges is changes at the last snapshot (under snapMu).
	snapChanges int64

	modeMu sync.Mutex
	master bool
	ready  chan struct{} // closed while the service serves as master

	clientsMu sync.Mutex
	lastSeen  map[string]time.Time
	released  map[string]time.Time

	signals sync.Map // topic → *notify.Signal
	rr      atomic.Uint32

	loaded       chan struct{}
	ctx          context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	startOnce    sync.Once
	closeOnce    sync.Once
	skipSnapshot atomic.Bool
}

// New returns the service; Start loads its state.
func New(h Host, opts Options, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	opts.defaults()
	s := &Service{h: h, opts: opts, log: log, gts: make(map[gtKey]*groupTopic), ready: make(chan struct{}),
		lastSeen: make(map[string]time.Time), released: make(map[string]time.Time), loaded: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Start loads the state (snapshot, then the POP log after it) and runs the
// housekeeping: the POP log tail while not the master; renewal and
// offset commits while the master; snapshots always.
func (s *Service) Start() {
	s.startOnce.Do(func() {
		s.wg.Add(1)
		go s.run()
	})
}

// Close stops the service and writes a last snapshot. Call it after the
// role gate has stopped the service's lead and before the store closes.
func (s *Service) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		select {
		case <-s.loaded:
		default:
			return // never loaded: nothing to save
		}
		if s.skipSnapshot.Load() {
			return
		}
		err = s.snapshot(true)
	})
	return err
}

// SkipSnapshotOnClose makes Close write no snapshot (tests of recovery from
// an older snapshot and the log, as after a kill).
func (s *Service) SkipSnapshotOnClose() { s.skipSnapshot.Store(true) }

// Notify wakes the receives parked on a topic (a message arrived).
func (s *Service) Notify(topic string) {
	if v, ok := s.signals.Load(topic); ok {
		v.(*notify.Signal).Notify()
	}
}

func (s *Service) signal(topic string) *notify.Signal {
	if v, ok := s.signals.Load(topic); ok {
		return v.(*notify.Signal)
	}
	v, _ := s.signals.LoadOrStore(topic, &notify.Signal{})
	return v.(*notify.Signal)
}

func (s *Service) run() {
	defer s.wg.Done()
	if err := s.load(); err != nil {
		s.log.Error("load POP state", zap.Error(err))
	}
	close(s.loaded)
	tick := time.NewTicker(min(s.opts.RenewInterval, s.opts.SnapshotInterval))
	defer tick.Stop()
	lastSnap := time.Now()
	for {
		// A follower wakes on each POP log record; the master on ticks.
		var arrived <-chan struct{}
		if !s.isMaster() {
			arrived = s.signal(message.PopLogTopic).C()
			s.tail()
		}
		select {
		case <-s.ctx.Done():
			return
		case <-arrived:
			continue
		case now := <-tick.C:
			if s.isMaster() {
				s.renew(now)
				s.commitWatermarks()
			}
			s.pruneClients(now)
			if now.Sub(lastSnap) >= s.opts.SnapshotInterval {
				lastSnap = now
				if err := s.snapshot(false); err != nil {
					s.log.Warn("POP snapshot", zap.Error(err))
				}
			}
		}
	}
}

// load reads the snapshot, then the POP log after it.
func (s *Service) load() error {
	start := time.Now()
	snapErr := s.loadSnapshot()
	if snapErr != nil {
		s.log.Error("POP snapshot unreadable; replaying the whole POP log", zap.Error(snapErr))
		s.mu.Lock()
		s.gts = make(map[gtKey]*groupTopic)
		s.mu.Unlock()
		s.tailPos.Store(0)
	}
	if err := s.h.WaitDispatched(s.ctx); err != nil {
		return fmt.Errorf("wait for dispatch: %w", err)
	}
	if _, end := s.h.QueueOffsets(message.PopLogTopic, 0); s.tailPos.Load() > end {
		// The log lost its tail after the snapshot was written (a crash of
		// the machine before a flush): records appended since would be
		// skipped. The log alone is the truth then.
		s.log.Warn("POP snapshot is ahead of the POP log; replaying the whole log",
			zap.Int64("snapshot", s.tailPos.Load()), zap.Int64("log", end))
		s.mu.Lock()
		s.gts = make(map[gtKey]*groupTopic)
		s.mu.Unlock()
		s.tailPos.Store(0)
	}
	from := s.tailPos.Load()
	n := s.tailAll()
	inflight := 0
	for _, gt := range s.groupTopics() {
		gt.mu.Lock()
		for _, q := range gt.qs {
			inflight += len(q.inflight)
		}
		gt.mu.Unlock()
	}
	s.log.Info("POP state loaded", zap.Int64("logFrom", from), zap.Int("records", n),
		zap.Int("inFlight", inflight), zap.Duration("took", time.Since(start)))
	return nil
}

// ---- role ---------------------------------------------------------------

func (s *Service) isMaster() bool {
	s.modeMu.Lock()
	defer s.modeMu.Unlock()
	return s.master
}

// Lead serves POP as the master until ctx ends (the role gate calls it):
// it first applies the whole POP log the broker holds (a promoted slave's
// replicated records), then serves.
func (s *Service) Lead(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-s.loaded:
		case <-ctx.Done():
			return
		}
		if err := s.h.WaitDispatched(ctx); err != nil {
			return
		}
		s.tailMu.Lock()
		s.tailLocked()
		s.modeMu.Lock()
		s.master = true
		close(s.ready)
		s.modeMu.Unlock()
		s.tailMu.Unlock()
		s.graceClients()
		s.log.Info("POP serves as master", zap.Int64("logOffset", s.tailPos.Load()))
		<-ctx.Done()
		s.modeMu.Lock()
		s.master = false
		s.ready = make(chan struct{})
		s.modeMu.Unlock()
		s.commitWatermarks()
	}()
	return func() { <-done }
}

// serving waits until the service serves as master.
func (s *Service) serving(ctx context.Context) error {
	if err := s.h.Writable(); err != nil {
		return err
	}
	if !s.h.SyncRole() {
		return errcode.Errorf(errcode.ServiceNotAvailable, "broker %s: POP is not serving", s.opts.BrokerName)
	}
	s.modeMu.Lock()
	ready := s.ready
	s.modeMu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return errcode.Errorf(errcode.Timeout, "POP state is still loading: %v", ctx.Err())
	case <-s.ctx.Done():
		return errcode.Errorf(errcode.ShuttingDown, "broker %s is stopping", s.opts.BrokerName)
	}
}

// ---- the POP log tail ---------------------------------------------------

// tail applies the POP log records appended since the last call, unless
// the service is the master (which applies its own changes as it makes
// them).
func (s *Service) tail() int {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	if s.isMaster() {
		return 0
	}
	return s.tailLocked()
}

func (s *Service) tailAll() int {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	return s.tailLocked()
}

func (s *Service) tailLocked() int {
	n := 0
	for s.ctx.Err() == nil {
		from := s.tailPos.Load()
		res, err := s.h.GetMessages(message.PopLogTopic, 0, from, 256, 4<<20, Filter{})
		if err != nil {
			s.log.Warn("read the POP log", zap.Int64("offset", from), zap.Error(err))
			return n
		}
		switch res.Status {
		case store.Found:
		case store.NoMatchedMessage, store.OffsetTooSmall:
			if res.NextOffset <= from {
				return n
			}
			s.tailPos.Store(res.NextOffset)
			continue
		default:
			return n
		}
		for i, raw := range res.Records {
			if err := s.applyRaw(raw); err != nil {
				s.log.Warn("skip unreadable POP log record", zap.Int64("offset", res.QueueOffsets[i]), zap.Error(err))
			}
			n++
			s.tailPos.Store(res.QueueOffsets[i] + 1)
		}
	}
	return n
}

func (s *Service) applyRaw(raw []byte) error {
	m, err := message.Decode(raw)
	if err != nil {
		return err
	}
	r, err := DecodeRecord(m.Body)
	if err != nil {
		return err
	}
	gt := s.groupTopic(r.Group, r.Topic)
	s.snapMu.RLock()
	gt.mu.Lock()
	s.applyLocked(gt, r)
	gt.mu.Unlock()
	s.snapMu.RUnlock()
	if r.Kind != KindPop {
		s.Notify(r.Topic)
	}
	return nil
}

// ---- state access -------------------------------------------------------

func (s *Service) groupTopic(group, topic string) *groupTopic {
	k := gtKey{group, topic}
	s.mu.Lock()
	defer s.mu.Unlock()
	gt := s.gts[k]
	if gt == nil {
		gt = &groupTopic{key: k, qs: make(map[int32]*queueState)}
		s.gts[k] = gt
	}
	return gt
}

func (s *Service) lookupGroupTopic(group, topic string) *groupTopic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gts[gtKey{group, topic}]
}

func (s *Service) groupTopics() []*groupTopic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*groupTopic, 0, len(s.gts))
	for _, gt := range s.gts {
		out = append(out, gt)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.group != out[j].key.group {
			return out[i].key.group < out[j].key.group
		}
		return out[i].key.topic < out[j].key.topic
	})
	return out
}

// queueLocked returns a queue's state, creating it at the group's
// committed offset (else the queue's min offset); gt.mu is held.
func (s *Service) queueLocked(gt *groupTopic, q int32) *queueState {
	qs := gt.qs[q]
	if qs != nil {
		return qs
	}
	minOff, maxOff := s.h.QueueOffsets(gt.key.topic, q)
	next := s.h.ConsumeOffset(gt.key.group, gt.key.topic, q)
	if next < minOff {
		next = minOff
	}
	if next > maxOff {
		next = maxOff
	}
	qs = newQueueState(next)
	gt.qs[q] = qs
	return qs
}

// nextSeq returns a new handle sequence: above every one issued, and not
// below the clock in microseconds, so that sequences issued before a crash
// whose records were lost are not issued again.
func (s *Service) nextSeq() uint64 {
	for {
		cur := s.seq.Load()
		n := max(cur+1, uint64(time.Now().UnixMicro()))
		if s.seq.CompareAndSwap(cur, n) {
			return n
		}
	}
}

// append stores records in the POP log; on the master it moves the tail
// position past them.
func (s *Service) append(ctx context.Context, recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	bodies := make([][]byte, 0, len(recs))
	for _, r := range recs {
		b, err := AppendRecord(nil, r)
		if err != nil {
			return errcode.Errorf(errcode.SystemError, "encode POP record: %v", err)
		}
		bodies = append(bodies, b)
	}
	// A caller that goes away must not leave a record half-known: the
	// append completes (or fails) on its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	last, err := s.h.AppendLog(ctx, bodies)
	if err != nil {
		return err
	}
	for {
		cur := s.tailPos.Load()
		if last+1 <= cur || s.tailPos.CompareAndSwap(cur, last+1) {
			return nil
		}
	}
}

// ---- validation ---------------------------------------------------------

func (s *Service) checkNames(group, topic string) error {
	if err := message.ValidateGroup(group); err != nil {
		return errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if err := message.ValidateTopic(topic); err != nil {
		return errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	return nil
}

func (s *Service) checkTopic(topic string) (TopicInfo, error) {
	if message.IsSystemTopic(topic) {
		return TopicInfo{}, errcode.Errorf(errcode.NoPermission, "topic %s is internal to the broker", topic)
	}
	ti, ok := s.h.Topic(topic)
	if !ok {
		return TopicInfo{}, errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", topic, s.opts.BrokerName)
	}
	if !ti.Readable {
		return TopicInfo{}, errcode.Errorf(errcode.NoPermission, "topic %s is not readable on broker %s", topic, s.opts.BrokerName)
	}
	return ti, nil
}

// resolve decodes a handle of group on topic and returns it with the
// state of its group and topic.
func (s *Service) resolve(group, topic, token string) (Handle, *groupTopic, error) {
	if err := s.checkNames(group, topic); err != nil {
		return Handle{}, nil, err
	}
	h, err := DecodeHandle(group, token)
	if err != nil {
		return h, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "%v", err)
	}
	if h.Broker != s.opts.BrokerName {
		return h, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "receipt handle of broker %s, this is %s", h.Broker, s.opts.BrokerName)
	}
	if h.Topic != topic {
		return h, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "receipt handle of topic %s, not %s", h.Topic, topic)
	}
	gt := s.lookupGroupTopic(group, topic)
	if gt == nil {
		return h, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "no message of group %s on %s is in flight", group, topic)
	}
	return h, gt, nil
}

// validLocked finds the message a handle names and checks that the handle
// is its current one and not expired; gt.mu is held.
func validLocked(gt *groupTopic, h Handle, nowMS int64) (*queueState, *entry, error) {
	q := gt.qs[h.QueueID]
	if q == nil {
		return nil, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "receipt handle names queue %d, which has nothing in flight", h.QueueID)
	}
	e := q.inflight[h.Offset]
	switch {
	case e == nil:
		return nil, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "the message at %s/%d@%d is not in flight (acknowledged, or handle stale)", h.Topic, h.QueueID, h.Offset)
	case e.seq != h.Seq:
		return nil, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "receipt handle is stale: the message was handed out or changed since")
	case e.visibleAt <= nowMS:
		return nil, nil, errcode.Errorf(errcode.InvalidReceiptHandle, "receipt handle is expired")
	}
	return q, e, nil
}

// ---- clients ------------------------------------------------------------

func (s *Service) seen(client string) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	s.lastSeen[client] = time.Now()
	delete(s.released, client)
}

// alive reports whether an auto-renewing client is alive: not released,
// and connected (heartbeating) or receiving within ClientIdle.
func (s *Service) alive(client string, connected map[string]bool, now time.Time) bool {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if _, ok := s.released[client]; ok {
		return false
	}
	if connected[client] {
		return true
	}
	t, ok := s.lastSeen[client]
	return ok && now.Sub(t) < s.opts.ClientIdle
}

// graceClients counts the clients of auto-renewed messages as seen now: a
// new master gives them ClientIdle to come back.
func (s *Service) graceClients() {
	now := time.Now()
	for _, gt := range s.groupTopics() {
		gt.mu.Lock()
		for _, q := range gt.qs {
			for _, e := range q.inflight {
				if e.client != "" {
					s.clientsMu.Lock()
					if _, ok := s.lastSeen[e.client]; !ok {
						s.lastSeen[e.client] = now
					}
					s.clientsMu.Unlock()
				}
			}
		}
		gt.mu.Unlock()
	}
	s.pruneClients(now)
}

// pruneClients forgets clients not seen and released clients after twice
// ClientIdle.
func (s *Service) pruneClients(now time.Time) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	for c, t := range s.lastSeen {
		if now.Sub(t) > 2*s.opts.ClientIdle {
			delete(s.lastSeen, c)
		}
	}
	for c, t := range s.released {
		if now.Sub(t) > 2*s.opts.ClientIdle {
			delete(s.released, c)
		}
	}
}
