package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Stored is one record of the final log, as read back from the final
// master.
type Stored struct {
	// ID is the attempt whose body the record holds; OK false: the body is
	// not one a producer of the run sent.
	ID     CopyID
	OK     bool
	Offset int64 // CommitLog offset
	Size   int32
	Queue  int32
	// QueueOffset is the record's offset in its queue.
	QueueOffset int64
	// Writer is the broker whose store host the record carries: the
	// master that appended it (replicas copy records byte for byte).
	Writer string
}

// EpochEntry says that the final log's bytes from Start on were written
// by the master of Epoch (until the next entry's Start).
type EpochEntry struct {
	Epoch int64
	Start int64
}

// FinalLog is what the group holds at the end of a run.
type FinalLog struct {
	Records []Stored
	// Epochs are the final master's epoch entries (empty: every record is
	// of epoch 0).
	Epochs []EpochEntry
}

// index is the final log indexed by copy.
type index struct {
	byCopy map[CopyID][]Stored
	byMsg  map[MsgKey]int // stored copies per logical message
	epochs []EpochEntry   // sorted by Start
}

func newIndex(fin *FinalLog) *index {
	ix := &index{byCopy: make(map[CopyID][]Stored), byMsg: make(map[MsgKey]int)}
	for _, r := range fin.Records {
		if !r.OK {
			continue
		}
		ix.byCopy[r.ID] = append(ix.byCopy[r.ID], r)
		ix.byMsg[r.ID.MsgKey]++
	}
	ix.epochs = slices.Clone(fin.Epochs)
	sort.SliceStable(ix.epochs, func(i, j int) bool { return ix.epochs[i].Start < ix.epochs[j].Start })
	return ix
}

// epochOf is the epoch whose range holds off (0 before the first entry).
func (ix *index) epochOf(off int64) int64 {
	i := sort.Search(len(ix.epochs), func(i int) bool { return ix.epochs[i].Start > off })
	if i == 0 {
		return 0
	}
	return ix.epochs[i-1].Epoch
}

// survivor returns the stored copy of an acknowledged attempt at the
// offset it was acknowledged at.
func (ix *index) survivor(a *Attempt) (Stored, bool) {
	for _, r := range ix.byCopy[a.CopyID] {
		if r.Offset == a.Offset {
			return r, true
		}
	}
	return Stored{}, false
}

// LossReport compares what was acknowledged with what the group holds.
type LossReport struct {
	Attempts int // send attempts
	Acked    int // acknowledged attempts (= acknowledged messages)
	Stored   int // records in the final log
	// LostMessages: acknowledged messages of which no copy is stored.
	LostMessages []MsgKey
	// LostCopies: acknowledged attempts whose own copy is not stored (a
	// copy of another attempt of the message may be): an acknowledged
	// write was undone. LostMessages ⊆ the messages of LostCopies.
	LostCopies []Attempt
	// Moved: acknowledged copies stored, but not at the acknowledged
	// CommitLog offset (inconsistent offsets).
	Moved []Attempt
	// Unexpected: records no attempt of the run wrote.
	Unexpected []Stored
	// Recovered: stored copies of attempts that were not acknowledged.
	Recovered int
}

// Violations lists what breaks the guarantees of sync replication.
func (r LossReport) Violations() []string {
	var v []string
	if len(r.LostMessages) > 0 {
		v = append(v, fmt.Sprintf("%d acknowledged messages lost (first %v)", len(r.LostMessages), r.LostMessages[0]))
	}
	if len(r.LostCopies) > 0 {
		a := r.LostCopies[0]
		v = append(v, fmt.Sprintf("%d acknowledged copies missing (first %v acked by %s at offset %d, %v)", len(r.LostCopies), a.CopyID, a.Broker, a.Offset, a.End))
	}
	if len(r.Moved) > 0 {
		a := r.Moved[0]
		v = append(v, fmt.Sprintf("%d acknowledged copies at another offset than acknowledged (first %v, acked at %d)", len(r.Moved), a.CopyID, a.Offset))
	}
	if len(r.Unexpected) > 0 {
		v = append(v, fmt.Sprintf("%d records no producer sent (first at offset %d)", len(r.Unexpected), r.Unexpected[0].Offset))
	}
	return v
}

// CheckLoss finds the acknowledged messages and copies the final log lacks.
func CheckLoss(atts []Attempt, fin *FinalLog) LossReport {
	ix := newIndex(fin)
	r := LossReport{Attempts: len(atts), Stored: len(fin.Records)}
	attempted := make(map[CopyID]bool, len(atts))
	lostMsg := make(map[MsgKey]bool)
	for i := range atts {
		a := &atts[i]
		attempted[a.CopyID] = true
		copies := ix.byCopy[a.CopyID]
		if a.Outcome != Acked {
			if len(copies) > 0 {
				r.Recovered++
			}
			continue
		}
		r.Acked++
		if len(copies) == 0 {
			r.LostCopies = append(r.LostCopies, *a)
			if ix.byMsg[a.MsgKey] == 0 && !lostMsg[a.MsgKey] {
				lostMsg[a.MsgKey] = true
				r.LostMessages = append(r.LostMessages, a.MsgKey)
			}
			continue
		}
		if _, ok := ix.survivor(a); !ok && a.Offset >= 0 {
			r.Moved = append(r.Moved, *a)
		}
	}
	for _, s := range fin.Records {
		if !s.OK || !attempted[s.ID] {
			r.Unexpected = append(r.Unexpected, s)
		}
	}
	sortKeys(r.LostMessages)
	return r
}

func sortKeys(ks []MsgKey) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Key != ks[j].Key {
			return ks[i].Key < ks[j].Key
		}
		return ks[i].Seq < ks[j].Seq
	})
}

// DupReport counts messages stored more than once.
type DupReport struct {
	// Messages stored more than once and the copies beyond the first.
	Messages int
	Extra    int
	// MaxCopies is the most copies of one message.
	MaxCopies int
	// SameCopy: one attempt's body stored more than once — the log
	// repeated a record (a producer never sends one body twice).
	SameCopy []CopyID
	// Unacked is the number of attempts not acknowledged: every duplicate
	// comes from one of them, so Extra ≤ Unacked always holds; it is the
	// bound the report shows.
	Unacked int
}

// Violations lists repeated records.
func (r DupReport) Violations() []string {
	if len(r.SameCopy) > 0 {
		return []string{fmt.Sprintf("%d attempts stored more than once (first %v)", len(r.SameCopy), r.SameCopy[0])}
	}
	if r.Extra > r.Unacked {
		return []string{fmt.Sprintf("%d duplicate copies from %d unacknowledged attempts", r.Extra, r.Unacked)}
	}
	return nil
}

// CheckDuplicates counts duplicates in the final log.
func CheckDuplicates(atts []Attempt, fin *FinalLog) DupReport {
	ix := newIndex(fin)
	var r DupReport
	for i := range atts {
		if atts[i].Outcome != Acked {
			r.Unacked++
		}
	}
	for id, copies := range ix.byCopy {
		if len(copies) > 1 {
			r.SameCopy = append(r.SameCopy, id)
		}
	}
	sort.Slice(r.SameCopy, func(i, j int) bool { return lessCopy(r.SameCopy[i], r.SameCopy[j]) })
	for _, n := range ix.byMsg {
		if n > 1 {
			r.Messages++
			r.Extra += n - 1
		}
		r.MaxCopies = max(r.MaxCopies, n)
	}
	return r
}

func lessCopy(a, b CopyID) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return a.Attempt < b.Attempt
}

// OrderViolation: on Key, acknowledged sequence number Seq first appears
// in the log (at Offset) after Prev, a later one.
type OrderViolation struct {
	Key       int32
	Prev, Seq int32
	Offset    int64
}

// OrderReport checks order per sharding key.
type OrderReport struct {
	Keys       int
	Violations []OrderViolation
}

// Violation texts.
func (r OrderReport) Errors() []string {
	if len(r.Violations) == 0 {
		return nil
	}
	v := r.Violations[0]
	return []string{fmt.Sprintf("%d order violations (first: key %d seq %d at offset %d after seq %d)", len(r.Violations), v.Key, v.Seq, v.Offset, v.Prev)}
}

// CheckOrder checks that, per sharding key, the first stored copies of the
// acknowledged sequence numbers appear in the log (CommitLog order) in
// increasing order. A producer sends a key's seq n+1 only once n was
// acknowledged, so any other order means the log reordered
// acknowledged writes. Copies of unacknowledged sequence numbers and later
// copies (duplicates) are ignored.
func CheckOrder(atts []Attempt, fin *FinalLog) OrderReport {
	acked := make(map[MsgKey]bool)
	for i := range atts {
		if atts[i].Outcome == Acked {
			acked[atts[i].MsgKey] = true
		}
	}
	recs := make([]Stored, 0, len(fin.Records))
	for _, s := range fin.Records {
		if s.OK && acked[s.ID.MsgKey] {
			recs = append(recs, s)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
	seen := make(map[MsgKey]bool)
	last := make(map[int32]int32) // key → highest seq first seen so far
	var r OrderReport
	for _, s := range recs {
		if seen[s.ID.MsgKey] {
			continue
		}
		seen[s.ID.MsgKey] = true
		prev, ok := last[s.ID.Key]
		if ok && s.ID.Seq < prev {
			r.Violations = append(r.Violations, OrderViolation{Key: s.ID.Key, Prev: prev, Seq: s.ID.Seq, Offset: s.Offset})
			continue
		}
		last[s.ID.Key] = s.ID.Seq
	}
	r.Keys = len(last)
	return r
}

// TwoMastersReport holds the evidence of two brokers of the group
// acknowledging writes at the same time. See the package documentation for
// the rules and why they are sound.
type TwoMastersReport struct {
	// Checked: acknowledged copies found at their acknowledged offsets
	// (the rules below apply to them).
	Checked int
	// EpochWriters: epochs of the final log whose range holds records of
	// more than one writer (rule W).
	EpochWriters []string
	// StaleAcks: an ack from a broker at epoch e that started after
	// another broker had completed an ack at a later epoch (rule E).
	StaleAcks []string
	// Reordered: an ack that completed before another started, stored
	// after it in the log (rule R).
	Reordered []string
	// WrongWriter: an acknowledged copy whose record names another writer
	// than the broker that acknowledged it (rule A).
	WrongWriter []string
	// Epochs: acknowledged copies per (epoch, broker).
	Epochs map[int64]map[string]int
}

// Errors lists the violations.
func (r TwoMastersReport) Errors() []string {
	var v []string
	add := func(what string, l []string) {
		if len(l) > 0 {
			v = append(v, fmt.Sprintf("%s: %d (first: %s)", what, len(l), l[0]))
		}
	}
	add("epochs written by two brokers", r.EpochWriters)
	add("acks from a stale master", r.StaleAcks)
	add("acks stored out of real-time order", r.Reordered)
	add("acks stored under another broker's name", r.WrongWriter)
	return v
}

// CheckTwoMasters applies rules W, E, R and A (package documentation).
func CheckTwoMasters(atts []Attempt, fin *FinalLog) TwoMastersReport {
	ix := newIndex(fin)
	r := TwoMastersReport{Epochs: make(map[int64]map[string]int)}

	// Rule W: one writer per epoch range.
	writers := make(map[int64]map[string]int64) // epoch → writer → first offset
	for _, s := range fin.Records {
		if s.Writer == "" {
			continue
		}
		e := ix.epochOf(s.Offset)
		if writers[e] == nil {
			writers[e] = make(map[string]int64)
		}
		if off, ok := writers[e][s.Writer]; !ok || s.Offset < off {
			writers[e][s.Writer] = s.Offset
		}
	}
	epochs := make([]int64, 0, len(writers))
	for e := range writers {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	for _, e := range epochs {
		if len(writers[e]) > 1 {
			r.EpochWriters = append(r.EpochWriters, fmt.Sprintf("epoch %d: writers %v", e, writers[e]))
		}
	}

	type ack struct {
		a     *Attempt
		epoch int64
	}
	var acks []ack
	for i := range atts {
		a := &atts[i]
		if a.Outcome != Acked {
			continue
		}
		s, ok := ix.survivor(a)
		if !ok {
			continue
		}
		if s.Writer != "" && a.Broker != "" && s.Writer != a.Broker {
			r.WrongWriter = append(r.WrongWriter, fmt.Sprintf("%v acked by %s, record written by %s at %d", a.CopyID, a.Broker, s.Writer, s.Offset))
		}
		e := ix.epochOf(a.Offset)
		acks = append(acks, ack{a, e})
		if r.Epochs[e] == nil {
			r.Epochs[e] = make(map[string]int)
		}
		r.Epochs[e][a.Broker]++
	}
	r.Checked = len(acks)
	if len(acks) == 0 {
		return r
	}

	// Acks sorted by end, with prefix maxima: of the log offset (rule R)
	// and, per broker, of the epoch (rule E).
	byEnd := slices.Clone(acks)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].a.End < byEnd[j].a.End })
	maxOff := make([]int, len(byEnd)) // index of the ack with the highest offset among byEnd[:i+1]
	brokers := make(map[string]bool)
	for i, x := range byEnd {
		brokers[x.a.Broker] = true
		maxOff[i] = i
		if i > 0 && byEnd[maxOff[i-1]].a.Offset > x.a.Offset {
			maxOff[i] = maxOff[i-1]
		}
	}
	// Per broker: prefix maximum of the epoch, as an index into byEnd.
	maxEpoch := make(map[string][]int)
	for b := range brokers {
		m := make([]int, len(byEnd))
		best := -1
		for i, x := range byEnd {
			if x.a.Broker == b && (best < 0 || x.epoch > byEnd[best].epoch) {
				best = i
			}
			m[i] = best
		}
		maxEpoch[b] = m
	}
	for _, x := range acks {
		// byEnd[:n] ended strictly before x started.
		n := sort.Search(len(byEnd), func(i int) bool { return byEnd[i].a.End >= x.a.Start })
		if n == 0 {
			continue
		}
		if y := byEnd[maxOff[n-1]]; y.a.Offset > x.a.Offset {
			r.Reordered = append(r.Reordered, fmt.Sprintf("%v (acked by %s at offset %d, %v–%v) is stored before %v (acked by %s at offset %d, done at %v)",
				x.a.CopyID, x.a.Broker, x.a.Offset, x.a.Start, x.a.End, y.a.CopyID, y.a.Broker, y.a.Offset, y.a.End))
		}
		for b, m := range maxEpoch {
			if b == x.a.Broker || m[n-1] < 0 {
				continue
			}
			if y := byEnd[m[n-1]]; y.epoch > x.epoch {
				r.StaleAcks = append(r.StaleAcks, fmt.Sprintf("%s acked %v at epoch %d (%v–%v) after %s had acked %v at epoch %d (done at %v)",
					x.a.Broker, x.a.CopyID, x.epoch, x.a.Start, x.a.End, y.a.Broker, y.a.CopyID, y.epoch, y.a.End))
			}
		}
	}
	return r
}

// KillSnapshot is the replication state of a master read just before it
// was killed (async replication).
type KillSnapshot struct {
	Cycle  int
	At     time.Duration // the kill
	Master string
	// MasterEnd is the master's CommitLog end at the snapshot.
	MasterEnd int64
	// SlaveAck: each slave's acknowledged CommitLog offset; LagBytes the
	// largest lag the master reported.
	SlaveAck map[string]int64
	LagBytes int64
	// NewMaster is the broker elected after the kill ("" unknown: the
	// bound uses the least slave ack).
	NewMaster string
}

// AsyncLossReport compares the acknowledged copies lost at each kill with
// the replication lag read just before it.
type AsyncLossReport struct {
	Cycles []AsyncLossCycle
	// Unexplained: lost acknowledged copies that no kill accounts for
	// (acked by a broker that was not the killed master of a cycle, or
	// after the kill).
	Unexplained []Attempt
}

// AsyncLossCycle is one kill's loss.
type AsyncLossCycle struct {
	KillSnapshot
	// Bound is the offset from which the lag allows loss: the new
	// master's acknowledged offset at the snapshot.
	Bound int64
	// Lost: acknowledged copies of the killed master lost. LostBytes:
	// from the lowest lost offset to the master's end at the snapshot —
	// at most Lag when every loss lies above Bound. Lag is the new
	// master's lag at the snapshot (MasterEnd − Bound).
	Lost      int
	LostBytes int64
	Lag       int64
	// BelowBound: lost copies below Bound — not explained by the lag.
	BelowBound []Attempt
	// AckedAfterSnapshot: lost copies acknowledged after the snapshot (the
	// lag read could not include them; they are allowed, above Bound).
	AckedAfterSnapshot int
}

// Errors lists losses the lag does not explain.
func (r AsyncLossReport) Errors() []string {
	var v []string
	for _, c := range r.Cycles {
		if len(c.BelowBound) > 0 {
			a := c.BelowBound[0]
			v = append(v, fmt.Sprintf("cycle %d: %d lost acknowledged copies below the new master's acknowledged offset %d (first %v at %d)", c.Cycle, len(c.BelowBound), c.Bound, a.CopyID, a.Offset))
		}
	}
	if len(r.Unexplained) > 0 {
		a := r.Unexplained[0]
		v = append(v, fmt.Sprintf("%d lost acknowledged copies no kill explains (first %v acked by %s at %d, %v)", len(r.Unexplained), a.CopyID, a.Broker, a.Offset, a.End))
	}
	return v
}

// CheckAsyncLoss attributes every lost acknowledged copy to the kill of
// the master that acknowledged it (the first kill of that broker after
// the send started: the kill's time is taken just before the signal, so
// an ack may end a little after it) and checks it lies at or above the offset the new master had
// acknowledged at the snapshot: below it, the new master had the bytes and
// the loss is not the replication lag's.
func CheckAsyncLoss(atts []Attempt, fin *FinalLog, snaps []KillSnapshot) AsyncLossReport {
	loss := CheckLoss(atts, fin)
	snaps = slices.Clone(snaps)
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].At < snaps[j].At })
	var r AsyncLossReport
	cycles := make([]AsyncLossCycle, len(snaps))
	lo := make([]int64, len(snaps))
	for i, s := range snaps {
		cycles[i].KillSnapshot = s
		cycles[i].Bound = asyncBound(s)
		lo[i] = -1
	}
	for _, a := range loss.LostCopies {
		k := -1
		for i, s := range snaps {
			if s.Master == a.Broker && a.Start <= s.At {
				k = i
				break
			}
		}
		if k < 0 {
			r.Unexplained = append(r.Unexplained, a)
			continue
		}
		c := &cycles[k]
		c.Lost++
		if a.Offset < c.Bound {
			c.BelowBound = append(c.BelowBound, a)
		}
		if lo[k] < 0 || a.Offset < lo[k] {
			lo[k] = a.Offset
		}
	}
	for i := range cycles {
		c := &cycles[i]
		c.Lag = max(c.MasterEnd-c.Bound, 0)
		if lo[i] >= 0 {
			c.LostBytes = max(c.MasterEnd-lo[i], 0)
		}
	}
	// Copies acknowledged between the snapshot and the kill: count them.
	for i := range cycles {
		c := &cycles[i]
		if c.Lost == 0 {
			continue
		}
		for _, a := range loss.LostCopies {
			if a.Broker == c.Master && a.Start <= c.At && a.Offset >= c.MasterEnd {
				c.AckedAfterSnapshot++
			}
		}
	}
	r.Cycles = cycles
	return r
}

// asyncBound is the offset below which the new master had everything at
// the snapshot.
func asyncBound(s KillSnapshot) int64 {
	if s.NewMaster != "" {
		if v, ok := s.SlaveAck[s.NewMaster]; ok {
			return v
		}
	}
	b := int64(-1)
	for _, v := range s.SlaveAck {
		if b < 0 || v < b {
			b = v
		}
	}
	return max(b, 0)
}
