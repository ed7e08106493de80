package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// timerHost gives the timer engine the store: the timer topic's queue, the
// stored messages and delivery to real topics.
type timerHost struct{ b *Broker }

var (
	timerOriginKey = []byte(message.PropertyTimerOrigin + "\x01")
	timerCancelKey = []byte(delay.PropertyTimerCancel + "\x01")
)

func (h timerHost) ReadTimerQueue(from int64, max int) ([]delay.Unit, int64, error) {
	res, err := h.b.store.GetMessages(message.TimerTopic, 0, from, max, 8<<20, nil)
	if err != nil {
		return nil, from, err
	}
	switch res.Status {
	case store.Found:
	case store.NoMatchedMessage, store.OffsetTooSmall, store.OffsetOverflowBadly:
		return nil, res.NextOffset, nil
	default:
		return nil, from, nil
	}
	units := make([]delay.Unit, 0, len(res.Records))
	for i, rec := range res.Records {
		d, err := message.DecodeDispatch(rec)
		if err != nil {
			return units, res.QueueOffsets[i], err
		}
		u := delay.Unit{QueueOffset: res.QueueOffsets[i], Location: d.PhysicalOffset, Size: d.Size, DeliverMS: d.TimerOutMS}
		// Cancel markers and rolled-over timers carry properties the
		// dispatch decoding skips: decode those records once, fully.
		hasCancel := bytes.Contains(rec, timerCancelKey)
		if hasCancel || bytes.Contains(rec, timerOriginKey) {
			m, err := message.Decode(rec)
			if err != nil {
				if hasCancel {
					return units, res.QueueOffsets[i], err
				}
			} else {
				if hasCancel {
					t, ok, err := delay.ParseCancelMarker(m.Properties)
					if err != nil {
						h.b.log.Error("cancel marker ignored", zap.Int64("location", d.PhysicalOffset), zap.Error(err))
						continue
					}
					if ok {
						u.Cancel = &t
						units = append(units, u)
						continue
					}
				}
				if o, err := strconv.ParseInt(m.Properties[message.PropertyTimerOrigin], 10, 64); err == nil && o >= 0 {
					u.Origin, u.HasOrigin = o, true
				}
			}
		}
		units = append(units, u)
	}
	return units, res.QueueOffsets[len(res.QueueOffsets)-1] + 1, nil
}

func (h timerHost) TimerQueueMaxOffset() int64 {
	_, maxOff := h.b.store.QueueOffsets(message.TimerTopic, 0)
	return maxOff
}

func (h timerHost) TimerArrival() <-chan struct{} {
	return h.b.arrivalSignal(message.TimerTopic, 0).C()
}

func (h timerHost) ReadMessages(locations []int64, fn func(i int, m *message.Ext, err error)) {
	h.b.store.ReadMessages(locations, fn)
}

func (h timerHost) Deliver(ctx context.Context, msgs []*message.Ext) error {
	return h.b.deliverDelayed(ctx, msgs)
}

// CancelDelayed cancels the pending timer message of topic whose unique id
// is uniqueID (every stored copy of it, if the producer retried). Once it
// returns nil the message is never delivered, by this broker or, with the
// guarantee of an acknowledged send (sync replication: always), by a slave
// promoted after it: the cancellation is recorded in the engine's cancel
// log and then stored as a cancel marker in the timer queue, which
// replicates with the CommitLog. It returns the due time.
func (b *Broker) CancelDelayed(ctx context.Context, topic, uniqueID string) (deliverMS int64, copies int, err error) {
	if err := message.ValidateTopic(topic); err != nil {
		return 0, 0, wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if uniqueID == "" {
		return 0, 0, wire.Errorf(pb.Code_INVALID_PARAMETER, "no unique id given")
	}
	d := b.delay.Load()
	if d == nil || !d.ensureRole() {
		return 0, 0, wire.Errorf(pb.Code_NOT_MASTER, "broker %s/%d does not deliver delayed messages (not a master)", b.opts.BrokerName, b.brokerID())
	}
	if d.engine == nil {
		return 0, 0, wire.Errorf(pb.Code_REQUEST_NOT_SUPPORTED, "delivery at a time is turned off on broker %s", b.opts.BrokerName)
	}
	// Every message acknowledged before this call must be in the index.
	if err := b.store.WaitDispatched(ctx, b.store.CommitLog().MaxOffset()); err != nil {
		return 0, 0, storeError(err)
	}
	found, err := b.store.QueryByKey(message.TimerTopic, uniqueID, 0, math.MaxInt64, 64)
	if err != nil {
		return 0, 0, storeError(err)
	}
	var targets []delay.CancelTarget
	for _, m := range found {
		if m.Properties[message.PropertyRealTopic] != topic || m.UniqueID() != uniqueID {
			continue
		}
		t := delay.CancelTarget{Location: m.PhysicalOffset, Origin: m.PhysicalOffset}
		t.DeliverMS, _ = strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
		if o, err := strconv.ParseInt(m.Properties[message.PropertyTimerOrigin], 10, 64); err == nil && o >= 0 {
			t.Origin = o
		}
		targets = append(targets, t)
		deliverMS = max(deliverMS, t.DeliverMS)
	}
	if len(targets) == 0 {
		// Delivered at once (due on arrival), or not a timer message?
		if msgs, err := b.store.QueryByKey(topic, uniqueID, 0, math.MaxInt64, 4); err == nil {
			for _, m := range msgs {
				if m.UniqueID() == uniqueID && m.Properties[message.PropertyTimerOutMS] != "" {
					return 0, 0, wire.Errorf(pb.Code_DELAY_ALREADY_DELIVERED, "timer message %s of %s was delivered", uniqueID, topic)
				}
			}
		}
		return 0, 0, wire.Errorf(pb.Code_QUERY_NOT_FOUND, "no pending timer message %s of %s on broker %s", uniqueID, topic, b.opts.BrokerName)
	}
	cancelled, err := d.engine.CancelEach(targets)
	n := len(cancelled)
	if len(cancelled) > 0 {
		if merr := b.storeCancelMarkers(cancelled); merr != nil {
			return deliverMS, n, merr
		}
	}
	switch {
	case errors.Is(err, delay.ErrAlreadyDelivered):
		return deliverMS, n, wire.Errorf(pb.Code_DELAY_ALREADY_DELIVERED, "timer message %s of %s was delivered", uniqueID, topic)
	case errors.Is(err, delay.ErrClosed):
		return deliverMS, n, wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", b.opts.BrokerName)
	case err != nil:
		return deliverMS, n, storeError(err)
	}
	return deliverMS, n, nil
}

// storeCancelMarkers stores a cancel marker per cancelled copy in the
// timer queue and waits for it as for a send (flush, replication).
func (b *Broker) storeCancelMarkers(ts []delay.CancelTarget) error {
	msgs := make([]*message.Ext, len(ts))
	for i, t := range ts {
		msgs[i] = &message.Ext{Message: message.Message{Topic: message.TimerTopic, Properties: delay.CancelMarker(t)}}
	}
	// Not the caller's context: the cancellation is made here already; its
	// marker is written whatever the caller does.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := b.store.PutBatch(ctx, msgs, nil)
	if err != nil {
		return fmt.Errorf("cancelled on %s but the cancellation is not stored for its slaves: %w", b.opts.BrokerName, storeError(err))
	}
	if err := b.waitReplicated(ctx, res); err != nil {
		return fmt.Errorf("cancelled on %s but the cancellation is not replicated: %w", b.opts.BrokerName, err)
	}
	return nil
}

// DelayStatus reports the delay levels and the timing wheel (nil levels on
// a broker that does not deliver).
func (b *Broker) DelayStatus() ([]LevelStatus, *delay.Status) {
	d := b.delay.Load()
	if d == nil || !d.ensureRole() {
		return nil, nil
	}
	var ts *delay.Status
	if d.engine != nil {
		st := d.engine.Status()
		ts = &st
	}
	return d.levelStatus(), ts
}

// DelayEngine exposes the timer engine (tests, tools), delivering or
// standing by; nil when timers are off or the broker is stopped.
func (b *Broker) DelayEngine() *delay.Engine {
	if d := b.delay.Load(); d != nil {
		return d.engine
	}
	return nil
}

// delayServer is the Delay gRPC service.
type delayServer struct {
	pb.UnimplementedDelayServer
	b *Broker
}

func (s *delayServer) Cancel(ctx context.Context, req *pb.CancelDelayedRequest) (*pb.CancelDelayedResponse, error) {
	due, n, err := s.b.CancelDelayed(ctx, req.Topic, req.UniqueId)
	return &pb.CancelDelayedResponse{Status: wire.Status(err), DeliverAtMs: due, Copies: int32(n)}, nil
}

func (s *delayServer) Status(context.Context, *pb.DelayStatusRequest) (*pb.DelayStatusResponse, error) {
	levels, ts := s.b.DelayStatus()
	if levels == nil && ts == nil {
		return &pb.DelayStatusResponse{Status: wire.Status(wire.Errorf(pb.Code_NOT_MASTER,
			"broker %s/%d does not deliver delayed messages (not a master)", s.b.opts.BrokerName, s.b.brokerID()))}, nil
	}
	resp := &pb.DelayStatusResponse{Status: wire.OK}
	for _, l := range levels {
		ls := &pb.DelayLevelStatus{Level: int32(l.Level), DelayMs: l.Delay.Milliseconds(), Offset: l.Offset,
			MaxOffset: l.MaxOffset, Pending: l.Pending}
		if !l.NextDeliver.IsZero() {
			ls.NextDeliverMs = l.NextDeliver.UnixMilli()
		}
		resp.Levels = append(resp.Levels, ls)
	}
	t := &pb.TimerStatus{Enabled: ts != nil, MaxDelayMs: s.b.opts.Delay.MaxDelay.Milliseconds()}
	if ts != nil {
		_, qmax := s.b.store.QueueOffsets(message.TimerTopic, 0)
		t.IndexedOffset, t.QueueMaxOffset = ts.IndexedOffset, qmax
		t.Pending, t.Buckets, t.LoadedBuckets, t.LoadedEntries = ts.Pending, ts.Buckets, ts.LoadedBuckets, ts.LoadedEntries
		t.Delivered, t.Cancelled, t.Lost, t.NextDueMs, t.IndexBytes = ts.Delivered, ts.Cancelled, ts.Lost, ts.NextDueMS, ts.IndexBytes
	}
	resp.Timer = t
	return resp, nil
}
