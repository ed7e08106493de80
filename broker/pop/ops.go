package pop

import (
	"context"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// Pop hands out messages of a topic for a group (see the package
// documentation). With nothing to hand out it waits up to PollTimeout for a
// message to arrive or become visible again, then answers empty.
func (s *Service) Pop(ctx context.Context, req Request) ([]Message, error) {
	if err := s.checkNames(req.Group, req.Topic); err != nil {
		return nil, err
	}
	if req.Invisible <= 0 || req.Invisible > MaxInvisible {
		return nil, errcode.Errorf(errcode.IllegalInvisibleTime, "invisible duration %v is outside (0, %v]", req.Invisible, MaxInvisible)
	}
	ti, err := s.checkTopic(req.Topic)
	if err != nil {
		return nil, err
	}
	filter, err := s.h.Filter(req.ExpressionType, req.TagExpression)
	if err != nil {
		return nil, err
	}
	var queues []int32
	switch {
	case req.QueueID >= 0:
		if req.QueueID >= ti.ReadQueues {
			return nil, errcode.Errorf(errcode.InvalidParameter, "queue %d of %s does not exist (read queues: %d)", req.QueueID, req.Topic, ti.ReadQueues)
		}
		queues = []int32{req.QueueID}
	case ti.ReadQueues == 0:
		return nil, errcode.Errorf(errcode.NoPermission, "topic %s has no readable queue on broker %s", req.Topic, s.opts.BrokerName)
	default:
		start := int32(s.rr.Add(1) % uint32(ti.ReadQueues))
		queues = make([]int32, ti.ReadQueues)
		for i := range queues {
			queues[i] = (start + int32(i)) % ti.ReadQueues
		}
	}
	if err := s.serving(ctx); err != nil {
		return nil, err
	}
	cfg := s.h.Group(req.Group)
	if cfg.Refusal != nil {
		return nil, cfg.Refusal
	}
	if req.ClientID != "" {
		s.seen(req.ClientID)
	}
	n := req.MaxMessages
	if n <= 0 {
		n = 32
	}
	n = min(n, s.opts.MaxMessages)
	gt := s.groupTopic(req.Group, req.Topic)
	p := &popper{s: s, gt: gt, req: req, cfg: cfg, filter: filter, want: n}

	var deadline <-chan time.Time
	if poll := min(req.PollTimeout, s.opts.LongPollMax); poll > 0 {
		t := time.NewTimer(poll)
		defer t.Stop()
		deadline = t.C
	}
	for {
		arrived := s.signal(req.Topic).C()
		out, wake, err := p.try(ctx, queues)
		if err != nil || len(out) > 0 || deadline == nil {
			return out, err
		}
		var wakeC <-chan time.Time
		var wakeT *time.Timer
		if wake > 0 {
			wakeT = time.NewTimer(time.Until(time.UnixMilli(wake)) + time.Millisecond)
			wakeC = wakeT.C
		}
		stop := false
		select {
		case <-arrived:
		case <-wakeC:
		case <-deadline:
			stop = true
		case <-ctx.Done():
			stop = true
		case <-s.ctx.Done():
			stop = true
		}
		if wakeT != nil {
			wakeT.Stop()
		}
		if stop {
			return nil, nil
		}
		if err := s.serving(ctx); err != nil {
			return nil, err
		}
		// The group may have been stopped (or redeclared) during the wait.
		if p.cfg = s.h.Group(req.Group); p.cfg.Refusal != nil {
			return nil, p.cfg.Refusal
		}
	}
}

// popper is one Pop request.
type popper struct {
	s      *Service
	gt     *groupTopic
	req    Request
	cfg    GroupConfig
	filter Filter
	want   int
}

// dlqItem is a message whose next delivery would exceed the group's
// maximum: it goes to the dead-letter queue.
type dlqItem struct {
	queueID int32
	offset  int64
	attempt int32
	record  []byte
}

// try hands out what is ready now. wake is the earliest time (Unix ms) a
// message of these queues becomes visible again (0: none).
func (p *popper) try(ctx context.Context, queues []int32) (out []Message, wake int64, err error) {
	s, gt := p.s, p.gt
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	now := time.Now()
	nowMS := now.UnixMilli()
	var recs []*Record
	var dlqs []dlqItem
	bytes := 0
	gt.mu.Lock()
	for _, q := range queues {
		if len(out) >= p.want {
			break
		}
		qs := s.queueLocked(gt, q)
		var got []Message
		var rs []*Record
		var ds []dlqItem
		var w int64
		if p.cfg.Fifo {
			got, rs, ds, w = p.fifoLocked(q, qs, p.want-len(out), nowMS, &bytes)
		} else {
			got, rs, ds, w = p.concurrentLocked(q, qs, p.want-len(out), nowMS, &bytes)
		}
		out = append(out, got...)
		recs = append(recs, rs...)
		dlqs = append(dlqs, ds...)
		if w > 0 && (wake == 0 || w < wake) {
			wake = w
		}
	}
	gt.mu.Unlock()

	// Dead letters first: their records follow their copies.
	var dead []Entry
	for _, d := range dlqs {
		if err := s.h.DeadLetter(ctx, p.req.Group, d.record, d.attempt, p.cfg.MaxAttempts, "POP: maximum delivery attempts reached"); err != nil {
			s.log.Warn("dead-letter a message", zap.String("group", p.req.Group), zap.String("topic", p.req.Topic),
				zap.Int32("queue", d.queueID), zap.Int64("offset", d.offset), zap.Error(err))
			continue
		}
		dead = append(dead, Entry{Offset: d.offset})
		recs = append(recs, &Record{Kind: KindDLQ, TimeMS: nowMS, Group: p.req.Group, Topic: p.req.Topic, QueueID: d.queueID,
			Entries: []Entry{{Offset: d.offset}}})
	}
	if err := s.append(ctx, recs); err != nil {
		// Not recorded: make the messages handed out visible again.
		gt.mu.Lock()
		for _, r := range recs {
			if r.Kind != KindPop {
				continue
			}
			qs := gt.qs[r.QueueID]
			for _, e := range r.Entries {
				if cur := qs.inflight[e.Offset]; cur != nil && cur.seq == e.Seq {
					cur.visibleAt = nowMS
					qs.visibleFrom = min(qs.visibleFrom, nowMS)
				}
			}
		}
		gt.mu.Unlock()
		return nil, 0, err
	}
	if len(dead) > 0 {
		gt.mu.Lock()
		for _, r := range recs {
			if r.Kind == KindDLQ {
				s.applyLocked(gt, r)
				gt.dlq.Add(int64(len(r.Entries)))
			}
		}
		gt.mu.Unlock()
		s.Notify(p.req.Topic) // a FIFO queue may go on now
	}
	gt.popped.Add(int64(len(out)))
	return out, wake, nil
}

// read returns the stored record at a queue offset (nil when retention
// removed it).
func (p *popper) read(q int32, off int64) ([]byte, error) {
	res, err := p.s.h.GetMessages(p.req.Topic, q, off, 1, 64<<20, Filter{})
	if err != nil {
		return nil, err
	}
	if res.Status != store.Found || res.QueueOffsets[0] != off {
		return nil, nil
	}
	return res.Records[0], nil
}

// redeliverLocked builds the redelivery of the in-flight messages at offs
// (visibility run out): a Pop entry with attempt+1, or a dead letter.
func (p *popper) redeliverLocked(q int32, qs *queueState, offs []int64, nowMS int64, pop *Record, gone *Record, out *[]Message, dlqs *[]dlqItem) {
	for _, off := range offs {
		e := qs.inflight[off]
		rec, err := p.read(q, off)
		if err != nil {
			p.s.log.Warn("read a message to redeliver", zap.String("topic", p.req.Topic), zap.Int32("queue", q), zap.Int64("offset", off), zap.Error(err))
			continue
		}
		if rec == nil {
			gone.Entries = append(gone.Entries, Entry{Offset: off, Seq: e.seq})
			continue
		}
		if int(e.attempt)+1 > p.cfg.MaxAttempts {
			// Held invisible (with a new sequence: old handles fail) while
			// it is written to the dead-letter queue.
			e.seq, e.visibleAt, e.client = p.s.nextSeq(), nowMS+dlqHold.Milliseconds(), ""
			*dlqs = append(*dlqs, dlqItem{queueID: q, offset: off, attempt: e.attempt, record: rec})
			continue
		}
		pop.Entries = append(pop.Entries, Entry{Offset: off, Seq: p.s.nextSeq(), Attempt: e.attempt + 1,
			VisibleAtMS: nowMS + p.req.Invisible.Milliseconds()})
		*out = append(*out, Message{Record: rec, QueueID: q, QueueOffset: off})
	}
}

// readNewLocked reads up to n messages from the queue's next offset,
// moving it past what the filter skips.
func (p *popper) readNewLocked(q int32, qs *queueState, n int, bytes *int, pop *Record, out *[]Message, nowMS int64) {
	for range 8 {
		if n <= 0 || *bytes >= p.s.opts.MaxBytes {
			return
		}
		res, err := p.s.h.GetMessages(p.req.Topic, q, qs.next, n, p.s.opts.MaxBytes-*bytes, p.filter)
		if err != nil {
			p.s.log.Warn("read a queue to pop", zap.String("topic", p.req.Topic), zap.Int32("queue", q), zap.Int64("offset", qs.next), zap.Error(err))
			return
		}
		switch res.Status {
		case store.Found:
			for i, rec := range res.Records {
				off := res.QueueOffsets[i]
				if _, busy := qs.inflight[off]; busy {
					continue
				}
				pop.Entries = append(pop.Entries, Entry{Offset: off, Seq: p.s.nextSeq(), Attempt: 1,
					VisibleAtMS: nowMS + p.req.Invisible.Milliseconds()})
				*out = append(*out, Message{Record: rec, QueueID: q, QueueOffset: off})
				*bytes += len(rec)
				n--
			}
			qs.next = max(qs.next, res.NextOffset)
			pop.Next = max(pop.Next, res.NextOffset)
			return
		case store.NoMatchedMessage, store.OffsetTooSmall, store.OffsetOverflowBadly:
			if res.NextOffset == qs.next {
				return
			}
			// Skipped by the filter, removed by retention, or the queue
			// was cut back: move on (not logged; a restart reads again).
			qs.next = res.NextOffset
			p.s.changes.Add(1)
			pop.Next = max(pop.Next, qs.next)
		default:
			return
		}
	}
}

// concurrentLocked pops from one queue of a non-FIFO group: messages whose
// invisibility ran out first (oldest first), then new ones.
func (p *popper) concurrentLocked(q int32, qs *queueState, want int, nowMS int64, bytes *int) (out []Message, recs []*Record, dlqs []dlqItem, wake int64) {
	pop := p.newPopRecord(q, qs, nowMS)
	gone := &Record{Kind: KindAck, TimeMS: nowMS, Group: p.req.Group, Topic: p.req.Topic, QueueID: q}
	if nowMS < qs.visibleFrom {
		// Nothing's invisibility has run out: no need to look.
		wake = qs.visibleFrom
	} else {
		var due []int64
		from := int64(1<<63 - 1)
		for off, e := range qs.inflight {
			if e.visibleAt > nowMS {
				from = min(from, e.visibleAt)
				continue
			}
			due = append(due, off)
		}
		slices.Sort(due)
		if len(due) > want {
			// Left for the next receive: look again then.
			due, from = due[:want], nowMS
		}
		if from != 1<<63-1 && from > nowMS {
			wake = from
		}
		p.redeliverLocked(q, qs, due, nowMS, pop, gone, &out, &dlqs)
		if len(dlqs) > 0 {
			from = min(from, nowMS+dlqHold.Milliseconds())
		}
		qs.visibleFrom = from // the redeliveries lower it as they apply
	}
	p.readNewLocked(q, qs, want-len(out), bytes, pop, &out, nowMS)
	return p.finishLocked(qs, pop, gone, out), recsOf(pop, gone), dlqs, wake
}

// fifoLocked pops from one queue of a FIFO group: nothing while any
// message handed out is invisible (unless the request retries the batch's
// attempt id: then that batch again); the same messages, in order, when
// their invisibility ran out; new messages once all are done.
func (p *popper) fifoLocked(q int32, qs *queueState, want int, nowMS int64, bytes *int) (out []Message, recs []*Record, dlqs []dlqItem, wake int64) {
	offs := qs.sortedInflight()
	var invisible []int64
	for _, off := range offs {
		if e := qs.inflight[off]; e.visibleAt > nowMS {
			invisible = append(invisible, off)
			if wake == 0 || e.visibleAt < wake {
				wake = e.visibleAt
			}
		}
	}
	if len(invisible) > 0 {
		if p.req.AttemptID == "" || p.req.AttemptID != qs.attemptID {
			return nil, nil, nil, wake
		}
		// A retry of the same receive: the same batch, same handles.
		for _, off := range invisible {
			e := qs.inflight[off]
			rec, err := p.read(q, off)
			if err != nil || rec == nil {
				continue
			}
			out = append(out, Message{Record: rec, QueueID: q, QueueOffset: off, Attempt: e.attempt,
				Handle: p.handle(q, off, e), VisibleAt: time.UnixMilli(e.visibleAt)})
		}
		return out, nil, nil, wake
	}
	pop := p.newPopRecord(q, qs, nowMS)
	gone := &Record{Kind: KindAck, TimeMS: nowMS, Group: p.req.Group, Topic: p.req.Topic, QueueID: q}
	if len(offs) > 0 {
		p.redeliverLocked(q, qs, offs[:min(len(offs), want)], nowMS, pop, gone, &out, &dlqs)
		if len(dlqs) > 0 && len(out) > 0 {
			// Order: nothing after a message still being dead-lettered.
			first := dlqs[0].offset
			keep := 0
			for i := range out {
				if out[i].QueueOffset < first {
					keep++
				}
			}
			// The entries dropped were never applied.
			out, pop.Entries = out[:keep], pop.Entries[:keep]
		}
	} else {
		p.readNewLocked(q, qs, want, bytes, pop, &out, nowMS)
	}
	return p.finishLocked(qs, pop, gone, out), recsOf(pop, gone), dlqs, wake
}

func (p *popper) newPopRecord(q int32, qs *queueState, nowMS int64) *Record {
	r := &Record{Kind: KindPop, TimeMS: nowMS, Group: p.req.Group, Topic: p.req.Topic, QueueID: q,
		Next: qs.next, AttemptID: p.req.AttemptID, InvisibleMS: p.req.Invisible.Milliseconds()}
	if p.req.AutoRenew {
		r.ClientID = p.req.ClientID
	}
	return r
}

// finishLocked applies the records and completes the messages handed out.
func (p *popper) finishLocked(qs *queueState, pop, gone *Record, out []Message) []Message {
	s, gt := p.s, p.gt
	if len(gone.Entries) > 0 {
		s.applyLocked(gt, gone)
	}
	if len(pop.Entries) == 0 {
		return out
	}
	pop.Next = max(pop.Next, qs.next)
	s.applyLocked(gt, pop)
	for i := range out {
		e := pop.Entries[i]
		out[i].Attempt = e.Attempt
		out[i].VisibleAt = time.UnixMilli(e.VisibleAtMS)
		out[i].Handle = EncodeHandle(p.req.Group, Handle{Broker: s.opts.BrokerName, Topic: p.req.Topic, QueueID: pop.QueueID,
			Offset: e.Offset, Seq: e.Seq, VisibleAtMS: e.VisibleAtMS})
		if e.Attempt > 1 {
			gt.redeliveries.Add(1)
		}
	}
	return out
}

func (p *popper) handle(q int32, off int64, e *entry) string {
	return EncodeHandle(p.req.Group, Handle{Broker: p.s.opts.BrokerName, Topic: p.req.Topic, QueueID: q,
		Offset: off, Seq: e.seq, VisibleAtMS: e.visibleAt})
}

func recsOf(rs ...*Record) []*Record {
	var out []*Record
	for _, r := range rs {
		if len(r.Entries) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// Ack acknowledges a message by its receipt handle.
func (s *Service) Ack(ctx context.Context, group, topic, token string) error {
	return s.AckBatch(ctx, group, topic, []string{token})[0]
}

// AckBatch acknowledges messages of a group on a topic by their receipt
// handles, with one POP log append, and returns one error per handle.
func (s *Service) AckBatch(ctx context.Context, group, topic string, tokens []string) []error {
	errs := make([]error, len(tokens))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := s.checkNames(group, topic); err != nil {
		return fail(err)
	}
	// Serving first: the state is loaded then (a handle of a message in
	// flight before a restart is found).
	if err := s.serving(ctx); err != nil {
		return fail(err)
	}
	type acked struct {
		h Handle
		e *entry
	}
	var gt *groupTopic
	var hs []Handle
	var idx []int
	for i, tok := range tokens {
		h, g, err := s.resolve(group, topic, tok)
		if err != nil {
			errs[i] = err
			continue
		}
		gt = g
		hs = append(hs, h)
		idx = append(idx, i)
	}
	if len(hs) == 0 {
		return errs
	}
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	nowMS := time.Now().UnixMilli()
	var done []acked
	var doneIdx []int
	byQueue := map[int32]*Record{}
	var recs []*Record
	gt.mu.Lock()
	for j, h := range hs {
		_, e, err := validLocked(gt, h, nowMS)
		if err != nil {
			errs[idx[j]] = err
			continue
		}
		rec := &Record{Kind: KindAck, TimeMS: nowMS, Group: group, Topic: topic, QueueID: h.QueueID, Entries: []Entry{{Offset: h.Offset, Seq: h.Seq}}}
		s.applyLocked(gt, rec) // one handle twice in the batch: the second is refused
		if r := byQueue[h.QueueID]; r != nil {
			r.Entries = append(r.Entries, rec.Entries[0])
		} else {
			byQueue[h.QueueID] = rec
			recs = append(recs, rec)
		}
		done = append(done, acked{h, e})
		doneIdx = append(doneIdx, idx[j])
	}
	gt.mu.Unlock()
	if len(recs) == 0 {
		return errs
	}
	if err := s.append(ctx, recs); err != nil {
		gt.mu.Lock()
		for _, a := range done {
			if q := gt.qs[a.h.QueueID]; q != nil && q.inflight[a.h.Offset] == nil {
				q.inflight[a.h.Offset] = a.e
				q.visibleFrom = min(q.visibleFrom, a.e.visibleAt)
			}
		}
		gt.mu.Unlock()
		for _, i := range doneIdx {
			errs[i] = err
		}
		return errs
	}
	gt.acks.Add(int64(len(done)))
	s.Notify(topic) // a FIFO queue may be free now
	return errs
}

// ChangeInvisible makes a message visible again d from now, under a new
// handle (the old one is invalid from now on). The Message returned has no
// Record.
func (s *Service) ChangeInvisible(ctx context.Context, group, topic, token string, d time.Duration) (Message, error) {
	if d < 0 || d > MaxInvisible {
		return Message{}, errcode.Errorf(errcode.IllegalInvisibleTime, "invisible duration %v is outside [0, %v]", d, MaxInvisible)
	}
	return s.change(ctx, group, topic, token, func(GroupConfig, int32) time.Duration { return d })
}

// Nack makes a message visible again after the group's backoff for its
// delivery attempt and returns that backoff.
func (s *Service) Nack(ctx context.Context, group, topic, token string) (time.Duration, error) {
	var d time.Duration
	_, err := s.change(ctx, group, topic, token, func(cfg GroupConfig, attempt int32) time.Duration {
		d = cfg.Backoff(attempt)
		return d
	})
	return d, err
}

func (s *Service) change(ctx context.Context, group, topic, token string, dur func(GroupConfig, int32) time.Duration) (Message, error) {
	if err := s.checkNames(group, topic); err != nil {
		return Message{}, err
	}
	if err := s.serving(ctx); err != nil {
		return Message{}, err
	}
	h, gt, err := s.resolve(group, topic, token)
	if err != nil {
		return Message{}, err
	}
	cfg := s.h.Group(group)
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	nowMS := time.Now().UnixMilli()
	gt.mu.Lock()
	_, e, err := validLocked(gt, h, nowMS)
	if err != nil {
		gt.mu.Unlock()
		return Message{}, err
	}
	old := *e
	d := dur(cfg, e.attempt)
	ne := Entry{Offset: h.Offset, OldSeq: e.seq, Seq: s.nextSeq(), VisibleAtMS: nowMS + d.Milliseconds()}
	rec := &Record{Kind: KindChange, TimeMS: nowMS, Group: group, Topic: topic, QueueID: h.QueueID, Entries: []Entry{ne}}
	s.applyLocked(gt, rec)
	attempt := e.attempt
	gt.mu.Unlock()
	if err := s.append(ctx, []*Record{rec}); err != nil {
		gt.mu.Lock()
		if q := gt.qs[h.QueueID]; q.inflight[h.Offset] != nil && q.inflight[h.Offset].seq == ne.Seq {
			*q.inflight[h.Offset] = old
			q.visibleFrom = min(q.visibleFrom, old.visibleAt)
		}
		gt.mu.Unlock()
		return Message{}, err
	}
	// Wake the receives parked on the topic: visible now, it is theirs;
	// visible later, they set their timers by its new time (a nack's 1 s
	// backoff must not wait for the end of a 20 s poll).
	s.Notify(topic)
	hd := Handle{Broker: s.opts.BrokerName, Topic: topic, QueueID: h.QueueID, Offset: h.Offset, Seq: ne.Seq, VisibleAtMS: ne.VisibleAtMS}
	return Message{QueueID: h.QueueID, QueueOffset: h.Offset, Attempt: attempt, Handle: EncodeHandle(group, hd),
		VisibleAt: time.UnixMilli(ne.VisibleAtMS)}, nil
}

// ToDLQ moves a message to the group's dead-letter queue and acknowledges
// it.
func (s *Service) ToDLQ(ctx context.Context, group, topic, token string) error {
	if err := s.checkNames(group, topic); err != nil {
		return err
	}
	if err := s.serving(ctx); err != nil {
		return err
	}
	h, gt, err := s.resolve(group, topic, token)
	if err != nil {
		return err
	}
	cfg := s.h.Group(group)
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	nowMS := time.Now().UnixMilli()
	gt.mu.Lock()
	q, e, err := validLocked(gt, h, nowMS)
	if err != nil {
		gt.mu.Unlock()
		return err
	}
	// Held (not logged) while the dead letter is written: no receive hands
	// it out meanwhile, and the handle is used up.
	old := *e
	hold := s.nextSeq()
	e.seq, e.visibleAt, e.client = hold, nowMS+dlqHold.Milliseconds(), ""
	gt.mu.Unlock()
	restore := func() {
		gt.mu.Lock()
		if cur := q.inflight[h.Offset]; cur != nil && cur.seq == hold {
			*cur = old
			q.visibleFrom = min(q.visibleFrom, old.visibleAt)
		}
		gt.mu.Unlock()
	}
	p := &popper{s: s, gt: gt, req: Request{Group: group, Topic: topic}}
	rec, err := p.read(h.QueueID, h.Offset)
	if err != nil {
		restore()
		return errcode.Errorf(errcode.SystemError, "read %s/%d@%d: %v", topic, h.QueueID, h.Offset, err)
	}
	if rec != nil {
		if err := s.h.DeadLetter(ctx, group, rec, old.attempt, cfg.MaxAttempts, "POP: forwarded to the dead-letter queue by the consumer"); err != nil {
			restore()
			return err
		}
	}
	r := &Record{Kind: KindDLQ, TimeMS: nowMS, Group: group, Topic: topic, QueueID: h.QueueID, Entries: []Entry{{Offset: h.Offset, Seq: h.Seq}}}
	if err := s.append(ctx, []*Record{r}); err != nil {
		return err // the copy is in the DLQ: the hold ends, the message comes again
	}
	gt.mu.Lock()
	s.applyLocked(gt, r)
	gt.mu.Unlock()
	gt.dlq.Add(1)
	s.Notify(topic)
	return nil
}

// Release makes the auto-renewed messages of a client that is gone visible
// again after a second.
func (s *Service) Release(clientID string) {
	if clientID == "" {
		return
	}
	s.clientsMu.Lock()
	s.released[clientID] = time.Now()
	delete(s.lastSeen, clientID)
	s.clientsMu.Unlock()
	if !s.isMaster() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	nowMS := time.Now().UnixMilli()
	var recs []*Record
	for _, gt := range s.groupTopics() {
		gt.mu.Lock()
		for qid, q := range gt.qs {
			var r *Record
			for off, e := range q.inflight {
				if e.client != clientID {
					continue
				}
				if r == nil {
					r = &Record{Kind: KindChange, TimeMS: nowMS, Group: gt.key.group, Topic: gt.key.topic, QueueID: qid}
				}
				r.Entries = append(r.Entries, Entry{Offset: off, OldSeq: e.seq, Seq: e.seq,
					VisibleAtMS: min(e.visibleAt, nowMS+releaseDelay.Milliseconds())})
			}
			if r != nil {
				s.applyLocked(gt, r)
				recs = append(recs, r)
			}
		}
		gt.mu.Unlock()
	}
	if err := s.append(ctx, recs); err != nil {
		s.log.Warn("record the release of a client's messages", zap.String("client", clientID), zap.Error(err))
	}
}

// renew extends the invisibility of auto-renewed messages of live clients
// that would run out before the next pass.
func (s *Service) renew(now time.Time) {
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	nowMS := now.UnixMilli()
	ahead := (2 * s.opts.RenewInterval).Milliseconds()
	var connected map[string]bool // read once, when needed
	alive := func(client string) bool {
		if connected == nil {
			connected = s.h.ConnectedClients()
		}
		return s.alive(client, connected, now)
	}
	var recs []*Record
	for _, gt := range s.groupTopics() {
		gt.mu.Lock()
		for qid, q := range gt.qs {
			var r *Record
			for off, e := range q.inflight {
				if e.client == "" || e.visibleAt <= nowMS || e.visibleAt-nowMS > max(ahead, min(e.invisibleMS/3, 10_000)) ||
					nowMS-e.popMS >= s.opts.RenewMax.Milliseconds() || !alive(e.client) {
					continue
				}
				if r == nil {
					r = &Record{Kind: KindRenew, TimeMS: nowMS, Group: gt.key.group, Topic: gt.key.topic, QueueID: qid}
				}
				r.Entries = append(r.Entries, Entry{Offset: off, Seq: e.seq, VisibleAtMS: nowMS + max(e.invisibleMS, 2*ahead)})
			}
			if r != nil {
				s.applyLocked(gt, r)
				recs = append(recs, r)
			}
		}
		gt.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if err := s.append(ctx, recs); err != nil {
		s.log.Warn("record renewals", zap.Error(err))
	}
}

// commitWatermarks commits each queue's acknowledged low watermark to the
// consumer offset table.
func (s *Service) commitWatermarks() {
	for _, gt := range s.groupTopics() {
		gt.mu.Lock()
		for qid, q := range gt.qs {
			if w := q.watermark(); w != q.committed {
				s.h.CommitOffset(gt.key.group, gt.key.topic, qid, w)
				q.committed = w
			}
		}
		gt.mu.Unlock()
	}
}

// Reset moves a group's POP consumption of a queue to offset (an offset
// reset): nothing is in flight any more and the next message handed out is
// the one at offset.
func (s *Service) Reset(ctx context.Context, group, topic string, queueID int32, offset int64) error {
	if err := s.checkNames(group, topic); err != nil {
		return err
	}
	if err := s.serving(ctx); err != nil {
		return err
	}
	gt := s.lookupGroupTopic(group, topic)
	if gt == nil {
		return nil // never consumed by POP here: the offset table says where it starts
	}
	s.snapMu.RLock()
	defer s.snapMu.RUnlock()
	r := &Record{Kind: KindReset, TimeMS: time.Now().UnixMilli(), Group: group, Topic: topic, QueueID: queueID, Next: max(offset, 0)}
	gt.mu.Lock()
	s.applyLocked(gt, r)
	gt.mu.Unlock()
	if err := s.append(ctx, []*Record{r}); err != nil {
		return err
	}
	s.Notify(topic)
	return nil
}

// Stats returns the POP state of a group's queues of a topic, by queue id.
func (s *Service) Stats(group, topic string) []QueueStats {
	select {
	case <-s.loaded:
	case <-s.ctx.Done():
	}
	gt := s.lookupGroupTopic(group, topic)
	if gt == nil {
		return nil
	}
	gt.mu.Lock()
	defer gt.mu.Unlock()
	out := make([]QueueStats, 0, len(gt.qs))
	for qid, q := range gt.qs {
		out = append(out, QueueStats{QueueID: qid, AckedOffset: q.watermark(), NextOffset: q.next, InFlight: len(q.inflight), Redelivered: q.redelivered})
	}
	sortStats(out)
	return out
}

// Totals are a group's POP figures on a topic since the broker started.
type Totals struct {
	Group, Topic                    string
	InFlight                        int
	Popped, Acks, Redeliveries, DLQ int64
}

// Totals returns every group's figures.
func (s *Service) Totals() []Totals {
	var out []Totals
	for _, gt := range s.groupTopics() {
		t := Totals{Group: gt.key.group, Topic: gt.key.topic, Popped: gt.popped.Load(), Acks: gt.acks.Load(),
			Redeliveries: gt.redeliveries.Load(), DLQ: gt.dlq.Load()}
		gt.mu.Lock()
		for _, q := range gt.qs {
			t.InFlight += len(q.inflight)
		}
		gt.mu.Unlock()
		out = append(out, t)
	}
	return out
}

func sortStats(st []QueueStats) {
	sort.Slice(st, func(i, j int) bool { return st[i].QueueID < st[j].QueueID })
}
