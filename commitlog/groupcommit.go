package commitlog

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// How the sync-mode flusher gathers appends before a flush.
//
// Right after a flush wakes its waiters, each of them appends again, and
// how soon decides which way of gathering pays:
//
//   - Appenders in this process (goroutines) are back within
//     microseconds, and appends that arrive during a flush are carried by
//     the next one, so the disk is best kept busy: flush as soon as the
//     log stops growing (gatherEager, the gather of flush.go).
//   - Appenders behind a network (a broker's producers) are back only
//     after a round trip through their clients, longer than a flush. A
//     flush that starts at once carries the few that arrived during the
//     last one; the producers split into cohorts that take turns, each
//     waiting for the other's flush. Waiting until as many appends have
//     come back as the last flush woke (gatherRegroup), for at most
//     regroupWait, merges the cohorts into one flush per round trip.
//
// Which one a workload needs is not known in advance, so the flusher
// measures: it runs one policy for an epoch (epochFlushes flushes and at
// least epochMin), counts the appends made durable per second, and now
// and then tries the other policy for one epoch, adopting it when it
// carried at least probeGain times the appends per second of the policy
// in use. A probe that loses doubles the wait before the next (from
// probeFirst to probeMost epochs), so a workload that one policy suits
// spends few epochs on the other (chooser, a pure state machine).

// gatherPolicy is one way of gathering appends before a flush.
type gatherPolicy uint8

const (
	gatherEager gatherPolicy = iota
	gatherRegroup
)

func (p gatherPolicy) String() string {
	if p == gatherRegroup {
		return "regroup"
	}
	return "eager"
}

func (p gatherPolicy) other() gatherPolicy { return 1 - p }

const (
	// regroupWait bounds how long a regrouping flusher waits for the
	// appenders of the last flush to come back.
	regroupWait = 2 * time.Millisecond
	// epochFlushes and epochMin make one epoch of measurement.
	epochFlushes = 48
	epochMin     = 20 * time.Millisecond
	// probeFirst and probeMost bound the epochs between two probes.
	probeFirst = 3
	probeMost  = 48
	// probeGain is how much better the other policy must do to be adopted.
	probeGain = 1.10
)

// chooser picks the gather policy from the rates (durable appends per
// second) of whole epochs. It is a pure state machine: the flusher feeds
// it one rate per epoch and reads the policy of the next.
type chooser struct {
	current  gatherPolicy // the policy in use
	probing  bool         // the epoch under way tries the other policy
	epochs   int          // the current policy's epochs since the last probe
	gap      int          // epochs between probes now (probeFirst when 0)
	baseline float64      // the current policy's rate: the mean of its last two epochs
	last     float64      // the current policy's last epoch rate
}

// next returns the policy for the coming epoch.
func (c *chooser) next() gatherPolicy {
	if c.probing {
		return c.current.other()
	}
	return c.current
}

// epoch records the rate of the epoch that just ended (run with next()'s
// policy) and reports whether the policy in use changed.
func (c *chooser) epoch(rate float64) (switched bool) {
	if c.gap == 0 {
		c.gap = probeFirst
	}
	if c.probing {
		c.probing = false
		c.epochs = 0
		if c.baseline > 0 && rate >= c.baseline*probeGain {
			c.current = c.current.other()
			c.baseline, c.last = rate, rate
			c.gap = probeFirst
			return true
		}
		c.gap = min(2*c.gap, probeMost)
		return false
	}
	if c.last > 0 {
		c.baseline = (c.last + rate) / 2
	} else {
		c.baseline = rate
	}
	c.last = rate
	c.epochs++
	if c.epochs >= c.gap {
		c.probing = true
	}
	return false
}

// gatherState is the sync flusher's own record of its flushes (only its
// goroutine touches it).
type gatherState struct {
	choose chooser
	policy gatherPolicy

	// The last flush: the count of sync appends when it began
	// (startMark) and ended (endMark), and how many it carried (those
	// counted since the flush before it began).
	startMark int64
	endMark   int64
	carried   int64

	// The epoch under way.
	epochStart   time.Time
	epochMark    int64
	epochFlushes int

	wait  time.Duration // regroupWait; tests set more
	timer *time.Timer
}

// testGatherPolicy, when set by a test, is the policy of every epoch.
var testGatherPolicy atomic.Pointer[gatherPolicy]

// gatherFor waits, before a flush, as the policy in use says.
func (l *Log) gatherFor(g *gatherState) {
	if l.opts.GroupCommitWait <= 0 {
		return
	}
	if p := testGatherPolicy.Load(); p != nil {
		g.policy = *p
	}
	if g.policy == gatherRegroup && g.carried > 1 {
		l.regroup(g, g.endMark, g.carried)
		return
	}
	l.gather()
}

// regroup waits until want sync appends have arrived since the count was
// since, for at most regroupWait. An appender signals arrived while the
// flusher waits (gathering), so the wait costs no polling.
func (l *Log) regroup(g *gatherState, since, want int64) {
	if l.syncAppends.Load()-since >= want {
		return
	}
	wait := g.wait
	if wait <= 0 {
		wait = regroupWait
	}
	if g.timer == nil {
		g.timer = time.NewTimer(wait)
	} else {
		g.timer.Reset(wait)
	}
	defer g.timer.Stop()
	l.gathering.Store(true)
	defer l.gathering.Store(false)
	for l.syncAppends.Load()-since < want {
		select {
		case <-l.arrived:
		case <-g.timer.C:
			return
		case <-l.ctx.Done():
			return
		}
	}
}

// noteArrival counts a sync append and wakes a regrouping flusher. The
// count is raised before the flag is read, and the flusher sets the flag
// before it reads the count, so one of them sees the other.
func (l *Log) noteArrival() {
	l.syncAppends.Add(1)
	if l.gathering.Load() {
		signal(l.arrived)
	}
}

// noteFlush records a flush that began when the count was startMark, and
// closes the epoch when it is long enough.
func (l *Log) noteFlush(g *gatherState, startMark int64) {
	now := time.Now()
	g.carried = startMark - g.startMark
	g.startMark, g.endMark = startMark, l.syncAppends.Load()
	if g.epochStart.IsZero() {
		g.epochStart, g.epochMark = now, startMark
		return
	}
	g.epochFlushes++
	took := now.Sub(g.epochStart)
	if g.epochFlushes < epochFlushes || took < epochMin {
		return
	}
	rate := float64(startMark-g.epochMark) / took.Seconds()
	if g.choose.epoch(rate) {
		l.log.Debug("group commit policy changed", zap.Stringer("to", g.choose.current),
			zap.Float64("appends_per_sec", rate))
	}
	g.policy = g.choose.next()
	g.epochStart, g.epochMark, g.epochFlushes = now, startMark, 0
}
