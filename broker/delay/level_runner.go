package delay

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// levelBatch bounds the messages one delivery of a level stores at once.
const levelBatch = 64

// runLevel delivers one delay level: it walks queue level−1 of
// SCHEDULE_TOPIC_XXXX from its saved offset and stores every message whose
// due time (levelDueMS of the unit's tag code) has come in its real topic,
// in queue order. It waits for the head's due time, or for the queue to
// grow. It runs while the broker is the master (until ctx ends).
func (d *Service) runLevel(ctx context.Context, level int) {
	qid := int32(level - 1)
	delayMS := d.levels.Delay(level).Milliseconds()
	log := d.log.With(zap.Int("level", level))
	off := d.offsets.Get(level)
	retry := 100 * time.Millisecond
	for {
		arrived := d.host.Arrival(message.ScheduleTopic, qid)
		now := d.clock.Now().UnixMilli()
		var stopAt int64
		stopped := false
		filter := func(tag int64) bool {
			if stopped {
				return false
			}
			due := levelDueMS(tag)
			if tag > now+delayMS {
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
		res, err := d.host.GetMessages(message.ScheduleTopic, qid, off, levelBatch, 4<<20, filter)
		if err != nil {
			log.Error("read schedule queue", zap.Int64("offset", off), zap.Error(err))
			if !d.wait(ctx, nil, nil, time.Second) {
				return
			}
			continue
		}
		switch res.Status {
		case store.Found:
			if err := d.deliverLevel(res); err != nil {
				log.Error("deliver delayed messages; retrying", zap.Int64("offset", off), zap.Error(err))
				if !d.wait(ctx, nil, nil, retry) {
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
			if !d.wait(ctx, TimerAt(d.clock, time.UnixMilli(stopAt)), nil, 0) {
				return
			}
		case store.OffsetTooSmall, store.OffsetOverflowBadly:
			log.Warn("delay offset out of the queue's range; moved", zap.Int64("offset", off),
				zap.Int64("min", res.MinOffset), zap.Int64("max", res.MaxOffset))
			off = res.NextOffset
			d.offsets.Set(level, off)
		default: // nothing new
			if !d.wait(ctx, nil, arrived, time.Second) {
				return
			}
		}
	}
}

// levelDueMS is when a delay-level message whose unit has tag code tag
// (store time + the level's delay, ms) is due, in ms: the store time is
// the instant the message was stored truncated to the millisecond, so the
// message is due up to 1 ms after its tag code. It is delivered once the
// clock reads at or after tag + 1 ms, never before the true instant.
func levelDueMS(tag int64) int64 { return tag + 1 }

// wait waits for a clock timer, an arrival or a wall-clock fallback; it
// reports whether ctx (the lead) is still live.
func (d *Service) wait(ctx context.Context, t Timer, arrived <-chan struct{}, fallback time.Duration) bool {
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
// one append, copied and patched (restoreRecord). A record that cannot be
// restored is skipped (logged).
func (d *Service) deliverLevel(res store.GetResult) error {
	recs := make([]store.Prepared, 0, len(res.Records))
	size := 0
	for _, rec := range res.Records {
		size += len(rec)
	}
	buf := make([]byte, 0, size+64*len(res.Records))
	host := d.host.StoreHost()
	for i, rec := range res.Records {
		var p store.Prepared
		var err error
		buf, p, err = restoreRecord(buf, rec, host, 0)
		if err != nil {
			d.log.Error("delayed message dropped: cannot restore it", zap.Int64("queueOffset", res.QueueOffsets[i]), zap.Error(err))
			continue
		}
		recs = append(recs, p)
	}
	if len(recs) == 0 {
		return nil
	}
	// Not the lead's context: a delivery begun completes, so a clean stop
	// repeats nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.deliver(ctx, recs)
}

// LevelStatus is one delay level's progress.
type LevelStatus struct {
	Level                      int
	Delay                      time.Duration
	Offset, MaxOffset, Pending int64
	NextDeliver                time.Time // zero: nothing pending (or not read)
}

// Levels reports the delay levels' offsets, without their next due time
// (which reads the store): for metrics.
func (d *Service) Levels() []LevelStatus {
	out := make([]LevelStatus, 0, d.levels.Max())
	for level := 1; level <= d.levels.Max(); level++ {
		off := d.offsets.Get(level)
		_, maxOff := d.host.QueueOffsets(message.ScheduleTopic, int32(level-1))
		out = append(out, LevelStatus{Level: level, Delay: d.levels.Delay(level), Offset: off, MaxOffset: maxOff, Pending: max(0, maxOff-off)})
	}
	return out
}

// levelStatus is Levels with the next due time of each level's head.
func (d *Service) levelStatus() []LevelStatus {
	out := d.Levels()
	for i := range out {
		st := &out[i]
		if st.Pending > 0 {
			if ts, err := d.host.StoreTimeAt(message.ScheduleTopic, int32(st.Level-1), st.Offset); err == nil {
				st.NextDeliver = time.UnixMilli(levelDueMS(ts + st.Delay.Milliseconds()))
			}
		}
	}
	return out
}
