package broker

import (
	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/offsets"
)

// What the external tests of this package (package broker_test, which
// drive brokers through their front ends) look at inside a broker.

func (b *Broker) OffsetTable() *offsets.Table { return b.offsets }

func (b *Broker) TopicFor(name string) (TopicConfig, bool) { return b.topics.get(name) }

func (b *Broker) PutTopic(tc TopicConfig, update bool) error { return b.topics.put(tc, update) }

func (b *Broker) DelayService() *delay.Service { return b.delay.Load() }

func (b *Broker) SyncRole() bool { return b.gate.Sync() }

func (b *Broker) ProducerCount(group string) int { return len(b.clients.producersOf(group)) }

// PullParked reports whether a pull has waited on the queue on a
// goroutine of its own (Pull), or has been parked on it (PullOrPark).
func (b *Broker) PullParked(topic string, queueID int32) bool {
	_, ok := b.arrivals.Load(Queue{topic, queueID})
	return ok
}

// ParkedCount is the number of pulls parked on a queue now (PullOrPark).
func (b *Broker) ParkedCount(topic string, queueID int32) int {
	v, ok := b.arrivals.Load(Queue{topic, queueID})
	if !ok {
		return 0
	}
	w := v.(*queueWaiters)
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.parked)
}
