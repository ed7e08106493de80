package delay

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// BrokerOptions configure delayed delivery on a broker.
type BrokerOptions struct {
	// Levels are the delays of the delay levels, in RocketMQ's
	// messageDelayLevel syntax (DefaultLevels).
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
	Timer Options
	// RollAhead: a pending timer message is stored again when the
	// CommitLog segment holding it may be deleted by retention within
	// RollAhead and it is due after that (12 h; see roll.go);
	// RollMargin is the safety margin on the due time (10 min);
	// RollInterval how often segments are checked (1 min).
	RollAhead, RollMargin, RollInterval time.Duration
	// Clock is the delay code's clock (nil: the wall clock). Tests use a
	// VirtualClock, with the store's clocks set to the same.
	Clock Clock

	levels Levels
}

// DefaultBrokerOptions returns the defaults.
func DefaultBrokerOptions() BrokerOptions {
	return BrokerOptions{
		Levels:                DefaultLevels,
		OffsetPersistInterval: time.Second,
		TimerEnabled:          true,
		MaxDelay:              400 * 24 * time.Hour,
		Timer:                 DefaultOptions(""),
		RollAhead:             12 * time.Hour,
		RollMargin:            10 * time.Minute,
		RollInterval:          time.Minute,
	}
}

// Validate checks the options and parses the levels; Schedule, TagCode
// and NewService need options that passed it.
func (o *BrokerOptions) Validate() error {
	var errs []error
	levels, err := ParseLevels(o.Levels)
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

func (o *BrokerOptions) clock() Clock {
	if o.Clock == nil {
		return RealClock
	}
	return o.Clock
}

// TagCode wraps the store's tag code hook: the units of SCHEDULE_TOPIC_XXXX
// carry store time + the level's delay (the message is due 1 ms later, see
// levelDueMS), those of the timer topic the time their message is due.
func (o *BrokerOptions) TagCode(next func(message.Dispatch) int64) func(message.Dispatch) int64 {
	levels := o.levels
	return func(d message.Dispatch) int64 {
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

// Rewrite turns messages that ask for delayed delivery into their stored
// form (see Schedule).
func (o *BrokerOptions) Rewrite(msgs []*message.Ext, brokerName string) error {
	for _, m := range msgs {
		if err := o.Schedule(m, brokerName); err != nil {
			return err
		}
	}
	return nil
}

// Schedule rewrites one message that asks for delayed delivery: a delay
// level goes to SCHEDULE_TOPIC_XXXX (queue level−1), a delivery time to
// the timer topic; both remember the real topic and queue. A message
// without a delay, or one already in a system topic, is left as it is.
// Internal writers (the retry path: DELAY = 3 + reconsume times) call it
// before they store a message. brokerName labels errors.
func (o *BrokerOptions) Schedule(m *message.Ext, brokerName string) error {
	props := m.Properties
	p, err := o.Place(m.Topic, func(name string) (string, bool) {
		v, ok := props[name]
		return v, ok
	}, brokerName)
	if err != nil || !p.Rewrite {
		return err
	}
	var small [8]message.PropertyEdit
	for _, e := range p.AppendEdits(small[:0], m.Topic, m.QueueID) {
		if e.Remove {
			delete(props, e.Name)
		} else {
			props[e.Name] = e.Value
		}
	}
	if p.Topic != "" {
		m.Topic, m.QueueID = p.Topic, p.QueueID
	}
	return nil
}

// Placement is what Schedule does to a message: where it is stored and
// how its properties change. Place decides it from the properties alone,
// for callers that hold them in another form than a map (the broker's
// packed sends, whose records are written without one).
type Placement struct {
	// Rewrite: the message asks for a delay level or a delivery time, and
	// its properties change (AppendEdits); false: it is stored as sent.
	Rewrite bool
	// Level is DELAY's new value (capped to the levels); 0: DELAY is
	// removed (a level of 0 or less asks for no delay).
	Level int
	// TimerOut: TIMER_OUT_MS is set to TimerOutMS, the due time (ms).
	TimerOut   bool
	TimerOutMS int64
	// Topic and QueueID are where the message is stored, its real topic
	// and queue kept in REAL_TOPIC and REAL_QID (as message.Reroute keeps
	// them); Topic "": the topic and queue it was sent to (no delay, or a
	// delivery time already due).
	Topic   string
	QueueID int32
}

// Place decides what Schedule does to a message sent to topic, whose
// properties get reads (the value of a name, and whether the message has
// it).
func (o *BrokerOptions) Place(topic string, get func(name string) (string, bool), brokerName string) (Placement, error) {
	if message.IsSystemTopic(topic) {
		return Placement{}, nil
	}
	if v, ok := get(message.PropertyDelayLevel); ok {
		// A level wins over a delivery time, as in RocketMQ.
		n, err := strconv.Atoi(v)
		if err != nil {
			return Placement{}, errcode.Errorf(errcode.MessageIllegal, "property %s = %q is not a delay level", message.PropertyDelayLevel, v)
		}
		if n <= 0 {
			return Placement{Rewrite: true}, nil
		}
		n = o.levels.Cap(n)
		return Placement{Rewrite: true, Level: n, Topic: message.ScheduleTopic, QueueID: int32(n - 1)}, nil
	}
	value := func(name string) string {
		v, _ := get(name)
		return v
	}
	if value(message.PropertyTimerDeliverMS) == "" && value(message.PropertyTimerDelayMS) == "" && value(message.PropertyTimerDelaySec) == "" {
		return Placement{}, nil // no delivery time (timerDue's default), and no clock read for it
	}
	t := o.clock().Now()
	due, ok, err := timerDue(value, t, o.MaxDelay)
	if err != nil || !ok {
		return Placement{}, err
	}
	p := Placement{Rewrite: true, TimerOut: true, TimerOutMS: due}
	if due <= t.UnixMilli() {
		return p, nil // due already: delivered at once
	}
	if !o.TimerEnabled {
		return Placement{}, errcode.Errorf(errcode.RequestNotSupported, "delivery at a time is turned off on broker %s", brokerName)
	}
	p.Topic = message.TimerTopic
	return p, nil
}

// AppendEdits appends to dst the property changes of a rewritten message
// sent to topic and queueID, in increasing name order: the delivery time
// requests removed, DELAY set or removed, TIMER_OUT_MS set, REAL_TOPIC and
// REAL_QID set when it is stored elsewhere. None unless p.Rewrite.
func (p Placement) AppendEdits(dst []message.PropertyEdit, topic string, queueID int32) []message.PropertyEdit {
	if !p.Rewrite {
		return dst
	}
	level := message.PropertyEdit{Name: message.PropertyDelayLevel, Remove: true}
	if p.Level > 0 {
		level = message.PropertyEdit{Name: message.PropertyDelayLevel, Value: strconv.Itoa(p.Level)}
	}
	dst = append(dst, level)
	if p.Topic != "" {
		dst = append(dst,
			message.PropertyEdit{Name: message.PropertyRealQueueID, Value: strconv.Itoa(int(queueID))},
			message.PropertyEdit{Name: message.PropertyRealTopic, Value: topic})
	}
	dst = append(dst,
		message.PropertyEdit{Name: message.PropertyTimerDelayMS, Remove: true},
		message.PropertyEdit{Name: message.PropertyTimerDelaySec, Remove: true},
		message.PropertyEdit{Name: message.PropertyTimerDeliverMS, Remove: true})
	if p.TimerOut {
		dst = append(dst, message.PropertyEdit{Name: message.PropertyTimerOutMS, Value: strconv.FormatInt(p.TimerOutMS, 10)})
	}
	return dst
}

// timerDue computes the due time (ms) a message asks for with
// TIMER_DELIVER_MS, TIMER_DELAY_MS or TIMER_DELAY_SEC (in that order of
// precedence; value reads a property, "" when absent); ok is false if it
// asks for none. A delay counts from t rounded up to the millisecond, so
// the due time is never before t + the delay; a delivery time is exact
// (the engine fires it when its clock reads at or after it).
func timerDue(value func(name string) string, t time.Time, maxDelay time.Duration) (due int64, ok bool, err error) {
	now := t.UnixMilli()
	maxMS := maxDelay.Milliseconds()
	parse := func(k string) (int64, error) {
		n, err := strconv.ParseInt(value(k), 10, 64)
		if err != nil || n < 0 {
			return 0, errcode.Errorf(errcode.IllegalDeliveryTime, "property %s = %q is not a non-negative integer", k, value(k))
		}
		return n, nil
	}
	var delayMS int64
	switch {
	case value(message.PropertyTimerDeliverMS) != "":
		at, err := parse(message.PropertyTimerDeliverMS)
		if err != nil {
			return 0, false, err
		}
		if at-now > maxMS {
			return 0, false, errcode.Errorf(errcode.IllegalDeliveryTime, "delivery time %s is %v from now, more than the maximum delay of %v",
				time.UnixMilli(at).UTC().Format(time.RFC3339Nano), time.Duration(at-now)*time.Millisecond, maxDelay)
		}
		return at, true, nil
	case value(message.PropertyTimerDelayMS) != "":
		if delayMS, err = parse(message.PropertyTimerDelayMS); err != nil {
			return 0, false, err
		}
	case value(message.PropertyTimerDelaySec) != "":
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
		return 0, false, errcode.Errorf(errcode.IllegalDeliveryTime, "a delay of %v is more than the maximum delay of %v",
			time.Duration(min(delayMS, 1<<62/int64(time.Millisecond)))*time.Millisecond, maxDelay)
	}
	if delayMS == 0 {
		return now, true, nil // at once
	}
	return ceilMS(t) + delayMS, true, nil
}

// ceilMS is t in ms since the epoch, rounded up.
func ceilMS(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}
