package broker

import "github.com/bolide-mq/bolide/broker/pop"

// PopService exposes the POP service to the external tests.
func (b *Broker) PopService() *pop.Service { return b.pop }
