package broker

// GroupSubscription returns the tag expression that the clients of a
// consumer group registered for a topic in their heartbeats, and whether one
// did. A front end whose clients pull without a subscription (RocketMQ's push
// consumer sends none) filters their pulls with it.
func (b *Broker) GroupSubscription(group, topic string) (string, bool) {
	sub, ok := b.clients.subscription(group, topic)
	return sub.Expression, ok
}

// GroupFilter is GroupSubscription with the expression's type (a tag
// expression or an SQL92 condition).
func (b *Broker) GroupFilter(group, topic string) (Subscription, bool) {
	return b.clients.subscription(group, topic)
}

// subscription returns a group's registered subscription of a topic.
func (r *clientRegistry) subscription(g, topic string) (Subscription, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gi := r.groups[g]
	if gi == nil {
		return Subscription{}, false
	}
	sub, ok := gi.subscriptions[topic]
	return sub, ok
}
