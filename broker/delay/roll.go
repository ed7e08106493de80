package delay

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// The roller keeps pending timer messages alive across CommitLog
// retention. A timer message is stored once, but retention deletes whole
// segments by age (72 h by default): before a segment holding a message
// that is due after the segment may be deleted reaches that age, the roller
// stores the message again (same properties plus TIMER_ORIGIN = the
// CommitLog offset of its first copy). The bucket index folds the copies of
// one origin together and delivers the newest, once. A message due within
// the retention time is never copied; one due in 400 days is copied about
// every MaxAge − RollAhead. Segments deleted early because the disk is full
// (the store's forced deletion) lose their pending timer messages; the
// engine counts them as lost.
//
// Progress (the next timer-queue offset to check) is kept in
// <timerwheel>/roll.json, written atomically after each batch of copies; a
// crash repeats at most that batch of copies, which are folded together.

type rollState struct {
	QueueOffset int64 `json:"queueOffset"`
}

// rollLoop runs the roller every RollInterval (wall time: retention works on
// file times) while the broker is the master (until ctx ends).
func (d *Service) rollLoop(ctx context.Context) {
	path := filepath.Join(d.timerDir, "roll.json")
	var st rollState
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			d.log.Error("roll state unreadable; starting from the queue's beginning", zap.Error(err))
		}
	}
	t := time.NewTicker(d.cfg.Options.RollInterval)
	defer t.Stop()
	for {
		next, err := d.rollOnce(st.QueueOffset, time.Now())
		if err != nil {
			d.log.Error("timer roll failed; retrying", zap.Error(err))
		}
		if next != st.QueueOffset {
			st.QueueOffset = next
			b, _ := json.Marshal(st)
			if err := fsutil.WriteFileAtomic(path, b, 0o644); err != nil {
				d.log.Error("persist roll state", zap.Error(err))
			}
			continue // more may be at risk
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// rollOnce checks one batch of the timer queue from offset off against the
// segments retention may delete within RollAhead, copies the messages that
// would otherwise be lost, and returns where to continue.
func (d *Service) rollOnce(off int64, now time.Time) (int64, error) {
	o := d.cfg.Options
	maxAge := d.cfg.RetentionMaxAge
	// deadline[i]: the earliest time segment i may be deleted.
	segs := d.host.Segments()
	type risk struct {
		end      int64
		deadline time.Time
	}
	var atRisk []risk
	for i, s := range segs {
		if i == len(segs)-1 {
			break // the active segment is never deleted
		}
		fi, err := os.Stat(s.Path)
		if err != nil {
			break
		}
		deadline := fi.ModTime().Add(maxAge)
		if deadline.After(now.Add(o.RollAhead)) {
			break
		}
		atRisk = append(atRisk, risk{s.End, deadline})
	}
	if len(atRisk) == 0 {
		return off, nil
	}
	res, err := d.host.GetMessages(message.TimerTopic, 0, off, 256, 8<<20, nil)
	if err != nil {
		return off, err
	}
	switch res.Status {
	case store.Found:
	case store.NoMatchedMessage, store.OffsetTooSmall, store.OffsetOverflowBadly:
		return res.NextOffset, nil
	default:
		return off, nil
	}
	var copies []*message.Ext
	next := off
	for i, rec := range res.Records {
		m, err := message.Decode(rec)
		if err != nil {
			return next, err
		}
		k := 0
		for k < len(atRisk) && m.PhysicalOffset >= atRisk[k].end {
			k++
		}
		if k == len(atRisk) {
			break // not at risk yet: stop here, in queue order
		}
		next = res.QueueOffsets[i] + 1
		if _, ok := m.Properties[PropertyTimerCancel]; ok {
			continue // a cancel marker: nothing to deliver
		}
		due, _ := strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
		origin := m.PhysicalOffset
		if o, err := strconv.ParseInt(m.Properties[message.PropertyTimerOrigin], 10, 64); err == nil && o >= 0 {
			origin = o
		}
		// Due well before its segment may go: it is delivered from here.
		if time.UnixMilli(due).Before(atRisk[k].deadline.Add(-o.RollMargin)) {
			continue
		}
		if d.engine != nil && d.engine.Cancelled(origin) {
			continue
		}
		m.Properties[message.PropertyTimerOrigin] = strconv.FormatInt(origin, 10)
		cp := &message.Ext{Message: message.Message{Topic: message.TimerTopic, Flag: m.Flag, Body: m.Body, Properties: m.Properties},
			SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes}
		copies = append(copies, cp)
	}
	if len(copies) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := d.host.Put(ctx, copies)
		if err == nil {
			err = d.host.WaitReplicated(ctx, res)
		}
		if err != nil {
			return off, errors.Join(errors.New("store timer message copies"), err)
		}
		d.log.Info("timer messages copied ahead of retention", zap.Int("messages", len(copies)), zap.Int64("queueOffset", next))
	}
	return next, nil
}
