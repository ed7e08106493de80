package client

// AllocateStrategy decides which of a topic's queues a consumer of a
// clustering group takes. Every member runs it with the same sorted inputs,
// so together they must cover every queue exactly once.
type AllocateStrategy interface {
	// Name identifies the strategy in logs.
	Name() string
	// Allocate returns the queues of clientID. queues are sorted by broker
	// name then queue id, clientIDs are sorted; a clientID missing from
	// clientIDs gets nothing.
	Allocate(group, clientID string, queues []MessageQueue, clientIDs []string) []MessageQueue
}

// AllocateAverage is RocketMQ's default average allocation: each consumer
// takes a contiguous range of the sorted queues, the first len(queues) %
// len(clientIDs) consumers one queue more than the others. With more
// consumers than queues the last consumers get nothing.
type AllocateAverage struct{}

// Name implements AllocateStrategy.
func (AllocateAverage) Name() string { return "AVG" }

// Allocate implements AllocateStrategy.
func (AllocateAverage) Allocate(_, clientID string, queues []MessageQueue, clientIDs []string) []MessageQueue {
	idx := indexOf(clientIDs, clientID)
	if idx < 0 || len(queues) == 0 {
		return nil
	}
	n, m := len(queues), len(clientIDs)
	base, extra := n/m, n%m
	var start, count int
	if idx < extra {
		start, count = idx*(base+1), base+1
	} else {
		start, count = extra*(base+1)+(idx-extra)*base, base
	}
	if count == 0 {
		return nil
	}
	return append([]MessageQueue(nil), queues[start:start+count]...)
}

// AllocateAverageByCircle deals the sorted queues out one at a time, like
// cards: consumer i takes queues i, i+n, i+2n, ... (RocketMQ's
// AVG_BY_CIRCLE).
type AllocateAverageByCircle struct{}

// Name implements AllocateStrategy.
func (AllocateAverageByCircle) Name() string { return "AVG_BY_CIRCLE" }

// Allocate implements AllocateStrategy.
func (AllocateAverageByCircle) Allocate(_, clientID string, queues []MessageQueue, clientIDs []string) []MessageQueue {
	idx := indexOf(clientIDs, clientID)
	if idx < 0 {
		return nil
	}
	var out []MessageQueue
	for i := idx; i < len(queues); i += len(clientIDs) {
		out = append(out, queues[i])
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
