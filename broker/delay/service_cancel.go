package delay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Cancel cancels the pending timer message of topic whose unique id is
// uniqueID (every stored copy of it, if the producer retried). Once it
// returns nil the message is never delivered, by this broker or, with the
// guarantee of an acknowledged send (sync replication: always), by a slave
// promoted after it: the cancellation is recorded in the engine's cancel
// log and then stored as a cancel marker in the timer queue, which
// replicates with the CommitLog. It returns the due time.
func (d *Service) Cancel(ctx context.Context, topic, uniqueID string) (deliverMS int64, copies int, err error) {
	if err := message.ValidateTopic(topic); err != nil {
		return 0, 0, errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	if uniqueID == "" {
		return 0, 0, errcode.Errorf(errcode.InvalidParameter, "no unique id given")
	}
	if !d.ensureRole() {
		return 0, 0, d.notDelivering()
	}
	if d.engine == nil {
		return 0, 0, errcode.Errorf(errcode.RequestNotSupported, "delivery at a time is turned off on broker %s", d.cfg.BrokerName)
	}
	// Every message acknowledged before this call must be in the index.
	if err := d.host.WaitDispatched(ctx, d.host.CommitLogMaxOffset()); err != nil {
		return 0, 0, err
	}
	found, err := d.host.QueryByKey(message.TimerTopic, uniqueID, 0, math.MaxInt64, 64)
	if err != nil {
		return 0, 0, err
	}
	var targets []CancelTarget
	for _, m := range found {
		if m.Properties[message.PropertyRealTopic] != topic || m.UniqueID() != uniqueID {
			continue
		}
		t := CancelTarget{Location: m.PhysicalOffset, Origin: m.PhysicalOffset}
		t.DeliverMS, _ = strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
		if o, err := strconv.ParseInt(m.Properties[message.PropertyTimerOrigin], 10, 64); err == nil && o >= 0 {
			t.Origin = o
		}
		targets = append(targets, t)
		deliverMS = max(deliverMS, t.DeliverMS)
	}
	if len(targets) == 0 {
		// Delivered at once (due on arrival), or not a timer message?
		if msgs, err := d.host.QueryByKey(topic, uniqueID, 0, math.MaxInt64, 4); err == nil {
			for _, m := range msgs {
				if m.UniqueID() == uniqueID && m.Properties[message.PropertyTimerOutMS] != "" {
					return 0, 0, errcode.Errorf(errcode.DelayAlreadyDelivered, "timer message %s of %s was delivered", uniqueID, topic)
				}
			}
		}
		return 0, 0, errcode.Errorf(errcode.QueryNotFound, "no pending timer message %s of %s on broker %s", uniqueID, topic, d.cfg.BrokerName)
	}
	cancelled, err := d.engine.CancelEach(targets)
	n := len(cancelled)
	if len(cancelled) > 0 {
		if merr := d.storeCancelMarkers(cancelled); merr != nil {
			return deliverMS, n, merr
		}
	}
	switch {
	case errors.Is(err, ErrAlreadyDelivered):
		return deliverMS, n, errcode.Errorf(errcode.DelayAlreadyDelivered, "timer message %s of %s was delivered", uniqueID, topic)
	case errors.Is(err, ErrClosed):
		return deliverMS, n, errcode.Errorf(errcode.ShuttingDown, "broker %s is stopping", d.cfg.BrokerName)
	case err != nil:
		return deliverMS, n, errcode.Errorf(errcode.SystemError, "%v", err)
	}
	return deliverMS, n, nil
}

// storeCancelMarkers stores a cancel marker per cancelled copy in the
// timer queue and waits for it as for a send (flush, replication).
func (d *Service) storeCancelMarkers(ts []CancelTarget) error {
	msgs := make([]*message.Ext, len(ts))
	for i, t := range ts {
		msgs[i] = &message.Ext{Message: message.Message{Topic: message.TimerTopic, Properties: CancelMarker(t)}}
	}
	// Not the caller's context: the cancellation is made here already; its
	// marker is written whatever the caller does.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := d.host.Put(ctx, msgs)
	if err != nil {
		return fmt.Errorf("cancelled on %s but the cancellation is not stored for its slaves: %w", d.cfg.BrokerName, err)
	}
	if err := d.host.WaitReplicated(ctx, res); err != nil {
		return fmt.Errorf("cancelled on %s but the cancellation is not replicated: %w", d.cfg.BrokerName, err)
	}
	return nil
}

// Status reports the delay levels and the timing wheel (nil when timers
// are off); NOT_MASTER on a broker that does not deliver.
func (d *Service) Status() ([]LevelStatus, *Status, error) {
	if !d.ensureRole() {
		return nil, nil, d.notDelivering()
	}
	var ts *Status
	if d.engine != nil {
		st := d.engine.Status()
		ts = &st
	}
	return d.levelStatus(), ts, nil
}
