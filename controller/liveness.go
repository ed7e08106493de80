package controller

import (
	"sync"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Broker roles as heartbeats report them.
const (
	RoleMaster   = "MASTER"
	RoleSlave    = "SLAVE"
	RoleFenced   = "FENCED"
	RoleStarting = "STARTING"
)

// replicaKey names a replica: its group and its permanent id.
type replicaKey struct {
	name string
	id   int64
}

// liveRecord is what this controller last heard from a replica. Times are
// from this process's monotonic clock.
type liveRecord struct {
	lastSeen time.Time
	streams  int       // open heartbeat streams of the replica
	closedAt time.Time // when the last of them closed (streams == 0)

	cluster   string
	addr      string
	haAddr    string
	epoch     int64
	role      string
	maxOffset int64
	confirm   int64
	priority  int32
}

// grantRecord is the last lease this leader granted in a group.
type grantRecord struct {
	at     time.Time // when the beat was received: the lease ends at the latest at + Lease
	master int64
	epoch  int64
}

// liveness is the table every controller keeps from heartbeats. It is not
// in the log: each controller hears every broker itself. The leader also
// keeps the leases it granted and the groups with an election under way
// (no lease is granted in those).
type liveness struct {
	brokerTimeout time.Duration
	streamGrace   time.Duration
	lease         time.Duration

	mu     sync.Mutex // mu protects recs, grants and pending
	recs   map[replicaKey]*liveRecord
	grants map[string]grantRecord
	// pending counts the elections under way by group (the scan's and
	// ElectMaster calls' may overlap); no grant while it is > 0.
	pending map[string]int
}

func newLiveness(o *Options) *liveness {
	return &liveness{
		brokerTimeout: o.BrokerTimeout,
		streamGrace:   o.StreamGrace,
		lease:         o.Lease,
		recs:          map[replicaKey]*liveRecord{},
		grants:        map[string]grantRecord{},
		pending:       map[string]int{},
	}
}

// recordLocked returns k's record, created when missing.
func (l *liveness) recordLocked(k replicaKey) *liveRecord {
	r := l.recs[k]
	if r == nil {
		r = &liveRecord{}
		l.recs[k] = r
	}
	return r
}

// beat records a heartbeat received at now.
func (l *liveness) beat(k replicaKey, b *pb.BrokerBeat, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recordLocked(k)
	r.lastSeen = now
	r.cluster = b.GetCluster()
	r.addr = b.GetAddr()
	r.haAddr = b.GetHaAddr()
	r.epoch = b.GetEpoch()
	r.role = b.GetRole()
	r.maxOffset = b.GetMaxOffset()
	r.confirm = b.GetConfirmOffset()
	r.priority = b.GetPriority()
}

// streamOpened counts a heartbeat stream now carrying k's beats.
func (l *liveness) streamOpened(k replicaKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(k).streams++
}

// streamClosed uncounts it; with none left, k must reconnect within the
// stream grace to stay alive.
func (l *liveness) streamClosed(k replicaKey, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recordLocked(k)
	if r.streams > 0 {
		r.streams--
	}
	if r.streams == 0 {
		r.closedAt = now
	}
}

// aliveLocked: a beat within the broker timeout and, when no stream is
// open, a stream closed less than the stream grace ago.
func (l *liveness) aliveLocked(r *liveRecord, now time.Time) bool {
	if r == nil || r.lastSeen.IsZero() || now.Sub(r.lastSeen) > l.brokerTimeout {
		return false
	}
	return r.streams > 0 || now.Sub(r.closedAt) <= l.streamGrace
}

// view is a copy of a replica's record with its liveness at now.
type view struct {
	liveRecord
	known bool
	alive bool
}

func (l *liveness) get(k replicaKey, now time.Time) view {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[k]
	if r == nil {
		return view{}
	}
	return view{liveRecord: *r, known: true, alive: l.aliveLocked(r, now)}
}

// aliveCandidates returns the alive replicas among ids as candidates.
func (l *liveness) aliveCandidates(name string, ids []int64, now time.Time) map[int64]Candidate {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int64]Candidate{}
	for _, id := range ids {
		r := l.recs[replicaKey{name, id}]
		if l.aliveLocked(r, now) {
			out[id] = Candidate{ID: id, Epoch: r.epoch, MaxOffset: r.maxOffset, Priority: r.priority}
		}
	}
	return out
}

// grant records a lease granted at now to the master of a group, unless
// an election is under way there.
func (l *liveness) grant(name string, master, epoch int64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[name] > 0 {
		return false
	}
	l.grants[name] = grantRecord{at: now, master: master, epoch: epoch}
	return true
}

// beginElection stops the grants in a group until the matching
// endElection and returns when the last lease granted there ends (zero
// when none was).
func (l *liveness) beginElection(name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[name]++
	if g, ok := l.grants[name]; ok {
		return g.at.Add(l.lease)
	}
	return time.Time{}
}

// endElection ends what beginElection began; grants resume in the group
// when no other election is under way there.
func (l *liveness) endElection(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[name]--; l.pending[name] <= 0 {
		delete(l.pending, name)
	}
}

// forgetGrants drops the grant records: on leadership loss (a later
// leadership starts with the grace period instead).
func (l *liveness) forgetGrants() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.grants)
}
