package delay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// batch is one delivery: due entries and their real messages, as records
// ready to store.
type batch struct {
	refs []fireRef
	recs []store.Prepared
	fl   *flight
	buf  *[]byte // the records' bytes (recordBufs), given back once stored
}

// recordBufs holds the buffers that batches' records are restored into,
// given back after the delivery (PutPrepared does not keep a record); a
// buffer grown past maxPooledRecordBuf is left to the collector.
var recordBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledRecordBuf = 8 << 20

// release gives the batch's buffer back; its records are gone with it.
func (b *batch) release() {
	if b.buf == nil {
		return
	}
	if cap(*b.buf) <= maxPooledRecordBuf {
		*b.buf = (*b.buf)[:0]
		recordBufs.Put(b.buf)
	}
	b.buf, b.recs = nil, nil
}

type fireRef struct {
	lb        *lbucket
	i         int32
	loc       int64 // copied when taken (a taken entry does not change)
	deliverMS int64
}

// fireLoop takes due entries from the wheel in (due time, offset) order,
// reads their messages and hands them to the deliverer in batches. While
// the engine stands by (or, just activated, its index has not caught up)
// it only skips what an inherited Progress covers.
func (e *Engine) fireLoop() {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		if !e.active || e.holdUntil > 0 {
			e.skipCoveredLocked()
			e.sleepUntil = 0 // any new entry wakes it
			e.mu.Unlock()
			select {
			case <-e.ctx.Done():
				return
			case <-e.wake:
			}
			continue
		}
		now := e.clock.Now()
		refs, next := e.takeDueLocked(now.UnixMilli(), e.opts.BatchSize)
		// What the firer sleeps until: entries due later need not wake it.
		e.sleepUntil = next
		var fl *flight
		if len(refs) > 0 {
			e.sleepUntil = -1
			fl = &flight{minDue: refs[0].deliverMS} // taken in due-time order
			e.flights = append(e.flights, fl)
		}
		e.mu.Unlock()
		if len(refs) > 0 {
			b := e.prepare(refs)
			b.fl = fl
			if len(b.refs) == 0 {
				b.release()
				e.mu.Lock()
				e.landLocked(fl)
				e.mu.Unlock()
				continue
			}
			select {
			case e.batches <- b:
			case <-e.ctx.Done():
				return
			}
			continue
		}
		var tc <-chan time.Time
		var t Timer
		if next != 0 {
			t = TimerAt(e.clock, time.UnixMilli(next))
			tc = t.C()
		}
		select {
		case <-e.ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-e.wake:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// takeDueLocked marks up to max due entries in flight and returns them in
// (due time, CommitLog offset) order (the loaded buckets are sorted); if
// none is due it returns the due time of the next one (0: none loaded).
func (e *Engine) takeDueLocked(now int64, max int) ([]fireRef, int64) {
	var refs []fireRef
	for _, lb := range e.loaded {
		for len(refs) < max {
			i, fromLate, ok := lb.peek()
			if !ok {
				break
			}
			w := lb.ents.at(i)
			if w.deliverMS > now {
				if len(refs) > 0 {
					return refs, 0
				}
				return nil, w.deliverMS
			}
			lb.pop(fromLate)
			if e.coveredLocked(w) {
				// Delivered (or cancelled) by the master this engine
				// took over from.
				e.skipLocked(lb, w)
				continue
			}
			if _, c := e.cancels[w.origin]; c {
				w.state = stCancelled
				lb.open--
				continue
			}
			w.state = stInflight
			lb.inflight++
			e.inflight++
			refs = append(refs, fireRef{lb: lb, i: i, loc: w.loc, deliverMS: w.deliverMS})
		}
		if len(refs) >= max {
			break
		}
	}
	return refs, 0
}

// prepare reads the records of a batch and restores them into records of
// their real topics (restoreRecord), copied into one buffer. A message that
// cannot be read (its CommitLog segment is gone) is counted lost and marked
// done.
func (e *Engine) prepare(refs []fireRef) *batch {
	b := &batch{refs: make([]fireRef, 0, len(refs))}
	locs := make([]int64, len(refs))
	for i, r := range refs {
		locs[i] = r.loc
	}
	recs := make([]store.Prepared, len(refs))
	errs := make([]error, len(refs))
	host := e.host.StoreHost()
	b.buf = recordBufs.Get().(*[]byte)
	buf := *b.buf
	e.host.ReadRecords(locs, func(i int, rec []byte, err error) {
		if err == nil {
			if cap(buf) == 0 {
				buf = make([]byte, 0, len(refs)*(len(rec)+64))
			}
			buf, recs[i], err = restoreRecord(buf, rec, host, refs[i].deliverMS)
		}
		errs[i] = err
	})
	*b.buf = buf
	var lost []fireRef
	for i, r := range refs {
		if err := errs[i]; err != nil || recs[i].Record == nil {
			if err == nil {
				err = errors.New("not read")
			}
			e.log.Error("timer message lost: cannot read it back", zap.Int64("location", r.loc),
				zap.Int64("deliverMs", r.deliverMS), zap.Error(err))
			lost = append(lost, r)
			continue
		}
		b.refs = append(b.refs, r)
		b.recs = append(b.recs, recs[i])
	}
	if len(lost) > 0 {
		e.lost.Add(int64(len(lost)))
		e.finish(lost)
	}
	return b
}

// deliverLoop stores batches in order. A batch is retried until it is
// stored, or given back to the wheel if the engine stood down; its entries
// are then recorded in the fired logs.
func (e *Engine) deliverLoop() {
	defer e.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		var b *batch
		select {
		case <-e.ctx.Done():
			return
		case b = <-e.batches:
		}
		stored := false
		for {
			if !e.Active() {
				break
			}
			// Not the engine's context: a batch begun is finished, so a
			// clean stop repeats nothing.
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.DeliverTimeout)
			err := e.host.Deliver(ctx, b.recs)
			cancel()
			if err == nil {
				backoff = 50 * time.Millisecond
				stored = true
				break
			}
			if !e.Active() {
				break
			}
			e.log.Error("timer delivery failed; retrying", zap.Int("messages", len(b.recs)), zap.Error(err))
			if !e.sleep(backoff) {
				return // stays in flight: not in the fired log, so delivered after a restart
			}
			backoff = min(2*backoff, 2*time.Second)
		}
		b.release()
		if !stored {
			e.unfire(b)
			continue
		}
		e.openFiredLogs(b.refs)
		e.delivered.Add(int64(len(b.refs)))
		e.finish(b.refs)
		e.mu.Lock()
		e.landLocked(b.fl)
		e.mu.Unlock()
	}
}

// openFiredLogs creates the fired logs a batch needs, without the lock.
func (e *Engine) openFiredLogs(refs []fireRef) {
	var need []*lbucket
	e.mu.Lock()
	for _, r := range refs {
		if r.lb.fired == nil && !slices.Contains(need, r.lb) {
			need = append(need, r.lb)
		}
	}
	e.mu.Unlock()
	for _, lb := range need {
		f, err := os.OpenFile(lb.firedPath, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			continue // finish retries under the lock and logs
		}
		e.mu.Lock()
		if lb.fired == nil {
			lb.fired = f
			e.files.created = true
			f = nil
		}
		e.mu.Unlock()
		if f != nil {
			_ = f.Close()
		}
	}
}

// finish marks entries done and appends them to their fired logs.
func (e *Engine) finish(refs []fireRef) {
	e.mu.Lock()
	defer e.mu.Unlock()
	byBucket := make(map[*lbucket][]uint32, 2)
	var order []*lbucket
	for _, r := range refs {
		w := r.lb.ents.at(r.i)
		w.state = stDone
		r.lb.inflight--
		r.lb.open--
		e.inflight--
		if _, ok := byBucket[r.lb]; !ok {
			order = append(order, r.lb)
		}
		byBucket[r.lb] = append(byBucket[r.lb], w.idx)
	}
	for _, lb := range order {
		if lb.fired == nil {
			e.files.created = true // the directory gains a file
		}
		if err := lb.appendFired(byBucket[lb]); err != nil {
			e.log.Error("fired log write failed", zap.Error(err))
		}
	}
}

// dropOnDelivery are the properties a delivered message loses besides
// REAL_TOPIC and REAL_QID.
var dropOnDelivery = []string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS,
	message.PropertyTimerDelayMS, message.PropertyTimerDelaySec, message.PropertyTimerOrigin}

// restoreRecord appends to buf the record of RealMessage's message for a
// stored timer or delay-level record (deliverMS 0: no TIMER_OUT_MS set),
// unsealed, with the store's host (message.RestoreRecord: copied and
// patched, not decoded and encoded again), and returns it ready to store.
func restoreRecord(buf, rec []byte, storeHost netip.AddrPort, deliverMS int64) ([]byte, store.Prepared, error) {
	var set, val string
	if deliverMS > 0 {
		set, val = message.PropertyTimerOutMS, strconv.FormatInt(deliverMS, 10)
	}
	start := len(buf)
	buf, r, err := message.RestoreRecord(buf, rec, storeHost, dropOnDelivery, set, val)
	if err != nil {
		return buf, store.Prepared{}, fmt.Errorf("delay: %w", err)
	}
	return buf, store.Prepared{Record: buf[start:len(buf):len(buf)], Topic: r.Topic, QueueID: r.QueueID,
		SysFlag: r.SysFlag, Keys: r.Keys, UniqueKey: r.UniqueKey}, nil
}

// RealMessage turns a stored timer or delay-level message back into the
// message its producer sent: its real topic and queue, without the
// properties that asked for the delay or that the broker added, except
// TIMER_OUT_MS (for timer messages, set to deliverMS), which tells the
// consumer when it was due.
func RealMessage(m *message.Ext, deliverMS int64) (*message.Ext, error) {
	r, err := message.Restore(m, dropOnDelivery...)
	if err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	if deliverMS > 0 {
		r.Properties[message.PropertyTimerOutMS] = strconv.FormatInt(deliverMS, 10)
	}
	return r, nil
}
