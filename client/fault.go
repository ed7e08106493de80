package client

import (
	"hash/fnv"
	"sync"
	"time"
)

// faultTracker is RocketMQ's latency fault tolerance: a broker that failed
// a send, or answered slowly, is avoided for a while. The latency steps
// follow RocketMQ's MQFaultStrategy; every avoidance is capped by the
// configured isolation time, which is also what a failure costs.
type faultTracker struct {
	isolation time.Duration
	now       func() time.Time

	mu    sync.Mutex
	items map[string]faultItem
}

type faultItem struct {
	latency time.Duration
	until   time.Time
}

var (
	faultLatencySteps = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 550 * time.Millisecond,
		time.Second, 2 * time.Second, 3 * time.Second, 15 * time.Second}
	faultAvoidSteps = []time.Duration{0, 0, 30 * time.Second, 60 * time.Second, 2 * time.Minute,
		3 * time.Minute, 10 * time.Minute}
)

func newFaultTracker(isolation time.Duration) *faultTracker {
	return &faultTracker{isolation: isolation, now: time.Now, items: make(map[string]faultItem)}
}

// avoidFor returns how long a broker with this send latency is avoided.
func (f *faultTracker) avoidFor(latency time.Duration, failed bool) time.Duration {
	if failed {
		return f.isolation
	}
	var d time.Duration
	for i := len(faultLatencySteps) - 1; i >= 0; i-- {
		if latency >= faultLatencySteps[i] {
			d = faultAvoidSteps[i]
			break
		}
	}
	return min(d, f.isolation)
}

// update records the outcome of a send to broker.
func (f *faultTracker) update(broker string, latency time.Duration, failed bool) {
	d := f.avoidFor(latency, failed)
	f.mu.Lock()
	defer f.mu.Unlock()
	if d == 0 {
		delete(f.items, broker)
		return
	}
	f.items[broker] = faultItem{latency: latency, until: f.now().Add(d)}
}

// available reports whether broker is not being avoided.
func (f *faultTracker) available(broker string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	it, ok := f.items[broker]
	return !ok || !f.now().Before(it.until)
}

// pickQueue chooses a queue from queues starting at index start: the first
// one, in round-robin order, on a broker that is neither avoid (the broker
// the previous attempt failed on) nor unavailable; failing that the first
// one not on avoid; failing that the one at start. queues must not be
// empty.
func pickQueue(queues []MessageQueue, start uint64, avoid string, available func(broker string) bool) MessageQueue {
	n := uint64(len(queues))
	for i := uint64(0); i < n; i++ {
		q := queues[(start+i)%n]
		if q.BrokerName != avoid && (available == nil || available(q.BrokerName)) {
			return q
		}
	}
	if avoid != "" {
		for i := uint64(0); i < n; i++ {
			q := queues[(start+i)%n]
			if q.BrokerName != avoid {
				return q
			}
		}
	}
	return queues[start%n]
}

// QueueSelector picks the queue of an ordered message. queues are the
// topic's writable queues sorted by broker name and queue id; the choice
// must be deterministic for messages that must stay in order.
type QueueSelector func(queues []MessageQueue, msg *Message) MessageQueue

// HashQueueSelector selects by a hash (FNV-1a) of the message's sharding
// key modulo the number of queues; it is what WithShardingKey uses.
func HashQueueSelector(queues []MessageQueue, msg *Message) MessageQueue {
	return queues[shardIndex(msg.ShardingKey, len(queues))]
}

func shardIndex(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}
