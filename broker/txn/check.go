package txn

import (
	"slices"
	"sort"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/message"
)

// checkDue checks every pending transaction whose time has come.
func (s *Service) checkDue(now time.Time) {
	nowMS := now.UnixMilli()
	s.mu.Lock()
	var due []*txn
	for _, t := range s.pending {
		if t.nextCheckMS <= nowMS {
			due = append(due, t)
		}
	}
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	s.mu.Lock()
	sort.Slice(due, func(i, j int) bool { return due[i].cur.queueOffset < due[j].cur.queueOffset })
	s.mu.Unlock()
	for len(due) > 0 && s.ctx.Err() == nil {
		n := min(len(due), checkBatch)
		s.checkBatch(due[:n])
		due = due[n:]
	}
}

// checkItem is one transaction a check pass handles.
type checkItem struct {
	t          *txn
	m          *message.Ext // its newest copy
	checkTimes int32
	group      string
}

// checkBatch checks some due transactions: each is re-appended with one
// more check (one append for all), then a check is pushed to a producer of
// its group; those checked CheckMax times are discarded instead.
func (s *Service) checkBatch(ts []*txn) {
	var locked []*txn
	for _, t := range ts {
		if t.mu.TryLock() { // busy: being ended right now
			locked = append(locked, t)
		}
	}
	unlock := func() {
		for _, t := range locked {
			t.mu.Unlock()
		}
		locked = nil
	}
	defer unlock()
	var recheck, discard []checkItem
	nowMS := time.Now().UnixMilli()
	for _, t := range locked {
		s.mu.Lock()
		live := t.outcome == outcomeNone && s.pending[t.id] == t && t.nextCheckMS <= nowMS
		cur, ct, verified, group := t.cur, t.checkTimes, t.verified, t.group
		s.mu.Unlock()
		if !live {
			continue
		}
		m, err := s.host.ReadMessage(cur.phys)
		if err != nil {
			// Removed by retention: nothing left to check or commit.
			s.log.Warn("half message is gone; forgetting the transaction", zap.String("id", t.id), zap.Int64("offset", cur.phys), zap.Error(err))
			s.mu.Lock()
			if s.pending[t.id] == t {
				delete(s.pending, t.id)
			}
			s.mu.Unlock()
			continue
		}
		if !verified {
			// A transaction found pending after a restart, or a late copy
			// of one: make sure the store holds no outcome for it.
			o, repair := s.lookup(t.id, m), false
			if o == outcomeNone {
				o, repair = s.lost(t, m), true
			}
			s.mu.Lock()
			t.verified = true
			s.mu.Unlock()
			if o != outcomeNone {
				s.log.Info("transaction had already ended", zap.String("id", t.id), zap.Stringer("outcome", o))
				if repair {
					if _, err := s.finish(s.ctx, t, m, o, false); err != nil {
						s.log.Warn("write op record", zap.String("id", t.id), zap.Error(err))
					}
				} else {
					s.mu.Lock()
					t.outcome = o
					delete(s.pending, t.id)
					s.rememberLocked(t.id, o, time.Now())
					s.mu.Unlock()
				}
				continue
			}
		}
		it := checkItem{t: t, m: m, checkTimes: ct, group: group}
		if int(ct) >= s.opts.CheckMax {
			discard = append(discard, it)
		} else {
			recheck = append(recheck, it)
		}
	}
	for _, it := range discard {
		if _, err := s.finish(s.ctx, it.t, it.m, outcomeDiscard, true); err != nil {
			s.log.Warn("discard half message", zap.String("id", it.t.id), zap.Error(err))
			continue
		}
		s.log.Info("half message discarded after the maximum number of checks", zap.String("id", it.t.id),
			zap.String("group", it.group), zap.String("topic", it.t.topic), zap.Int32("checks", it.checkTimes))
	}
	if len(recheck) == 0 {
		return
	}
	if s.host.Writable() != nil {
		return // demoted: the new master checks
	}
	copies := make([]*message.Ext, len(recheck))
	for i, it := range recheck {
		copies[i] = copyMessage(it.m, message.TransHalfTopic, map[string]string{
			message.PropertyTransactionCheckTimes: strconv.Itoa(int(it.checkTimes) + 1),
		})
	}
	// The copies become the transactions' current ones, and the half
	// queue's committed offset passes the old ones, only once they are
	// replicated: a slave that took the offset without the copies would,
	// as the next master, never check these transactions back. Copies
	// stored but not replicated are late copies to whoever finds them.
	res, err := s.host.Append(s.ctx, copies)
	if err == nil {
		err = s.host.WaitReplicated(s.ctx, res)
	}
	if err != nil {
		s.log.Warn("re-append half messages for check", zap.Error(err))
		return
	}
	type push struct {
		group string
		check Check
	}
	var pushes []push
	s.mu.Lock()
	for i, r := range res {
		it := recheck[i]
		t := it.t
		if !slices.Contains(t.copies, r.QueueOffset) {
			t.copies = append(t.copies, r.QueueOffset)
		}
		if r.QueueOffset > t.cur.queueOffset {
			t.cur = halfCopy{queueOffset: r.QueueOffset, phys: r.PhysicalOffset, storeMS: r.StoreTimestamp}
		}
		t.checkTimes = max(t.checkTimes, it.checkTimes+1)
		s.scheduleLocked(t)
		pushes = append(pushes, push{group: it.group, check: Check{
			Group: it.group, Topic: t.topic, QueueID: t.queueID,
			CommitLogOffset: r.PhysicalOffset, HalfQueueOffset: r.QueueOffset,
			UniqueID: t.uniq, TransactionID: t.id, OffsetMsgID: r.MsgID, CheckTimes: it.checkTimes + 1,
		}})
	}
	s.mu.Unlock()
	unlock() // the producers' answers need the transactions
	for _, p := range pushes {
		rec, err := s.host.ReadRecord(p.check.CommitLogOffset)
		if err != nil {
			continue
		}
		p.check.Record = rec
		s.stats.checks.Add(1)
		if s.host.PushCheck(s.ctx, p.group, p.check) {
			s.stats.checksSent.Add(1)
		} else {
			s.stats.checksNoProducer.Add(1)
		}
	}
}
