package delay

import (
	"context"
	"encoding/binary"
	"net/netip"
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
	deliver func(ctx context.Context, recs []store.Prepared) error
}

func (q timerQueue) ReadTimerQueue(from int64, max int) ([]Unit, int64, error) {
	// The records are scanned where the store reads them (GetMatching's
	// match), not copied out: match refuses every record but the max-th,
	// whose acceptance ends the read (maxCount 1), and the one that fails
	// to scan, so that the read ends at it.
	// Made at the first record: an idle broker reads an empty queue twice
	// a second and allocates nothing for it.
	var units []Unit
	var scanErr error
	match := func(rec []byte) bool {
		if units == nil {
			units = make([]Unit, 0, min(max, 1024))
		}
		u, marker, err := scanTimerRecord(rec)
		if err != nil {
			scanErr = err
			return true
		}
		if marker {
			// A cancel marker: decode it once, fully.
			m, err := message.Decode(rec)
			if err != nil {
				scanErr = err
				return true
			}
			t, _, err := ParseCancelMarker(m.Properties)
			if err != nil {
				q.log.Error("cancel marker ignored", zap.Int64("location", u.Location), zap.Error(err))
				return false
			}
			u.Cancel = &t
		}
		units = append(units, u)
		return len(units) >= max
	}
	res, err := q.host.GetMatching(message.TimerTopic, 0, from, 1, 8<<20, nil, match)
	if err != nil {
		return nil, from, err
	}
	switch res.Status {
	case store.Found:
		if scanErr != nil {
			return units, res.QueueOffsets[0], scanErr
		}
		return units, res.QueueOffsets[0] + 1, nil
	case store.NoMatchedMessage:
		return units, res.NextOffset, nil
	case store.OffsetTooSmall, store.OffsetOverflowBadly:
		return nil, res.NextOffset, nil
	default:
		return nil, from, nil
	}
}

// scanTimerRecord reads what the index needs of a timer queue record — its
// location, queue offset, size, due time (TIMER_OUT_MS) and origin (TIMER_ORIGIN, on the
// copies the roller stores) — and whether it is a cancel marker, from the
// record's bytes, without decoding it.
func scanTimerRecord(rec []byte) (u Unit, marker bool, err error) {
	props, err := message.RecordProperties(rec)
	if err != nil {
		return Unit{}, false, err
	}
	u.Location = int64(binary.BigEndian.Uint64(rec[message.PosPhysicalOffset:]))
	u.QueueOffset = int64(binary.BigEndian.Uint64(rec[message.PosQueueOffset:]))
	u.Size = int32(len(rec))
	err = message.EachProperty(props, func(name, val []byte) error {
		switch string(name) {
		case message.PropertyTimerOutMS:
			u.DeliverMS = message.ParseTimerOutMS(val)
		case message.PropertyTimerOrigin:
			o, err := strconv.ParseInt(string(val), 10, 64)
			u.Origin, u.HasOrigin = o, err == nil && o >= 0
			if !u.HasOrigin {
				u.Origin = 0
			}
		case PropertyTimerCancel:
			marker = true
		}
		return nil
	})
	if err != nil {
		return Unit{}, false, err
	}
	return u, marker, nil
}

func (q timerQueue) TimerQueueMaxOffset() int64 {
	_, maxOff := q.host.QueueOffsets(message.TimerTopic, 0)
	return maxOff
}

func (q timerQueue) TimerArrival() <-chan struct{} {
	return q.host.Arrival(message.TimerTopic, 0)
}

func (q timerQueue) ReadRecords(locations []int64, fn func(i int, rec []byte, err error)) {
	q.host.ReadRecords(locations, fn)
}

func (q timerQueue) StoreHost() netip.AddrPort { return q.host.StoreHost() }

func (q timerQueue) Deliver(ctx context.Context, recs []store.Prepared) error {
	return q.deliver(ctx, recs)
}
