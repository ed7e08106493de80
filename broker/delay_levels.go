package broker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// levelBatch bounds the messages one delivery of a level stores at once.
const levelBatch = 64

// runLevel delivers one delay level: it walks queue level−1 of
// SCHEDULE_TOPIC_XXXX from its saved offset and stores every message whose
// due time (the unit's tag code) has come in its real topic, in queue
// order. It waits for the head's due time, or for the queue to grow. It
// runs while the broker is the master (r).
func (d *delayService) runLevel(r *delayRun, level int) {
	defer r.wg.Done()
	qid := int32(level - 1)
	delayMS := d.levels.Delay(level).Milliseconds()
	log := d.log.With(zap.Int("level", level))
	off := d.offsets.Get(level)
	retry := 100 * time.Millisecond
	for {
		arrived := d.b.arrivalSignal(message.ScheduleTopic, qid).C()
		now := d.clock.Now().UnixMilli()
		var stopAt int64
		stopped := false
		filter := func(due int64) bool {
			if stopped {
				return false
			}
			if due > now+delayMS {
				// Due later than a message stored now would be: the clock
				// went back. Deliver it now rather than hold the level.
				due = now
			}
			if due > now {
				stopped, stopAt = true, due
				return false
			}
			return true
		}
		res, err := d.b.store.GetMessages(message.ScheduleTopic, qid, off, levelBatch, 4<<20, filter)
		if err != nil {
			log.Error("read schedule queue", zap.Int64("offset", off), zap.Error(err))
			if !d.wait(r.ctx, nil, nil, time.Second) {
				return
			}
			continue
		}
		switch res.Status {
		case store.Found:
			if err := d.deliverLevel(res); err != nil {
				log.Error("deliver delayed messages; retrying", zap.Int64("offset", off), zap.Error(err))
				if !d.wait(r.ctx, nil, nil, retry) {
					return
				}
				retry = min(2*retry, 5*time.Second)
				continue
			}
			retry = 100 * time.Millisecond
			off = res.QueueOffsets[len(res.QueueOffsets)-1] + 1
			d.offsets.Set(level, off)
			continue
		case store.NoMatchedMessage:
			if !stopped { // every unit scanned was gone (retention)
				off = res.NextOffset
				d.offsets.Set(level, off)
				continue
			}
			if !d.wait(r.ctx, d.clock.NewTimer(time.UnixMilli(stopAt).Sub(d.clock.Now())), nil, 0) {
				return
			}
		case store.OffsetTooSmall, store.OffsetOverflowBadly:
			log.Warn("delay offset out of the queue's range; moved", zap.Int64("offset", off),
				zap.Int64("min", res.MinOffset), zap.Int64("max", res.MaxOffset))
			off = res.NextOffset
			d.offsets.Set(level, off)
		default: // nothing new
			if !d.wait(r.ctx, nil, arrived, time.Second) {
				return
			}
		}
	}
}

// wait waits for a clock timer, an arrival or a wall-clock fallback; it
// reports whether ctx (the run) is still live.
func (d *delayService) wait(ctx context.Context, t delay.Timer, arrived <-chan struct{}, fallback time.Duration) bool {
	var tc <-chan time.Time
	if t != nil {
		tc = t.C()
		defer t.Stop()
	}
	var fc <-chan time.Time
	if fallback > 0 {
		ft := time.NewTimer(fallback)
		defer ft.Stop()
		fc = ft.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-tc:
	case <-arrived:
	case <-fc:
	}
	return true
}

// deliverLevel stores the due messages of a read in their real topics, in
// one append. A record that does not decode is skipped (logged).
func (d *delayService) deliverLevel(res store.GetResult) error {
	msgs := make([]*message.Ext, 0, len(res.Records))
	for i, rec := range res.Records {
		m, err := message.Decode(rec)
		if err == nil {
			m, err = delay.RealMessage(m, 0)
		}
		if err != nil {
			d.log.Error("delayed message dropped: cannot restore it", zap.Int64("queueOffset", res.QueueOffsets[i]), zap.Error(err))
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	// Not the service's context: a delivery begun completes, so a clean
	// stop repeats nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.b.deliverDelayed(ctx, msgs)
}

// LevelStatus is one delay level's progress.
type LevelStatus struct {
	Level                      int
	Delay                      time.Duration
	Offset, MaxOffset, Pending int64
	NextDeliver                time.Time // zero: nothing pending
}

func (d *delayService) levelStatus() []LevelStatus {
	out := make([]LevelStatus, 0, d.levels.Max())
	for level := 1; level <= d.levels.Max(); level++ {
		qid := int32(level - 1)
		off := d.offsets.Get(level)
		_, maxOff := d.b.store.QueueOffsets(message.ScheduleTopic, qid)
		st := LevelStatus{Level: level, Delay: d.levels.Delay(level), Offset: off, MaxOffset: maxOff, Pending: max(0, maxOff-off)}
		if st.Pending > 0 {
			if ts, err := d.b.store.StoreTimeAt(message.ScheduleTopic, qid, off); err == nil {
				st.NextDeliver = time.UnixMilli(ts).Add(st.Delay)
			}
		}
		out = append(out, st)
	}
	return out
}
