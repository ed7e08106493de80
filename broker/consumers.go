package broker

import (
	"sort"
	"sync"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// clientConn is one connected client: its Connect stream and what it last
// said in a heartbeat.
type clientConn struct {
	id       string
	notify   chan *pb.BrokerMessage // buffered; the stream's sender drains it
	lastSeen time.Time
	groups   map[string]*pb.ConsumerData
	producer map[string]bool
}

// groupInfo is a consumer group as the broker sees it.
type groupInfo struct {
	model         pb.MessageModel
	orderly       bool
	subscriptions map[string]string // topic → expression
	clients       map[string]*clientConn
}

// consumerRegistry tracks connected clients and consumer groups.
type consumerRegistry struct {
	mu      sync.Mutex
	clients map[*clientConn]bool
	groups  map[string]*groupInfo
}

func newConsumerRegistry() *consumerRegistry {
	return &consumerRegistry{clients: make(map[*clientConn]bool), groups: make(map[string]*groupInfo)}
}

// heartbeat applies a client's heartbeat; groups whose membership changed
// are notified.
func (r *consumerRegistry) heartbeat(c *clientConn, hb *pb.Heartbeat, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients[c] = true
	c.lastSeen = now
	c.id = hb.ClientId
	c.producer = make(map[string]bool, len(hb.ProducerGroups))
	for _, g := range hb.ProducerGroups {
		c.producer[g] = true
	}
	next := make(map[string]*pb.ConsumerData, len(hb.Consumers))
	for _, cd := range hb.Consumers {
		next[cd.Group] = cd
	}
	var changed []string
	// Groups the client left.
	for g := range c.groups {
		if _, ok := next[g]; !ok {
			if r.leaveLocked(c, g) {
				changed = append(changed, g)
			}
		}
	}
	for g, cd := range next {
		gi := r.groups[g]
		if gi == nil {
			gi = &groupInfo{clients: make(map[string]*clientConn), subscriptions: make(map[string]string)}
			r.groups[g] = gi
		}
		gi.model = cd.MessageModel
		gi.orderly = cd.Orderly
		for _, s := range cd.Subscriptions {
			gi.subscriptions[s.Topic] = s.Expression
		}
		if gi.clients[c.id] != c {
			gi.clients[c.id] = c
			changed = append(changed, g)
		}
	}
	c.groups = next
	for _, g := range changed {
		r.notifyLocked(g)
	}
}

// leaveLocked removes c from group g and reports whether it was a member.
func (r *consumerRegistry) leaveLocked(c *clientConn, g string) bool {
	gi := r.groups[g]
	if gi == nil || gi.clients[c.id] != c {
		return false
	}
	delete(gi.clients, c.id)
	return true
}

// disconnect removes a client (its stream ended or it expired).
func (r *consumerRegistry) disconnect(c *clientConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.clients[c] {
		return
	}
	delete(r.clients, c)
	for g := range c.groups {
		if r.leaveLocked(c, g) {
			r.notifyLocked(g)
		}
	}
}

// notifyLocked tells every member of g that the member list changed.
func (r *consumerRegistry) notifyLocked(g string) {
	gi := r.groups[g]
	if gi == nil {
		return
	}
	msg := &pb.BrokerMessage{Kind: &pb.BrokerMessage_ConsumerIdsChanged{ConsumerIdsChanged: &pb.ConsumerIdsChanged{Group: g}}}
	for _, c := range gi.clients {
		select {
		case c.notify <- msg:
		default: // the client rebalances periodically anyway
		}
	}
}

// expire drops clients silent for longer than ttl and returns them.
func (r *consumerRegistry) expire(now time.Time, ttl time.Duration) []*clientConn {
	r.mu.Lock()
	var dead []*clientConn
	for c := range r.clients {
		if now.Sub(c.lastSeen) > ttl {
			dead = append(dead, c)
		}
	}
	r.mu.Unlock()
	for _, c := range dead {
		r.disconnect(c)
	}
	return dead
}

// members returns the sorted client ids of a group.
func (r *consumerRegistry) members(g string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	gi := r.groups[g]
	if gi == nil {
		return nil
	}
	ids := make([]string, 0, len(gi.clients))
	for id := range gi.clients {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// groupList describes every known consumer group.
func (r *consumerRegistry) groupList() []*pb.ConsumerGroupInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*pb.ConsumerGroupInfo, 0, len(r.groups))
	for name, gi := range r.groups {
		info := &pb.ConsumerGroupInfo{Group: name, MessageModel: gi.model, Orderly: gi.orderly}
		for t, e := range gi.subscriptions {
			info.Subscriptions = append(info.Subscriptions, &pb.Subscription{Topic: t, Expression: e})
		}
		sort.Slice(info.Subscriptions, func(i, j int) bool { return info.Subscriptions[i].Topic < info.Subscriptions[j].Topic })
		for id := range gi.clients {
			info.ClientIds = append(info.ClientIds, id)
		}
		sort.Strings(info.ClientIds)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// subscribedTopics returns the topics a group subscribes to.
func (r *consumerRegistry) subscribedTopics(g string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	gi := r.groups[g]
	if gi == nil {
		return nil
	}
	out := make([]string, 0, len(gi.subscriptions))
	for t := range gi.subscriptions {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// known reports whether a group has ever connected.
func (r *consumerRegistry) known(g string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups[g] != nil
}

// producersOf returns the connected clients that said (in their last
// heartbeat) they are producers of group, sorted by client id.
func (r *consumerRegistry) producersOf(group string) []*clientConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*clientConn
	for c := range r.clients {
		if c.producer[group] {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id }) // c.id changes under r.mu
	return out
}
