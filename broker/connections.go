package broker

import (
	"cmp"
	"slices"
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// ClientConnection is one connected client of a group, as the broker
// knows it from the front end that carries it and from its heartbeats.
type ClientConnection struct {
	ClientID string
	ConnInfo
	ConnectedSince, LastHeartbeat time.Time
	// Consumers only: how it consumes (PUSH, PULL, POP, SIMPLE), its
	// model and the subscriptions its last heartbeat named, sorted by
	// topic.
	ConsumeType   string
	Model         MessageModel
	Subscriptions []Subscription
}

// GroupConnections are the clients connected to this broker as producers
// and as consumers of a group, each sorted by client id then address.
type GroupConnections struct {
	Group     string
	Producers []ClientConnection
	Consumers []ClientConnection
}

// GroupConnections lists the producers and consumers of group connected
// to this broker over every protocol (mqadmin's producerConnection and
// consumerConnection). A group without connected clients has empty lists;
// an illegal name is ILLEGAL_GROUP.
func (b *Broker) GroupConnections(group string) (GroupConnections, error) {
	if err := message.ValidateGroup(group); err != nil {
		return GroupConnections{}, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	return b.clients.connections(group), nil
}

// connections describes the connected producers and consumers of group.
func (r *clientRegistry) connections(group string) GroupConnections {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := GroupConnections{Group: group}
	for c := range r.clients {
		if c.producer[group] {
			out.Producers = append(out.Producers, c.connectionLocked())
		}
		cd, ok := c.groups[group]
		if !ok {
			continue
		}
		cc := c.connectionLocked()
		cc.ConsumeType, cc.Model = consumeType(cd), cd.Model
		cc.Subscriptions = slices.Clone(cd.Subscriptions)
		slices.SortFunc(cc.Subscriptions, func(x, y Subscription) int { return cmp.Compare(x.Topic, y.Topic) })
		out.Consumers = append(out.Consumers, cc)
	}
	byID := func(x, y ClientConnection) int {
		return cmp.Or(cmp.Compare(x.ClientID, y.ClientID), cmp.Compare(x.RemoteAddr, y.RemoteAddr), x.ConnectedSince.Compare(y.ConnectedSince))
	}
	slices.SortFunc(out.Producers, byID)
	slices.SortFunc(out.Consumers, byID)
	return out
}

// connectionLocked describes the session's client; the caller holds the
// registry's lock.
func (c *Session) connectionLocked() ClientConnection {
	return ClientConnection{ClientID: c.id, ConnInfo: c.conn, ConnectedSince: c.since, LastHeartbeat: c.lastSeen}
}

// consumeType is how a consumer consumes, as its heartbeat says.
func consumeType(cd ConsumerData) string {
	switch {
	case cd.ConsumeType != "":
		return cd.ConsumeType
	case cd.Pull:
		return "PULL"
	}
	return "PUSH"
}
