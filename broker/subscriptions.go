package broker

// GroupSubscription returns the tag expression that the clients of a
// consumer group registered for a topic in their heartbeats, and whether one
// did. A front end whose clients pull without a subscription (RocketMQ's push
// consumer sends none) filters their pulls with it.
func (b *Broker) GroupSubscription(group, topic string) (string, bool) {
	return b.clients.subscription(group, topic)
}

// subscription returns a group's registered expression for a topic.
func (r *clientRegistry) subscription(g, topic string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gi := r.groups[g]
	if gi == nil {
		return "", false
	}
	expr, ok := gi.subscriptions[topic]
	return expr, ok
}
