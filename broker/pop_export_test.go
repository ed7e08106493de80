package broker

import "github.com/bolide-mq/bolide/broker/pop"

// PopService exposes the POP service to the external tests.
func (b *Broker) PopService() *pop.Service { return b.pop }

// ResetPop is resetPop, for the tests (ResetOffset calls it once wired).
func (b *Broker) ResetPop(group, topic string, changes []OffsetChange) error {
	return b.resetPop(group, topic, changes)
}
