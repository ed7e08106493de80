package controller

import "slices"

// Candidate is a replica as its heartbeats describe it, for the election.
type Candidate struct {
	ID        int64
	Epoch     int64 // highest master epoch it knows
	MaxOffset int64 // end of its CommitLog
	Priority  int32 // lower is preferred
}

// better reports whether a ranks before b: epoch desc, max offset desc,
// priority asc, id asc. Every compare is on the full 64 bits (RocketMQ's
// comparator casts an offset difference to int and inverts the order for
// gaps over 2 GiB).
func better(a, b Candidate) bool {
	switch {
	case a.Epoch != b.Epoch:
		return a.Epoch > b.Epoch
	case a.MaxOffset != b.MaxOffset:
		return a.MaxOffset > b.MaxOffset
	case a.Priority != b.Priority:
		return a.Priority < b.Priority
	}
	return a.ID < b.ID
}

// choose returns the best candidate, ok false when there is none.
func choose(cands []Candidate) (Candidate, bool) {
	if len(cands) == 0 {
		return Candidate{}, false
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if better(c, best) {
			best = c
		}
	}
	return best, true
}

// electionInput is what the leader knows of a group when it elects.
type electionInput struct {
	group   *Group
	alive   map[int64]Candidate // alive replicas of the group, by id
	unclean bool                // fall back to every alive replica
}

// electionOutcome is the decision: NewMaster 0 means none.
type electionOutcome struct {
	NewMaster int64
	Unclean   bool  // chosen outside the sync state set
	MinEpoch  int64 // the new epoch is at least this (first elections)
}

// decide is the pure election: the best of SSS ∩ alive; when that is
// empty and unclean is allowed, the best of every alive replica; else
// none. The caller removes a dead master from alive (a master that
// restarted is alive and a candidate again).
func decide(in electionInput) electionOutcome {
	var clean, all []Candidate
	for _, id := range in.group.ReplicaIDs() {
		c, ok := in.alive[id]
		if !ok {
			continue
		}
		all = append(all, c)
		if slices.Contains(in.group.SSS, id) {
			clean = append(clean, c)
		}
	}
	if best, ok := choose(clean); ok {
		return electionOutcome{NewMaster: best.ID}
	}
	if in.unclean {
		if best, ok := choose(all); ok {
			return electionOutcome{NewMaster: best.ID, Unclean: true}
		}
	}
	return electionOutcome{}
}
