package broker

import (
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/rolegate"
)

// newRoleGate returns the broker's one role gate: the master-only services
// subscribe to it and run while the broker is the master (not a slave, not
// fenced) and, in controller mode, holds a write lease.
func newRoleGate(b *Broker) *rolegate.Gate {
	return rolegate.New(writableSource{b.repl}, b.log.Named("rolegate"))
}

// startRoleGate applies the current role and follows its changes.
func (b *Broker) startRoleGate() error {
	b.gate.Start()
	return nil
}

// stopRoleGate stops the master-only services and the gate for good.
func (b *Broker) stopRoleGate() error {
	b.gate.Close()
	return nil
}

// leaseHolder is what the role gate reads from the replicator.
type leaseHolder interface {
	// CheckWritable is nil on a master that takes writes (in controller
	// mode: one that holds a write lease).
	CheckWritable() error
	// Changes is closed when CheckWritable's answer may have changed: a
	// role change, or a lease beginning or running out.
	Changes() <-chan struct{}
}

var _ leaseHolder = (*replication.Replicator)(nil)

// writableSource is the gate's rolegate.Source. A broker leads while it
// takes writes: in controller mode the role alone is not enough, since a
// master cut off from the controllers keeps its role until it hears of the
// new master, while the controller elects that one once the old master's
// lease has run out. Leading only under the lease keeps two brokers from
// delivering delayed messages, checking transactions back or reviving POP
// messages at once.
type writableSource struct{ r leaseHolder }

func (s writableSource) IsMaster() bool           { return s.r.CheckWritable() == nil }
func (s writableSource) Changes() <-chan struct{} { return s.r.Changes() }
