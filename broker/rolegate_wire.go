package broker

import "github.com/bolide-mq/bolide/broker/rolegate"

// newRoleGate returns the broker's one role gate: the master-only services
// subscribe to it and run while the broker is the master (not a slave, not
// fenced).
func newRoleGate(b *Broker) *rolegate.Gate {
	return rolegate.New(b.repl, b.log.Named("rolegate"))
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
