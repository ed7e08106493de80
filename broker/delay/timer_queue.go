package delay

import (
	"bytes"
	"context"
	"strconv"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// timerQueue is the timer engine's Host on a broker: the timer topic's
// queue, the stored messages and delivery to real topics.
type timerQueue struct {
	host BrokerHost
	log  *zap.Logger
	// deliver stores due messages (Service.deliver).
	deliver func(ctx context.Context, msgs []*message.Ext) error
}

var (
	timerOriginKey = []byte(message.PropertyTimerOrigin + "\x01")
	timerCancelKey = []byte(PropertyTimerCancel + "\x01")
)

func (q timerQueue) ReadTimerQueue(from int64, max int) ([]Unit, int64, error) {
	res, err := q.host.GetMessages(message.TimerTopic, 0, from, max, 8<<20, nil)
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
	units := make([]Unit, 0, len(res.Records))
	for i, rec := range res.Records {
		d, err := message.DecodeDispatch(rec)
		if err != nil {
			return units, res.QueueOffsets[i], err
		}
		u := Unit{QueueOffset: res.QueueOffsets[i], Location: d.PhysicalOffset, Size: d.Size, DeliverMS: d.TimerOutMS}
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
					t, ok, err := ParseCancelMarker(m.Properties)
					if err != nil {
						q.log.Error("cancel marker ignored", zap.Int64("location", d.PhysicalOffset), zap.Error(err))
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

func (q timerQueue) TimerQueueMaxOffset() int64 {
	_, maxOff := q.host.QueueOffsets(message.TimerTopic, 0)
	return maxOff
}

func (q timerQueue) TimerArrival() <-chan struct{} {
	return q.host.Arrival(message.TimerTopic, 0)
}

func (q timerQueue) ReadMessages(locations []int64, fn func(i int, m *message.Ext, err error)) {
	q.host.ReadMessages(locations, fn)
}

func (q timerQueue) Deliver(ctx context.Context, msgs []*message.Ext) error {
	return q.deliver(ctx, msgs)
}
