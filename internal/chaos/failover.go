package chaos

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// Failover is the outcome of one fault that took a master away.
type Failover struct {
	Cycle  int
	Kind   string
	Target string // the master the fault hit
	At     time.Duration
	// FirstAck is the time from the fault to the end of the first send
	// acknowledged by a new master (-1: none before the next fault or
	// the end of the history); By that broker. A new master is another
	// broker, or the target itself for a send it started after it was
	// restarted (a restarted broker never resumes its old epoch).
	FirstAck time.Duration
	By       string
	// RateBefore is the acks per second over the RateWindow before the
	// fault (from the previous fault at most); After the acks in each
	// whole second after it, up to RateWindow seconds and not past the
	// next fault or the last attempt.
	RateBefore float64
	After      []int
	// Codes counts the failed attempts' codes between the fault and the
	// first ack by a new master.
	Codes map[string]int
}

// RateWindow is how many seconds around a fault the throughput covers.
const RateWindow = 10

// Restart is the event kind of a broker started again after a fault.
const Restart = "restart"

// Failovers measures every event of the given kinds whose target is a
// broker.
func Failovers(atts []Attempt, events []Event, kinds ...string) []Failover {
	var faults, restarts []Event
	for _, e := range events {
		if slices.Contains(kinds, e.Kind) {
			faults = append(faults, e)
		}
		if e.Kind == Restart {
			restarts = append(restarts, e)
		}
	}
	sort.Slice(faults, func(i, j int) bool { return faults[i].At < faults[j].At })
	acks := make([]*Attempt, 0, len(atts))
	for i := range atts {
		if atts[i].Outcome == Acked {
			acks = append(acks, &atts[i])
		}
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i].End < acks[j].End })
	var lastEnd time.Duration
	for i := range atts {
		lastEnd = max(lastEnd, atts[i].End)
	}
	var out []Failover
	for k, e := range faults {
		limit := time.Duration(1<<63 - 1)
		if k+1 < len(faults) {
			limit = faults[k+1].At
		}
		secs := min(RateWindow, int((min(limit, lastEnd)-e.At)/time.Second))
		f := Failover{Cycle: e.Cycle, Kind: e.Kind, Target: e.Target, At: e.At, FirstAck: -1, After: make([]int, max(secs, 0))}
		restarted := time.Duration(-1)
		for _, r := range restarts {
			if r.Target == e.Target && r.At > e.At && r.At < limit {
				restarted = r.At
				break
			}
		}
		i := sort.Search(len(acks), func(i int) bool { return acks[i].End > e.At })
		for j := i; j < len(acks) && acks[j].End < limit; j++ {
			if acks[j].Broker != e.Target || (restarted >= 0 && acks[j].Start > restarted) {
				f.FirstAck, f.By = acks[j].End-e.At, acks[j].Broker
				break
			}
		}
		until := limit
		if f.FirstAck >= 0 {
			until = e.At + f.FirstAck
		}
		f.Codes = make(map[string]int)
		for j := range atts {
			if a := &atts[j]; a.Outcome != Acked && a.End > e.At && a.End <= until {
				f.Codes[a.Code]++
			}
		}
		for j := i; j < len(acks) && acks[j].End < e.At+time.Duration(len(f.After))*time.Second; j++ {
			f.After[(acks[j].End-e.At)/time.Second]++
		}
		before := e.At - RateWindow*time.Second
		if k > 0 {
			before = max(before, faults[k-1].At)
		}
		before = max(before, 0)
		if span := e.At - before; span > 0 {
			n := sort.Search(len(acks), func(i int) bool { return acks[i].End > before }) // first after before
			f.RateBefore = float64(i-n) / span.Seconds()
		}
		out = append(out, f)
	}
	return out
}

// LeaseReport checks that a master cut off from the controllers stops
// acknowledging once its lease runs out.
type LeaseReport struct {
	Lease  time.Duration
	Faults []LeaseFault
}

// LeaseFault is one isolation of a master.
type LeaseFault struct {
	Target   string
	At, Heal time.Duration
	// Acked: sends the cut-off master acknowledged after the fault; Last
	// the time from the fault to the end of the last of them.
	Acked int
	Last  time.Duration
	// Late: acknowledged sends it had received only after its lease had
	// run out (started after the fault + lease + slack, ended before the
	// heal): the lease did not stop it.
	Late []Attempt
}

// Errors lists acks beyond the lease.
func (r LeaseReport) Errors() []string {
	var v []string
	for _, f := range r.Faults {
		if len(f.Late) > 0 {
			a := f.Late[0]
			v = append(v, fmt.Sprintf("%s, cut off at %.3fs, acknowledged %d sends started after its lease ran out (first %v, %v–%v)",
				f.Target, f.At.Seconds(), len(f.Late), a.CopyID, a.Start, a.End))
		}
	}
	return v
}

// leaseSlack covers the time between the fault's mark and the proxies'
// blackhole.
const leaseSlack = 50 * time.Millisecond

// CheckLease applies the lease rule to every isolation (an event of one of
// kinds) with a heal event of the same target after it. A broker's lease runs from the time
// it sent the beat the leader answered; the last beat that got through was
// sent before the fault, so no ack can be decided after fault + lease. The
// decision comes after the attempt starts, and the isolated broker cannot
// be elected again before the heal (the controllers do not hear it).
func CheckLease(atts []Attempt, events []Event, lease time.Duration, kinds ...string) LeaseReport {
	r := LeaseReport{Lease: lease}
	for i, e := range events {
		if !slices.Contains(kinds, e.Kind) {
			continue
		}
		f := LeaseFault{Target: e.Target, At: e.At, Heal: -1}
		for _, h := range events[i+1:] {
			if h.Kind == "heal" && h.Target == e.Target {
				f.Heal = h.At
				break
			}
		}
		if f.Heal < 0 {
			continue
		}
		for j := range atts {
			a := &atts[j]
			if a.Outcome != Acked || a.Broker != e.Target || a.End <= e.At || a.End >= f.Heal {
				continue
			}
			f.Acked++
			f.Last = max(f.Last, a.End-e.At)
			if a.Start > e.At+lease+leaseSlack {
				f.Late = append(f.Late, *a)
			}
		}
		r.Faults = append(r.Faults, f)
	}
	return r
}

// FailoverStats summarises failover times.
type FailoverStats struct {
	N, Missing  int
	Median, Max time.Duration
	// MinRate is the lowest acks/s of any second in the window after a
	// fault, MeanRate the mean over those windows; RateBefore the mean
	// rate before the faults.
	MinRate    int
	MeanRate   float64
	RateBefore float64
}

// Stats computes the median and maximum time to the first ack.
func Stats(fs []Failover) FailoverStats {
	var s FailoverStats
	var ds []time.Duration
	s.MinRate = -1
	var sum, n, before float64
	for _, f := range fs {
		if f.FirstAck < 0 {
			s.Missing++
		} else {
			ds = append(ds, f.FirstAck)
		}
		for _, c := range f.After {
			if s.MinRate < 0 || c < s.MinRate {
				s.MinRate = c
			}
			sum += float64(c)
			n++
		}
		before += f.RateBefore
	}
	s.N = len(ds)
	if len(ds) > 0 {
		slices.Sort(ds)
		s.Median = ds[len(ds)/2]
		if len(ds)%2 == 0 {
			s.Median = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
		}
		s.Max = ds[len(ds)-1]
	}
	if n > 0 {
		s.MeanRate = sum / n
	}
	if len(fs) > 0 {
		s.RateBefore = before / float64(len(fs))
	}
	s.MinRate = max(s.MinRate, 0)
	return s
}

// ReplicaLog is one replica's CommitLog at the end of a run.
type ReplicaLog struct {
	Name string
	// StoreDir is the broker's --store-dir; End its CommitLog end.
	StoreDir string
	End      int64
}

// DivergenceReport compares the replicas with the first one (the final
// master).
type DivergenceReport struct {
	// Compared: bytes found identical per replica.
	Compared map[string]int64
	Errors   []string
}

// CheckDivergence checks that every replica holds the same CommitLog end
// as the first one and the same bytes (SHA-256 per segment prefix) up to
// the shorter end.
func CheckDivergence(reps []ReplicaLog, segSize int64) DivergenceReport {
	r := DivergenceReport{Compared: make(map[string]int64)}
	if len(reps) < 2 {
		return r
	}
	ref := reps[0]
	for _, o := range reps[1:] {
		if o.End != ref.End {
			r.Errors = append(r.Errors, fmt.Sprintf("%s ends at %d, %s at %d", o.Name, o.End, ref.Name, ref.End))
		}
		end := min(o.End, ref.End)
		if end <= 0 {
			continue
		}
		n, err := cluster.CompareCommitLogs(commitLogDir(ref.StoreDir), commitLogDir(o.StoreDir), segSize, end)
		r.Compared[o.Name] = n
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s vs %s: %v", o.Name, ref.Name, err))
		}
	}
	return r
}

func commitLogDir(storeDir string) string { return filepath.Clean(cluster.CommitLogDir(storeDir)) }
