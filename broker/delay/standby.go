package delay

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Progress is how far an engine delivered: every timer message whose first
// copy (its origin) is at a CommitLog offset ≤ Location and that is due
// before DueBeforeMS was delivered or cancelled. A master's engine reports
// it (Engine.Progress); a slave's engine, which indexes the replicated timer
// queue without delivering, takes it (Engine.Inherit) and never delivers a
// message it covers. CommitLog offsets are the same on master and slaves, so
// the statement holds on both.
type Progress struct {
	Location    int64 `json:"location"`
	DueBeforeMS int64 `json:"dueBeforeMs"`
}

// covers reports whether p says the message (due, origin) is done.
func (p Progress) covers(due, origin int64) bool {
	return origin <= p.Location && due < p.DueBeforeMS
}

// dominates reports whether p says everything q says.
func (p Progress) dominates(q Progress) bool {
	return p.Location >= q.Location && p.DueBeforeMS >= q.DueBeforeMS
}

// maxInherited bounds the progress statements an engine keeps. They form an
// antichain (none dominates another): a later statement of a master
// usually dominates the earlier ones. Dropping one only means fewer
// messages are known as done (more may be delivered twice), never fewer
// delivered.
const maxInherited = 8

const inheritedName = "inherited.json"

type inheritedFile struct {
	Version  int        `json:"version"`
	Progress []Progress `json:"progress"`
}

// mergeProgress adds p to the antichain list; changed is false when a
// statement of list already says everything p says.
func mergeProgress(list []Progress, p Progress) (out []Progress, changed bool) {
	for _, q := range list {
		if q.dominates(p) {
			return list, false
		}
	}
	out = make([]Progress, 0, len(list)+1)
	for _, q := range list {
		if !p.dominates(q) {
			out = append(out, q)
		}
	}
	out = append(out, p)
	if len(out) > maxInherited {
		slices.SortFunc(out, func(a, b Progress) int {
			switch {
			case a.Location < b.Location:
				return -1
			case a.Location > b.Location:
				return 1
			}
			return 0
		})
		out = out[len(out)-maxInherited:]
	}
	return out, true
}

func loadInherited(dir string) ([]Progress, error) {
	b, err := os.ReadFile(filepath.Join(dir, inheritedName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delay: inherited progress: %w", err)
	}
	var f inheritedFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("delay: inherited progress: %w", err)
	}
	var list []Progress
	for _, p := range f.Progress {
		list, _ = mergeProgress(list, p)
	}
	return list, nil
}

// SetActive makes the engine deliver (true: the broker is the master) or
// stand by (false). A standby engine indexes the timer queue, loads and
// reclaims buckets as an active one does, but delivers nothing: due entries
// that an inherited Progress covers are marked done, the others wait. A
// batch being stored when the engine stands down completes; one that fails
// from then on goes back to pending. An engine is active when opened.
//
// Activated, it delivers nothing until its index reaches the end the timer
// queue had then: the cancel markers a master stored before it stopped are
// applied before anything they cancel can fire.
func (e *Engine) SetActive(active bool) {
	var end int64
	if active {
		end = e.host.TimerQueueMaxOffset()
	}
	e.mu.Lock()
	changed := e.active != active
	e.active = active
	if changed && active {
		e.holdUntil = end
		e.releaseLocked()
	}
	e.mu.Unlock()
	if changed {
		e.notify()
	}
}

// releaseLocked ends the hold of an activation once the index reached it.
func (e *Engine) releaseLocked() {
	if e.holdUntil > 0 && e.qoff >= e.holdUntil {
		e.holdUntil = 0
		e.notify()
	}
}

// Active reports whether the engine delivers.
func (e *Engine) Active() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active
}

// Inherit takes a master's Progress: from now on no message it covers is
// delivered by this engine. It is persisted (Options.Dir/inherited.json)
// before it returns, and kept (an engine that becomes active still skips
// what it covers).
func (e *Engine) Inherit(p Progress) error {
	e.imu.Lock()
	defer e.imu.Unlock()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	next, changed := mergeProgress(e.inherit, p)
	if !changed {
		e.mu.Unlock()
		return nil
	}
	e.inherit = next
	e.mu.Unlock()
	b, err := json.Marshal(inheritedFile{Version: 1, Progress: next})
	if err == nil {
		err = fsutil.WriteFileAtomic(filepath.Join(e.opts.Dir, inheritedName), b, 0o644)
	}
	e.notify()
	if err != nil {
		// Kept in memory; a restart before the next write only knows less.
		return fmt.Errorf("delay: inherited progress: %w", err)
	}
	return nil
}

// Inherited returns the progress statements the engine took.
func (e *Engine) Inherited() []Progress {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.inherit)
}

// coveredLocked reports whether an inherited Progress says w is done.
func (e *Engine) coveredLocked(w *went) bool {
	for _, p := range e.inherit {
		if p.covers(w.deliverMS, w.origin) {
			return true
		}
	}
	return false
}

// Progress reports how far this engine delivered (see Progress). ok is
// false while it cannot say: standing by, or not yet loaded after a start.
// The due time bound is the earliest of the clock, the first pending entry
// of each loaded bucket, the entries being delivered and the start of every
// bucket not loaded; the location bound is the last unit indexed.
func (e *Engine) Progress() (Progress, bool) {
	now := e.clock.Now().UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.active || e.closed || e.loadedAt == math.MinInt64 {
		return Progress{}, false
	}
	w := now
	for _, f := range e.flights {
		w = min(w, f.minDue)
	}
	for _, lb := range e.loaded {
		if i, _, ok := lb.peek(); ok {
			w = min(w, lb.ents.at(i).deliverMS)
		}
	}
	for _, bf := range e.files.m {
		if bf.lb == nil && !bf.removing {
			w = min(w, bf.key.start)
		}
	}
	return Progress{Location: e.lastLoc, DueBeforeMS: w}, true
}

// skipCoveredLocked is the standby firer: it marks done the due entries an
// inherited Progress covers, in firing order, so that a slave's wheel
// drains and its buckets are reclaimed as the master delivers. An entry it
// does not cover (indexed here before the master's statement reached it)
// holds its bucket until a later statement does.
func (e *Engine) skipCoveredLocked() {
	if len(e.inherit) == 0 {
		return
	}
	for _, lb := range e.loaded {
		for {
			i, fromLate, ok := lb.peek()
			if !ok {
				break
			}
			w := lb.ents.at(i)
			if !e.coveredLocked(w) {
				break
			}
			lb.pop(fromLate)
			e.skipLocked(lb, w)
		}
	}
}

// skipLocked marks a popped pending entry done (or cancelled) without
// delivering it.
func (e *Engine) skipLocked(lb *lbucket, w *went) {
	if _, c := e.cancels[w.origin]; c {
		w.state = stCancelled
	} else {
		w.state = stDone
		e.skipped.Add(1)
	}
	lb.open--
}

// flight is one batch taken for delivery: the earliest due time in it
// bounds Progress until it is recorded (or given back).
type flight struct{ minDue int64 }

func (e *Engine) landLocked(f *flight) {
	if i := slices.Index(e.flights, f); i >= 0 {
		e.flights = slices.Delete(e.flights, i, i+1)
	}
}

// unfire gives a batch that was not stored back to the wheel: its entries
// are pending again (the engine stood down while delivering it).
func (e *Engine) unfire(b *batch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range b.refs {
		w := r.lb.ents.at(r.i)
		if w.state != stInflight {
			continue
		}
		w.state = stPending
		r.lb.inflight--
		e.inflight--
		r.lb.late.push(r.i)
	}
	e.landLocked(b.fl)
}
