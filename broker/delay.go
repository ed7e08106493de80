package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Delayed delivery (package broker/delay has the design and the on-disk
// formats):
//
//   - Delay levels, as RocketMQ: a message with property DELAY = n (1..18 by
//     default, capped at the highest level) is stored in SCHEDULE_TOPIC_XXXX
//     queue n−1 with REAL_TOPIC and REAL_QID; its ConsumeQueue tag code is
//     the time it is due (store time + the level's delay). One goroutine per
//     level walks its queue from the offset kept in config/delayOffset.json
//     and stores each due message in its real topic and queue, in order.
//   - Timers: a message with TIMER_DELIVER_MS (absolute, ms), TIMER_DELAY_MS
//     or TIMER_DELAY_SEC (relative) is stored once, in rmq_sys_wheel_timer
//     queue 0 with REAL_TOPIC, REAL_QID and TIMER_OUT_MS (its due time, also
//     its tag code). The timer engine (broker/delay) indexes that queue
//     into time buckets on disk and delivers each message when due. A time
//     in the past is delivered at once; one beyond MaxDelay is refused
//     (ILLEGAL_DELIVERY_TIME), never clamped. A pending timer message can be
//     cancelled by its unique id (the Delay gRPC service).
//   - Every broker runs the delay service; it delivers only while the broker
//     is the master and follows role changes (delayService): a slave keeps
//     the timer index of its replicated timer queue and takes the master's
//     progress by metadata sync, so that once promoted it delivers what the
//     master had not, never early, never what the master cancelled.

// DelayOptions configure delayed delivery.
type DelayOptions struct {
	// Levels are the delays of the delay levels, in RocketMQ's
	// messageDelayLevel syntax (delay.DefaultLevels).
	Levels string
	// OffsetPersistInterval is how often config/delayOffset.json is written
	// (1 s); it is also written at Close.
	OffsetPersistInterval time.Duration
	// TimerEnabled turns on delivery at an arbitrary time (true).
	TimerEnabled bool
	// MaxDelay bounds how far in the future a timer message may be due
	// (400 days).
	MaxDelay time.Duration
	// Timer tunes the timer engine; its Dir and Clock are filled in
	// (Dir: <StoreDir>/timerwheel).
	Timer delay.Options
	// RollAhead: a pending timer message is stored again when the
	// CommitLog segment holding it may be deleted by retention within
	// RollAhead and it is due after that (12 h; see delay_roll.go);
	// RollMargin is the safety margin on the due time (10 min);
	// RollInterval how often segments are checked (1 min).
	RollAhead, RollMargin, RollInterval time.Duration
	// Clock is the delay code's clock (nil: the wall clock). Tests use a
	// delay.VirtualClock, with the store's clocks set to the same.
	Clock delay.Clock

	levels delay.Levels
}

func defaultDelayOptions() DelayOptions {
	return DelayOptions{
		Levels:                delay.DefaultLevels,
		OffsetPersistInterval: time.Second,
		TimerEnabled:          true,
		MaxDelay:              400 * 24 * time.Hour,
		Timer:                 delay.DefaultOptions(""),
		RollAhead:             12 * time.Hour,
		RollMargin:            10 * time.Minute,
		RollInterval:          time.Minute,
	}
}

func (o *DelayOptions) validate() error {
	var errs []error
	levels, err := delay.ParseLevels(o.Levels)
	if err != nil {
		errs = append(errs, fmt.Errorf("broker: %w", err))
	}
	o.levels = levels
	if o.OffsetPersistInterval <= 0 {
		errs = append(errs, fmt.Errorf("broker: delay offset persist interval %v must be positive", o.OffsetPersistInterval))
	}
	if o.MaxDelay <= 0 {
		errs = append(errs, fmt.Errorf("broker: max delay %v must be positive", o.MaxDelay))
	}
	if o.RollAhead <= 0 || o.RollMargin < 0 || o.RollInterval <= 0 {
		errs = append(errs, fmt.Errorf("broker: delay roll ahead %v and interval %v must be positive, margin %v not negative", o.RollAhead, o.RollInterval, o.RollMargin))
	}
	if o.TimerEnabled {
		t := o.Timer
		t.Dir = "-"
		if err := t.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("broker: timer: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (o *DelayOptions) clock() delay.Clock {
	if o.Clock == nil {
		return delay.RealClock
	}
	return o.Clock
}

// tagCode wraps the store's tag code hook: the units of SCHEDULE_TOPIC_XXXX
// and of the timer topic carry the time their message is due.
func (o *DelayOptions) tagCode(next func(*message.Dispatch) int64) func(*message.Dispatch) int64 {
	levels := o.levels
	return func(d *message.Dispatch) int64 {
		switch d.Topic {
		case message.ScheduleTopic:
			return d.StoreTimestamp + levels.Delay(int(d.QueueID)+1).Milliseconds()
		case message.TimerTopic:
			return d.TimerOutMS
		}
		if next != nil {
			return next(d)
		}
		return d.TagsHash
	}
}

// rewriteDelayed turns messages that ask for delayed delivery into their
// stored form (see scheduleDelayed).
func (b *Broker) rewriteDelayed(msgs []*message.Ext) error {
	for _, m := range msgs {
		if err := b.scheduleDelayed(m); err != nil {
			return err
		}
	}
	return nil
}

// scheduleDelayed rewrites one message that asks for delayed delivery: a
// delay level goes to SCHEDULE_TOPIC_XXXX (queue level−1), a delivery time
// to the timer topic; both remember the real topic and queue. A message
// without a delay, or one already in a system topic, is left as it is.
// Internal writers (the retry path: DELAY = 3 + reconsume times) call it
// before they store a message.
func (b *Broker) scheduleDelayed(m *message.Ext) error {
	if message.IsSystemTopic(m.Topic) || m.Properties == nil {
		return nil
	}
	props := m.Properties
	if v, ok := props[message.PropertyDelayLevel]; ok {
		// A level wins over a delivery time, as in RocketMQ.
		delete(props, message.PropertyTimerDeliverMS)
		delete(props, message.PropertyTimerDelayMS)
		delete(props, message.PropertyTimerDelaySec)
		n, err := strconv.Atoi(v)
		if err != nil {
			return wire.Errorf(pb.Code_MESSAGE_ILLEGAL, "property %s = %q is not a delay level", message.PropertyDelayLevel, v)
		}
		if n <= 0 {
			delete(props, message.PropertyDelayLevel)
			return nil
		}
		n = b.opts.Delay.levels.Cap(n)
		props[message.PropertyDelayLevel] = strconv.Itoa(n)
		message.Reroute(m, message.ScheduleTopic, int32(n-1))
		return nil
	}
	now := b.opts.Delay.clock().Now().UnixMilli()
	due, ok, err := timerDue(props, now, b.opts.Delay.MaxDelay)
	if err != nil || !ok {
		return err
	}
	delete(props, message.PropertyTimerDeliverMS)
	delete(props, message.PropertyTimerDelayMS)
	delete(props, message.PropertyTimerDelaySec)
	props[message.PropertyTimerOutMS] = strconv.FormatInt(due, 10)
	if due <= now {
		return nil // due already: delivered at once
	}
	if !b.opts.Delay.TimerEnabled {
		return wire.Errorf(pb.Code_REQUEST_NOT_SUPPORTED, "delivery at a time is turned off on broker %s", b.opts.BrokerName)
	}
	message.Reroute(m, message.TimerTopic, 0)
	return nil
}

// timerDue computes the due time (ms) a message asks for with
// TIMER_DELIVER_MS, TIMER_DELAY_MS or TIMER_DELAY_SEC (in that order of
// precedence); ok is false if it asks for none.
func timerDue(props map[string]string, now int64, maxDelay time.Duration) (due int64, ok bool, err error) {
	maxMS := maxDelay.Milliseconds()
	parse := func(k string) (int64, error) {
		n, err := strconv.ParseInt(props[k], 10, 64)
		if err != nil || n < 0 {
			return 0, wire.Errorf(pb.Code_ILLEGAL_DELIVERY_TIME, "property %s = %q is not a non-negative integer", k, props[k])
		}
		return n, nil
	}
	var delayMS int64
	switch {
	case props[message.PropertyTimerDeliverMS] != "":
		at, err := parse(message.PropertyTimerDeliverMS)
		if err != nil {
			return 0, false, err
		}
		if at-now > maxMS {
			return 0, false, wire.Errorf(pb.Code_ILLEGAL_DELIVERY_TIME, "delivery time %s is %v from now, more than the maximum delay of %v",
				time.UnixMilli(at).UTC().Format(time.RFC3339Nano), time.Duration(at-now)*time.Millisecond, maxDelay)
		}
		return at, true, nil
	case props[message.PropertyTimerDelayMS] != "":
		if delayMS, err = parse(message.PropertyTimerDelayMS); err != nil {
			return 0, false, err
		}
	case props[message.PropertyTimerDelaySec] != "":
		s, err := parse(message.PropertyTimerDelaySec)
		if err != nil {
			return 0, false, err
		}
		if s > maxMS/1000+1 {
			delayMS = maxMS + 1
		} else {
			delayMS = s * 1000
		}
	default:
		return 0, false, nil
	}
	if delayMS > maxMS {
		return 0, false, wire.Errorf(pb.Code_ILLEGAL_DELIVERY_TIME, "a delay of %v is more than the maximum delay of %v",
			time.Duration(min(delayMS, 1<<62/int64(time.Millisecond)))*time.Millisecond, maxDelay)
	}
	return now + delayMS, true, nil
}

// delayRef holds the delay service (nil before Start and after Close).
type delayRef struct{ p atomic.Pointer[delayService] }

func (r *delayRef) Load() *delayService   { return r.p.Load() }
func (r *delayRef) Store(d *delayService) { r.p.Store(d) }

// delayService is delayed delivery on one broker, whatever its id. It
// follows the broker's role (roleLoop), as the transaction service does:
//
//   - While the broker is the master (Broker.IsMaster) it delivers: one
//     goroutine per delay level, the timer engine's firer and the roller
//     (a delayRun).
//   - Otherwise it stands by: the timer engine indexes the replicated timer
//     queue without delivering, and a slave takes its master's progress
//     from metadata sync (offer): the level offsets, persisted in its own
//     config/delayOffset.json, and the timer engine's Progress, persisted
//     by the engine. Each is applied once the slave's log is dispatched as
//     far as the master's was when it was read, so a slave never skips a
//     delivery it does not hold.
//
// A promoted slave starts delivering from there: what the master delivered
// after the last progress the slave applied is delivered again (see
// broker/delay's doc, "Master and slaves"). A master that stops being one
// (fenced) stops delivering; the batch being stored completes.
type delayService struct {
	b       *Broker
	log     *zap.Logger
	levels  delay.Levels
	clock   delay.Clock
	offsets *delay.LevelOffsets
	engine  *delay.Engine // nil when timers are off
	// timerDir is the engine's directory (the roller keeps its state there).
	timerDir string

	// ctx and wg own the service's goroutines: role watch and persistence.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// life serialises activations: run is the master's delivery, nil while
	// the broker is not the master.
	life   sync.Mutex
	run    *delayRun
	closed bool

	// mu guards active, stopped and pending (the master's progress waiting
	// for the slave's log to reach it; at most two: the oldest and the
	// newest).
	mu      sync.Mutex
	active  bool
	stopped bool
	pending []delayProgress
}

// delayRun owns the goroutines that deliver while the broker is the master.
type delayRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// delayProgress is a master's delayed delivery progress, as a slave takes
// it: read on the master before its CommitLog end was need.
type delayProgress struct {
	levels map[int]int64
	timer  *delay.Progress
	need   int64
}

// startDelay starts delayed delivery: delivering on a master, standing by
// on a slave, following the role from then on.
func (b *Broker) startDelay() error {
	o := b.opts.Delay
	d := &delayService{b: b, log: b.log.Named("delay"), levels: o.levels, clock: o.clock()}
	var err error
	if d.offsets, err = delay.LoadLevelOffsets(filepath.Join(b.opts.StoreDir, "config", "delayOffset.json")); err != nil {
		return err
	}
	if o.TimerEnabled {
		to := o.Timer
		if to.Dir == "" {
			to.Dir = filepath.Join(b.opts.StoreDir, "timerwheel")
		}
		d.timerDir = to.Dir
		to.Clock = d.clock
		if d.engine, err = delay.Open(to, timerHost{b}, d.log.Named("timer")); err != nil {
			return err
		}
		d.engine.SetActive(false) // until the role says otherwise
		d.engine.Start()
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	b.delay.Store(d)
	d.setMaster(b.IsMaster())
	d.wg.Add(2)
	go d.persistLoop()
	go d.roleLoop()
	return nil
}

// stopDelay stops delivery and persists the level offsets.
func (b *Broker) stopDelay() error {
	d := b.delay.Load()
	if d == nil {
		return nil
	}
	b.delay.Store(nil)
	d.cancel()
	d.wg.Wait()
	d.life.Lock()
	d.stopRunLocked()
	d.closed = true
	d.life.Unlock()
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

// roleLoop follows the broker's role changes.
func (d *delayService) roleLoop() {
	defer d.wg.Done()
	for {
		changed := d.b.repl.Changes()
		d.setMaster(d.b.IsMaster())
		select {
		case <-d.ctx.Done():
			return
		case <-changed:
		}
	}
}

// setMaster starts delivering when the broker becomes the master and stops
// when it stops being one.
func (d *delayService) setMaster(master bool) {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed || master == (d.run != nil) {
		return
	}
	if !master {
		d.stopRunLocked()
		d.log.Warn("delayed delivery stopped: the broker is not the master", zap.Stringer("role", d.b.Role()))
		return
	}
	d.mu.Lock()
	d.applyReadyLocked() // what the log reached since persistLoop last looked
	d.active = true
	dropped := len(d.pending)
	d.pending = nil
	d.mu.Unlock()
	r := &delayRun{}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for level := 1; level <= d.levels.Max(); level++ {
		r.wg.Add(1)
		go d.runLevel(r, level)
	}
	if d.engine != nil {
		d.engine.SetActive(true)
		r.wg.Add(1)
		go d.rollLoop(r)
	}
	d.run = r
	fields := []zap.Field{zap.Int64("epoch", d.b.Epoch()), zap.Any("levelOffsets", d.offsets.Snapshot())}
	if d.engine != nil {
		fields = append(fields, zap.Any("inheritedTimerProgress", d.engine.Inherited()))
	}
	if dropped > 0 {
		// Read on the old master past what this broker holds: never applied.
		fields = append(fields, zap.Int("unappliedMasterProgress", dropped))
	}
	d.log.Info("delayed delivery started: the broker is the master", fields...)
}

// stopRunLocked stops delivering; d.life is held.
func (d *delayService) stopRunLocked() {
	r := d.run
	if r == nil {
		return
	}
	d.run = nil
	d.mu.Lock()
	d.active = false
	d.mu.Unlock()
	if d.engine != nil {
		d.engine.SetActive(false)
	}
	r.cancel()
	r.wg.Wait()
}

// isActive reports whether the service delivers.
func (d *delayService) isActive() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active
}

// ensureRole catches up with a role change the watcher has not seen yet
// (a request right after a promotion) and reports whether it delivers.
func (d *delayService) ensureRole() bool {
	if m := d.b.IsMaster(); m != d.isActive() {
		d.setMaster(m)
	}
	return d.isActive()
}

// snapshot is the progress a master gives its slaves; ok is false when
// the service does not deliver.
func (d *delayService) snapshot() (delayProgress, bool) {
	if !d.isActive() {
		return delayProgress{}, false
	}
	p := delayProgress{levels: d.offsets.Snapshot()}
	if d.engine != nil {
		if tp, ok := d.engine.Progress(); ok {
			p.timer = &tp
		}
	}
	// Read last: every delivery the progress counts is stored below it.
	p.need = d.b.store.CommitLog().MaxOffset()
	return p, true
}

// offer takes a master's progress on a slave: applied at once if the
// slave's log is dispatched as far, else kept until it is (persistLoop
// looks again). The oldest waiting progress is kept and the newest
// replaces the one after it, so a slave that always lags still advances.
func (d *delayService) offer(p delayProgress) {
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
func (d *delayService) applyReadyLocked() {
	for len(d.pending) > 0 && d.b.store.DispatchedOffset() >= d.pending[0].need {
		p := d.pending[0]
		d.pending = d.pending[1:]
		if d.offsets.Adopt(p.levels) {
			if err := d.offsets.Persist(); err != nil {
				d.log.Error("persist delay offsets taken from the master", zap.Error(err))
			}
		}
		if d.engine != nil && p.timer != nil {
			if err := d.engine.Inherit(*p.timer); err != nil {
				d.log.Error("take the master's timer progress", zap.Error(err))
			}
		}
	}
}

func (d *delayService) persistLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.b.opts.Delay.OffsetPersistInterval)
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
func (b *Broker) fixRealQueue(m *message.Ext) {
	if tc, ok := b.topics.get(m.Topic); ok && tc.WriteQueueNums > 0 && m.QueueID >= tc.WriteQueueNums {
		m.QueueID %= tc.WriteQueueNums
	}
}

// deliverDelayed stores due messages in their real topics, as a send is
// stored (flush and replication).
func (b *Broker) deliverDelayed(ctx context.Context, msgs []*message.Ext) error {
	if !b.IsMaster() {
		// Fenced or demoted: the new master delivers; this one retries
		// until it stops.
		return wire.Errorf(pb.Code_NOT_MASTER, "broker %s is not the master; delayed delivery paused", b.opts.BrokerName)
	}
	for _, m := range msgs {
		b.fixRealQueue(m)
	}
	res, err := b.store.PutBatch(ctx, msgs, nil)
	if err != nil {
		return storeError(err)
	}
	return b.waitReplicated(ctx, res)
}
