package delay

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// BrokerHost is what the delay service needs from its broker: the store,
// an acknowledged append and the broker's role. Errors it returns carry
// errcode codes.
type BrokerHost interface {
	// GetMessages reads a queue as the store does (filter sees tag codes:
	// here, due times).
	GetMessages(topic string, queueID int32, from int64, max, maxBytes int, filter func(tagCode int64) bool) (store.GetResult, error)
	// GetMatching is GetMessages with a second filter that sees each
	// record's bytes (valid only during the call) and says whether to
	// return it (store.Store.GetMatching).
	GetMatching(topic string, queueID int32, from int64, max, maxBytes int, filter func(tagCode int64) bool,
		match func(rec []byte) bool) (store.GetResult, error)
	// ReadMessages reads the stored messages at CommitLog offsets and
	// calls fn for each, with its index in locations, in any order.
	ReadMessages(locations []int64, fn func(i int, m *message.Ext, err error))
	// ReadRecords is ReadMessages without decoding: rec is valid only
	// during fn.
	ReadRecords(locations []int64, fn func(i int, rec []byte, err error))
	// StoreHost is the host the store writes into its records.
	StoreHost() netip.AddrPort
	// QueryByKey finds the messages of topic with key (a KEYS value or a
	// unique id) stored in [begin, end] ms.
	QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Ext, error)
	// QueueOffsets is a queue's first and next offset.
	QueueOffsets(topic string, queueID int32) (min, max int64)
	// StoreTimeAt is the store time (ms) of a queue's message at offset.
	StoreTimeAt(topic string, queueID int32, offset int64) (int64, error)
	// Arrival returns a channel closed when the queue grows (taken before
	// a read, so no arrival is missed).
	Arrival(topic string, queueID int32) <-chan struct{}
	// CommitLogMaxOffset is the end of the CommitLog; DispatchedOffset how
	// far its queues are built; WaitDispatched waits until they reach off.
	CommitLogMaxOffset() int64
	DispatchedOffset() int64
	WaitDispatched(ctx context.Context, off int64) error
	// Segments lists the CommitLog's segment files, oldest first.
	Segments() []commitlog.SegmentInfo

	// Put stores msgs in the CommitLog as a send is stored (flush mode);
	// WaitReplicated then returns once they are replicated as a send's
	// acknowledgement requires.
	Put(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error)
	// PutPrepared is Put for records prepared by the caller
	// (store.Store.PutPrepared).
	PutPrepared(ctx context.Context, recs []store.Prepared) ([]store.PutResult, error)
	WaitReplicated(ctx context.Context, res []store.PutResult) error
	// WriteQueueNums is a topic's number of write queues (ok false: no
	// such topic).
	WriteQueueNums(topic string) (n int32, ok bool)

	// IsMaster reports whether the broker is the master now; SyncRole
	// applies the broker's current role to its master-only services at
	// once (a request right after a promotion) and reports whether they
	// lead. BrokerID, Epoch and Role describe the broker in errors and logs.
	IsMaster() bool
	SyncRole() bool
	BrokerID() int64
	Epoch() int64
	Role() string
}

// Config is what NewService needs besides its host.
type Config struct {
	Options BrokerOptions
	// StoreDir holds config/delayOffset.json and, unless Options.Timer.Dir
	// says otherwise, the timer engine's timerwheel directory.
	StoreDir string
	// BrokerName labels errors.
	BrokerName string
	// RetentionMaxAge is the age at which retention may delete a CommitLog
	// segment (the roller copies timer messages ahead of it).
	RetentionMaxAge time.Duration
}

// Service is delayed delivery on one broker, whatever its id. It follows
// the broker's role through the broker's role gate (Lead), as the
// transaction service does:
//
//   - While the broker is the master it delivers: one goroutine per delay
//     level, the timer engine's firer and the roller.
//   - Otherwise it stands by: the timer engine indexes the replicated timer
//     queue without delivering, and a slave takes its master's progress
//     from metadata sync (Offer): the level offsets, persisted in its own
//     config/delayOffset.json, and the timer engine's Progress, persisted
//     by the engine. Each is applied once the slave's log is dispatched as
//     far as the master's was when it was read, so a slave never skips a
//     delivery it does not hold.
//
// A promoted slave starts delivering from there: what the master delivered
// after the last progress the slave applied is delivered again (see the
// package doc, "Master and slaves"). A master that stops being one
// (fenced) stops delivering; the batch being stored completes.
type Service struct {
	host   BrokerHost
	cfg    Config
	log    *zap.Logger
	levels Levels
	clock  Clock
	// offsets are the levels' next queue offsets (config/delayOffset.json).
	offsets *LevelOffsets
	engine  *Engine // nil when timers are off
	// timerDir is the engine's directory (the roller keeps its state there).
	timerDir string

	// ctx and wg own the persistence goroutine.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards active, stopped and pending (the master's progress waiting
	// for the slave's log to reach it; at most two: the oldest and the
	// newest).
	mu      sync.Mutex
	active  bool
	stopped bool
	pending []MasterProgress
}

// MasterProgress is a master's delayed delivery progress, as a slave takes
// it: read on the master before its CommitLog end was Need.
type MasterProgress struct {
	// Levels: delay level → next queue offset to deliver.
	Levels map[int]int64
	// Timer is the timer engine's progress (nil: none).
	Timer *Progress
	Need  int64
}

// NewService loads the level offsets and opens the timer engine, standing
// by. Start it, and subscribe it to the broker's role gate.
func NewService(cfg Config, host BrokerHost, log *zap.Logger) (*Service, error) {
	o := cfg.Options
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	d := &Service{host: host, cfg: cfg, log: log, levels: o.levels, clock: o.clock()}
	var err error
	if d.offsets, err = LoadLevelOffsets(filepath.Join(cfg.StoreDir, "config", "delayOffset.json")); err != nil {
		return nil, err
	}
	if o.TimerEnabled {
		to := o.Timer
		if to.Dir == "" {
			to.Dir = filepath.Join(cfg.StoreDir, "timerwheel")
		}
		d.timerDir = to.Dir
		to.Clock = d.clock
		tq := timerQueue{host: host, log: log, deliver: d.deliver}
		if d.engine, err = Open(to, tq, log.Named("timer")); err != nil {
			return nil, err
		}
		d.engine.SetActive(false) // until the role says otherwise
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Start starts the timer engine (standing by) and the persistence of the
// level offsets.
func (d *Service) Start() {
	if d.engine != nil {
		d.engine.Start()
	}
	d.wg.Add(1)
	go d.persistLoop()
}

// Close stops the service and persists the level offsets. The role gate
// must have stopped its lead first (rolegate.Gate.Close); a Lead after
// Close does nothing.
func (d *Service) Close() error {
	d.cancel()
	d.wg.Wait()
	d.mu.Lock()
	d.stopped = true // a metadata sync still in flight applies nothing
	d.pending = nil
	d.mu.Unlock()
	var errs []error
	if d.engine != nil {
		errs = append(errs, d.engine.Close())
	}
	errs = append(errs, d.offsets.Persist())
	return errors.Join(errs...)
}

// Lead starts delivering: the broker became the master. Delivery runs
// until ctx ends; wait stands the service down and returns once it has
// (rolegate.Service).
func (d *Service) Lead(ctx context.Context) (wait func()) {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return func() {}
	}
	d.applyReadyLocked() // what the log reached since persistLoop last looked
	d.active = true
	dropped := len(d.pending)
	d.pending = nil
	d.mu.Unlock()
	var wg sync.WaitGroup
	for level := 1; level <= d.levels.Max(); level++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.runLevel(ctx, level)
		}()
	}
	if d.engine != nil {
		d.engine.SetActive(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.rollLoop(ctx)
		}()
	}
	fields := []zap.Field{zap.Int64("epoch", d.host.Epoch()), zap.Any("levelOffsets", d.offsets.Snapshot())}
	if d.engine != nil {
		fields = append(fields, zap.Any("inheritedTimerProgress", d.engine.Inherited()))
	}
	if dropped > 0 {
		// Read on the old master past what this broker holds: never applied.
		fields = append(fields, zap.Int("unappliedMasterProgress", dropped))
	}
	d.log.Info("delayed delivery started: the broker is the master", fields...)
	return func() {
		d.mu.Lock()
		d.active = false
		d.mu.Unlock()
		if d.engine != nil {
			d.engine.SetActive(false)
		}
		wg.Wait()
		if !d.host.IsMaster() {
			d.log.Warn("delayed delivery stopped: the broker is not the master", zap.String("role", d.host.Role()))
		}
	}
}

// Active reports whether the service delivers.
func (d *Service) Active() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active
}

// ensureRole catches up with a role change the gate has not seen yet (a
// request right after a promotion) and reports whether it delivers.
func (d *Service) ensureRole() bool {
	return d.host.SyncRole() && d.Active()
}

// NotDelivering is the error of a request only a delivering broker (the
// master) serves.
func NotDelivering(brokerName string, brokerID int64) error {
	return errcode.Errorf(errcode.NotMaster, "broker %s/%d does not deliver delayed messages (not a master)", brokerName, brokerID)
}

func (d *Service) notDelivering() error { return NotDelivering(d.cfg.BrokerName, d.host.BrokerID()) }

// Engine is the timer engine (tests, tools), delivering or standing by;
// nil when timers are off.
func (d *Service) Engine() *Engine { return d.engine }

// LevelOffsets copies the levels' next queue offsets (level → offset).
func (d *Service) LevelOffsets() map[int]int64 { return d.offsets.Snapshot() }

// Snapshot is the progress a master gives its slaves; ok is false when
// the service does not deliver.
func (d *Service) Snapshot() (MasterProgress, bool) {
	if !d.Active() {
		return MasterProgress{}, false
	}
	p := MasterProgress{Levels: d.offsets.Snapshot()}
	if d.engine != nil {
		if tp, ok := d.engine.Progress(); ok {
			p.Timer = &tp
		}
	}
	// Read last: every delivery the progress counts is stored below it.
	p.Need = d.host.CommitLogMaxOffset()
	return p, true
}

// Offer takes a master's progress on a slave: applied at once if the
// slave's log is dispatched as far, else kept until it is (persistLoop
// looks again). The oldest waiting progress is kept and the newest
// replaces the one after it, so a slave that always lags still advances.
func (d *Service) Offer(p MasterProgress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active || d.stopped {
		return
	}
	if len(d.pending) < 2 {
		d.pending = append(d.pending, p)
	} else {
		d.pending[1] = p
	}
	d.applyReadyLocked()
}

// applyReadyLocked applies, oldest first, the waiting progress the
// slave's log has reached. d.mu is held.
func (d *Service) applyReadyLocked() {
	for len(d.pending) > 0 && d.host.DispatchedOffset() >= d.pending[0].Need {
		p := d.pending[0]
		d.pending = d.pending[1:]
		if d.offsets.Adopt(p.Levels) {
			if err := d.offsets.Persist(); err != nil {
				d.log.Error("persist delay offsets taken from the master", zap.Error(err))
			}
		}
		if d.engine != nil && p.Timer != nil {
			if err := d.engine.Inherit(*p.Timer); err != nil {
				d.log.Error("take the master's timer progress", zap.Error(err))
			}
		}
	}
}

func (d *Service) persistLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.cfg.Options.OffsetPersistInterval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		if !d.active {
			d.applyReadyLocked()
		}
		d.mu.Unlock()
		if err := d.offsets.Persist(); err != nil {
			d.log.Error("persist delay offsets", zap.Error(err))
		}
	}
}

// fixRealQueue keeps a delivered message inside its topic's write queues
// (the topic may have shrunk since it was sent).
func (d *Service) fixRealQueue(p *store.Prepared) {
	if n, ok := d.host.WriteQueueNums(p.Topic); ok && n > 0 && p.QueueID >= n {
		p.QueueID %= n
		message.SetRecordQueueID(p.Record, p.QueueID)
	}
}

// deliver stores due messages, restored into records of their real topics,
// as a send is stored (flush and replication).
func (d *Service) deliver(ctx context.Context, recs []store.Prepared) error {
	if !d.host.IsMaster() {
		// Fenced or demoted: the new master delivers; this one retries
		// until it stops.
		return errcode.Errorf(errcode.NotMaster, "broker %s is not the master; delayed delivery paused", d.cfg.BrokerName)
	}
	for i := range recs {
		d.fixRealQueue(&recs[i])
	}
	res, err := d.host.PutPrepared(ctx, recs)
	if err != nil {
		return err
	}
	// Stored: a failed wait is retried on the same copies, never by
	// storing them again (a new master's sync state set is itself alone
	// until its slaves catch up; each retry of the whole delivery stored
	// another copy). The wait ends when the broker stops leading; the next
	// master delivers from the progress it has.
	backoff := deliverRetryMin
	for {
		err := d.host.WaitReplicated(ctx, res)
		if err == nil || ctx.Err() != nil || !d.host.IsMaster() {
			return err
		}
		d.log.Warn("delivered delayed messages not replicated yet; waiting again", zap.Int("messages", len(recs)), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, deliverRetryMax)
	}
}

// The pause between waits for the replication of delivered messages.
const (
	deliverRetryMin = 50 * time.Millisecond
	deliverRetryMax = time.Second
)
