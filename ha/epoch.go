package ha

import (
	"fmt"
	"sort"
)

// EpochEntry marks where a master epoch starts in a CommitLog: every byte
// from Start up to the next entry's Start (or the log's end) was written by
// the master of Epoch. A broker appends an entry, (new epoch, its CommitLog
// end), when it becomes master; a slave takes its master's entries at the
// HA handshake. Two replicas hold the same bytes up to the fork point of
// their entries (ForkPoint).
type EpochEntry struct {
	Epoch int64
	Start int64
}

// MaxEpochEntries bounds the entries one handshake frame carries.
const MaxEpochEntries = 4096

// ValidateEpochs checks that entries are in order: epochs strictly
// increasing, starts non-decreasing and not negative.
func ValidateEpochs(entries []EpochEntry) error {
	if len(entries) > MaxEpochEntries {
		return fmt.Errorf("%d epoch entries, at most %d", len(entries), MaxEpochEntries)
	}
	for i, e := range entries {
		if e.Start < 0 || e.Epoch < 0 {
			return fmt.Errorf("epoch entry %d (%d at %d) is negative", i, e.Epoch, e.Start)
		}
		if i > 0 {
			p := entries[i-1]
			if e.Epoch <= p.Epoch || e.Start < p.Start {
				return fmt.Errorf("epoch entry %d (%d at %d) does not follow (%d at %d)", i, e.Epoch, e.Start, p.Epoch, p.Start)
			}
		}
	}
	return nil
}

// epochEnd is where entry i's bytes end in a log ending at logEnd.
func epochEnd(entries []EpochEntry, i int, logEnd int64) int64 {
	end := logEnd
	if i+1 < len(entries) && entries[i+1].Start < end {
		end = entries[i+1].Start
	}
	return end
}

// ForkPoint is the offset up to which a slave's log (entries se, ending at
// slaveEnd) and a master's (me, masterEnd) hold the same bytes: the newest
// epoch both have with the same start, cut at the smaller of the two ends
// of that epoch (an entry starting beyond a log's end ends at that end).
// ok is false when they share no such epoch. Both entry
// lists must be valid (ValidateEpochs).
func ForkPoint(se []EpochEntry, slaveEnd int64, me []EpochEntry, masterEnd int64) (fork int64, ok bool) {
	for i := len(se) - 1; i >= 0; i-- {
		e := se[i]
		j := sort.Search(len(me), func(k int) bool { return me[k].Epoch >= e.Epoch })
		if j == len(me) || me[j].Epoch != e.Epoch || me[j].Start != e.Start {
			continue
		}
		return min(epochEnd(se, i, slaveEnd), epochEnd(me, j, masterEnd)), true
	}
	return 0, false
}
