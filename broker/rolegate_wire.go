package broker

import (
	"sync"
	"time"

	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/rolegate"
)

// leaseCheckInterval is how often the role gate of a broker in controller
// mode re-reads its write lease: a master whose lease ran out (cut off
// from the controllers, about to be replaced) stops its master-only
// services within this interval, and starts them again once a lease
// arrives.
const leaseCheckInterval = 50 * time.Millisecond

// newRoleGate returns the broker's one role gate: the master-only services
// subscribe to it and run while the broker is the master (not a slave, not
// fenced) and, in controller mode, holds a write lease.
func newRoleGate(b *Broker) *rolegate.Gate {
	b.roleSrc = newRoleSource(b.repl, leaseCheckInterval)
	return rolegate.New(b.roleSrc, b.log.Named("rolegate"))
}

// startRoleGate applies the current role and follows its changes.
func (b *Broker) startRoleGate() error {
	b.gate.Start()
	return nil
}

// stopRoleGate stops the master-only services and the gate for good.
func (b *Broker) stopRoleGate() error {
	b.gate.Close()
	b.roleSrc.close()
	return nil
}

// leaseHolder is what the role source reads from the replicator.
type leaseHolder interface {
	// CheckWritable is nil on a master that takes writes (in controller
	// mode: one that holds a write lease).
	CheckWritable() error
	Changes() <-chan struct{}
	ControllerMode() bool
}

var _ leaseHolder = (*replication.Replicator)(nil)

// roleSource is the gate's rolegate.Source. A broker leads while it takes
// writes: in controller mode the role alone is not enough, since a master
// cut off from the controllers keeps its role until it hears of the new
// master, while the controller elects that one once the old master's
// lease has run out. Leading only under the lease keeps two brokers from
// delivering delayed messages, checking transactions back or reviving POP
// messages at once. A lease running out is no role change, so in
// controller mode Changes also fires every interval.
type roleSource struct {
	r        leaseHolder
	interval time.Duration
	stop     chan struct{}
	once     sync.Once
}

func newRoleSource(r leaseHolder, interval time.Duration) *roleSource {
	return &roleSource{r: r, interval: interval, stop: make(chan struct{})}
}

func (s *roleSource) IsMaster() bool { return s.r.CheckWritable() == nil }

func (s *roleSource) Changes() <-chan struct{} {
	ch := s.r.Changes()
	if !s.r.ControllerMode() {
		return ch
	}
	out := make(chan struct{})
	go func() {
		defer close(out)
		t := time.NewTimer(s.interval)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		case <-s.stop:
		}
	}()
	return out
}

// close ends the pending Changes waits (after the gate is closed).
func (s *roleSource) close() { s.once.Do(func() { close(s.stop) }) }
