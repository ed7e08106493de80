package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Delayed delivery. A message can wait on the broker before consumers see
// it in three ways:
//
//   - WithDelayLevel(n): RocketMQ's delay levels (by default 1s 5s 10s 30s
//     1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h; a level above the
//     broker's highest is capped). Property DELAY.
//   - WithDeliverAt(t): delivery at a time, ms resolution (property
//     TIMER_DELIVER_MS); a time in the past delivers at once.
//   - WithDelay(d): delivery d from when the broker stores it (property
//     TIMER_DELAY_MS).
//
// A time further than the broker's maximum delay (400 days by default) is
// refused with ErrIllegalDeliveryTime. Delivered messages carry the
// property TIMER_OUT_MS: when they were due (timer messages). A pending
// timer message can be cancelled with Producer.CancelDelayed or
// Admin.CancelDelayed, by the MsgID (unique id) its SendResult names.

// Errors of delayed delivery.
var (
	// ErrIllegalDeliveryTime: the delivery time is beyond the broker's
	// maximum delay, or not a valid time.
	ErrIllegalDeliveryTime = wire.Errorf(pb.Code_ILLEGAL_DELIVERY_TIME, "")
	// ErrAlreadyDelivered: a cancel came after the message was delivered.
	ErrAlreadyDelivered = wire.Errorf(pb.Code_DELAY_ALREADY_DELIVERED, "")
)

// delaySpec is the delay one send asks for.
type delaySpec struct {
	key, value string
	err        error
}

func (s *sendOptions) setDelay(key, value string, err error) {
	if s.delay != nil && s.delay.key != key && s.delay.err == nil && err == nil {
		err = codeErr(pb.Code_INVALID_PARAMETER, "combine at most one of WithDelayLevel, WithDeliverAt and WithDelay")
	}
	s.delay = &delaySpec{key: key, value: value, err: err}
}

// WithDelayLevel delays the message by a delay level (1-based; 0: no
// delay).
func WithDelayLevel(level int) SendOption {
	return func(s *sendOptions) {
		if level < 0 {
			s.setDelay(message.PropertyDelayLevel, "", codeErr(pb.Code_INVALID_PARAMETER, "delay level %d is negative", level))
			return
		}
		s.setDelay(message.PropertyDelayLevel, strconv.Itoa(level), nil)
	}
}

// WithDeliverAt delivers the message at t (ms resolution, never before).
func WithDeliverAt(t time.Time) SendOption {
	return func(s *sendOptions) {
		if t.IsZero() || t.UnixMilli() < 0 {
			s.setDelay(message.PropertyTimerDeliverMS, "", codeErr(pb.Code_ILLEGAL_DELIVERY_TIME, "delivery time %v is not a valid time", t))
			return
		}
		ms := t.UnixMilli()
		if t.After(time.UnixMilli(ms)) {
			ms++ // never before t
		}
		s.setDelay(message.PropertyTimerDeliverMS, strconv.FormatInt(ms, 10), nil)
	}
}

// WithDelay delivers the message d after the broker stores it (ms
// resolution, rounded up).
func WithDelay(d time.Duration) SendOption {
	return func(s *sendOptions) {
		if d < 0 {
			s.setDelay(message.PropertyTimerDelayMS, "", codeErr(pb.Code_ILLEGAL_DELIVERY_TIME, "delay %v is negative", d))
			return
		}
		ms := (d + time.Millisecond - 1) / time.Millisecond
		s.setDelay(message.PropertyTimerDelayMS, strconv.FormatInt(int64(ms), 10), nil)
	}
}

// applyDelay sets the delay property of a converted message.
func (s *sendOptions) applyDelay(pm *pb.Message) error {
	if s.delay == nil {
		return nil
	}
	if s.delay.err != nil {
		return s.delay.err
	}
	if pm.Properties == nil {
		pm.Properties = make(map[string]string, 1)
	}
	for _, k := range []string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS,
		message.PropertyTimerDelayMS, message.PropertyTimerDelaySec} {
		delete(pm.Properties, k)
	}
	pm.Properties[s.delay.key] = s.delay.value
	return nil
}

// CancelDelayed cancels a pending timer message of topic by its MsgID (the
// unique id SendResult.MsgID names; not its OffsetMsgID), on whichever
// broker of the topic holds it. Once it returns nil the message is never
// delivered. It fails with
// ErrAlreadyDelivered if the message was delivered first, and with
// ErrQueryNotFound if no broker holds it.
func (p *Producer) CancelDelayed(ctx context.Context, topic, msgID string) error {
	if err := p.checkState(); err != nil {
		return err
	}
	ri, err := p.b.routes.get(ctx, topic)
	if err != nil {
		return err
	}
	var addrs []string
	for _, b := range ri.brokers {
		if a := b.MasterAddr(); a != "" {
			addrs = append(addrs, a)
		}
	}
	return cancelDelayed(ctx, p.b, addrs, topic, msgID)
}

// CancelDelayed cancels a pending timer message (see Producer.CancelDelayed).
func (a *Admin) CancelDelayed(ctx context.Context, topic, msgID string) error {
	if err := a.check(); err != nil {
		return err
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return err
	}
	var addrs []string
	for _, b := range r.Brokers {
		if a := b.MasterAddr(); a != "" {
			addrs = append(addrs, a)
		}
	}
	return cancelDelayed(ctx, a.b, addrs, topic, msgID)
}

func cancelDelayed(ctx context.Context, b *base, addrs []string, topic, msgID string) error {
	if err := message.ValidateTopic(topic); err != nil {
		return codeErr(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if msgID == "" {
		return codeErr(pb.Code_INVALID_PARAMETER, "no message id given")
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w %q: no broker with a master", ErrNoRoute, topic)
	}
	sort.Strings(addrs)
	var errs []error
	for _, addr := range addrs {
		cc, err := b.pool.get(addr)
		if err != nil {
			return err
		}
		rctx, cancel := b.rpcContext(ctx)
		resp, err := pb.NewDelayClient(cc).Cancel(rctx, &pb.CancelDelayedRequest{Topic: topic, UniqueId: msgID})
		cancel()
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrAlreadyDelivered) {
			return fmt.Errorf("cancel %s of %s on %s: %w", msgID, topic, addr, err)
		}
		errs = append(errs, fmt.Errorf("broker %s: %w", addr, err))
	}
	return fmt.Errorf("cancel %s of %s: %w", msgID, topic, errors.Join(errs...))
}

// DelayLevelStatus is one delay level of a broker.
type DelayLevelStatus struct {
	Level             int
	Delay             time.Duration
	Offset, MaxOffset int64
	Pending           int64
	// NextDeliver is when the next message is due (zero: none pending).
	NextDeliver time.Time
}

// TimerStatus is a broker's timing wheel.
type TimerStatus struct {
	Enabled  bool
	MaxDelay time.Duration
	// IndexedOffset and QueueMaxOffset: how far the timer topic's queue
	// is indexed, and its end.
	IndexedOffset, QueueMaxOffset int64
	Pending                       int64
	Buckets                       int64
	LoadedBuckets, LoadedEntries  int64
	Delivered, Cancelled, Lost    int64
	// NextDue is the next due time loaded in the wheel (zero: none).
	NextDue    time.Time
	IndexBytes int64
}

// DelayStatus is the delayed-delivery state of one broker.
type DelayStatus struct {
	Addr   string
	Levels []DelayLevelStatus
	Timer  TimerStatus
}

// DelayStatus reports the delay levels and the timing wheel of the broker
// at addr.
func (a *Admin) DelayStatus(ctx context.Context, addr string) (*DelayStatus, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	cc, err := a.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	r, err := pb.NewDelayClient(cc).Status(rctx, &pb.DelayStatusRequest{})
	if err == nil {
		err = fromStatus(r.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	out := &DelayStatus{Addr: addr}
	for _, l := range r.GetLevels() {
		ls := DelayLevelStatus{Level: int(l.GetLevel()), Delay: time.Duration(l.GetDelayMs()) * time.Millisecond,
			Offset: l.GetOffset(), MaxOffset: l.GetMaxOffset(), Pending: l.GetPending()}
		if ms := l.GetNextDeliverMs(); ms > 0 {
			ls.NextDeliver = time.UnixMilli(ms)
		}
		out.Levels = append(out.Levels, ls)
	}
	t := r.GetTimer()
	out.Timer = TimerStatus{Enabled: t.GetEnabled(), MaxDelay: time.Duration(t.GetMaxDelayMs()) * time.Millisecond,
		IndexedOffset: t.GetIndexedOffset(), QueueMaxOffset: t.GetQueueMaxOffset(), Pending: t.GetPending(),
		Buckets: t.GetBuckets(), LoadedBuckets: t.GetLoadedBuckets(), LoadedEntries: t.GetLoadedEntries(),
		Delivered: t.GetDelivered(), Cancelled: t.GetCancelled(), Lost: t.GetLost(), IndexBytes: t.GetIndexBytes()}
	if ms := t.GetNextDueMs(); ms > 0 {
		out.Timer.NextDue = time.UnixMilli(ms)
	}
	return out, nil
}
