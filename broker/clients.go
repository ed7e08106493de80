package broker

import (
	"sort"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// MessageModel says how a consumer group shares messages.
type MessageModel int32

const (
	// Clustering: each message goes to one consumer of the group; offsets
	// live on the broker.
	Clustering MessageModel = 0
	// Broadcasting: every consumer gets every message; offsets live on the
	// clients.
	Broadcasting MessageModel = 1
)

// Subscription is a topic and its filter: a tag expression, or an SQL92
// condition when Type is ExprSQL92.
type Subscription struct {
	Topic, Expression string
	// Type is ExprTag ("" too) or ExprSQL92.
	Type string
}

// ConsumerData is one consumer group of a client, as its heartbeat says.
type ConsumerData struct {
	Group         string
	Model         MessageModel
	Pull          bool // consumes actively (a pull consumer)
	Orderly       bool
	Subscriptions []Subscription
	// ConsumeType is how the client consumes, for the connection listings:
	// PUSH, PULL, POP or SIMPLE ("" = PULL when Pull is set, else PUSH).
	ConsumeType string
}

// ConnInfo is what a front end knows of a client's connection, for the
// connection listings (GroupConnections).
type ConnInfo struct {
	RemoteAddr string
	// Language and Version as the client announced them ("GO", "JAVA",
	// ...; a version string or RocketMQ's version number).
	Language, Version string
	// Protocol is the front end's: ProtocolBolide, ProtocolRemoting or
	// ProtocolGRPCv5.
	Protocol string
}

// The protocols a ConnInfo names.
const (
	ProtocolBolide   = "bolide"
	ProtocolRemoting = "remoting"
	ProtocolGRPCv5   = "grpc-v5"
)

// Heartbeat is what a client says about itself: its producer groups and
// consumer groups. A front end turns its protocol's heartbeat into one.
type Heartbeat struct {
	ClientID       string
	ProducerGroups []string
	Consumers      []ConsumerData
	// Conn describes the client's connection (the zero value keeps what
	// an earlier heartbeat said).
	Conn ConnInfo
}

// Validate checks the consumer groups and subscriptions a heartbeat
// carries.
func (hb *Heartbeat) Validate() error {
	if hb.ClientID == "" {
		return errcode.Errorf(errcode.InvalidParameter, "a heartbeat needs a client id")
	}
	for _, cd := range hb.Consumers {
		if err := message.ValidateGroup(cd.Group); err != nil {
			return errcode.Errorf(errcode.IllegalGroup, "%v", err)
		}
		for _, sub := range cd.Subscriptions {
			if err := message.ValidateTopic(sub.Topic); err != nil {
				return errcode.Errorf(errcode.IllegalTopic, "%v", err)
			}
			if err := validSubscription(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// clusteringGroups are the heartbeat's consumer groups that share
// messages (those get retry and dead-letter topics).
func (hb *Heartbeat) clusteringGroups() []string {
	var out []string
	for _, cd := range hb.Consumers {
		if cd.Model == Clustering {
			out = append(out, cd.Group)
		}
	}
	return out
}

// Notice is something the broker tells a connected client: exactly one
// field is set.
type Notice struct {
	// ConsumerIDsChanged names a group whose member list changed: its
	// consumers rebalance.
	ConsumerIDsChanged string
	// CheckTransaction asks a producer for a transaction's outcome.
	CheckTransaction *txn.Check
}

// noticeBuffer is how many notices wait for a slow client before new ones
// are dropped (clients rebalance and transactions are checked again
// periodically anyway).
const noticeBuffer = 16

// Session is one connected client. A front end opens it with Connect on
// the client's first heartbeat, hands it later heartbeats, delivers its
// Notices to the client and closes it when the connection ends.
type Session struct {
	b        *Broker
	id       string
	notices  chan Notice
	since    time.Time // when the session opened
	lastSeen time.Time
	conn     ConnInfo
	groups   map[string]ConsumerData
	producer map[string]bool
}

// Connect registers a client by its first heartbeat.
func (b *Broker) Connect(hb Heartbeat) (*Session, error) {
	if err := hb.Validate(); err != nil {
		return nil, err
	}
	s := &Session{b: b, notices: make(chan Notice, noticeBuffer), since: time.Now()}
	b.retry.EnsureRetryTopics(hb.clusteringGroups())
	b.clients.heartbeat(s, hb, time.Now())
	return s, nil
}

// Heartbeat applies a later heartbeat of the session's client; one that
// names another client or carries illegal names is ignored.
func (s *Session) Heartbeat(hb Heartbeat) {
	if hb.ClientID != s.id || hb.Validate() != nil {
		return
	}
	s.b.retry.EnsureRetryTopics(hb.clusteringGroups())
	s.b.clients.heartbeat(s, hb, time.Now())
}

// Notices delivers what the broker tells the client.
func (s *Session) Notices() <-chan Notice { return s.notices }

// Done is closed when the broker stops: the front end ends the
// connection.
func (s *Session) Done() <-chan struct{} { return s.b.ctx.Done() }

// Close unregisters the client; its groups rebalance.
func (s *Session) Close() { s.b.clients.disconnect(s) }

// groupInfo is a consumer group as the broker sees it.
type groupInfo struct {
	model         MessageModel
	orderly       bool
	subscriptions map[string]Subscription // by topic
	clients       map[string]*Session
}

// clientRegistry tracks connected clients and consumer groups.
type clientRegistry struct {
	mu      sync.Mutex
	clients map[*Session]bool
	groups  map[string]*groupInfo
}

func newClientRegistry() *clientRegistry {
	return &clientRegistry{clients: make(map[*Session]bool), groups: make(map[string]*groupInfo)}
}

// heartbeat applies a client's heartbeat; groups whose membership changed
// are notified.
func (r *clientRegistry) heartbeat(c *Session, hb Heartbeat, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients[c] = true
	c.lastSeen = now
	c.id = hb.ClientID
	if hb.Conn != (ConnInfo{}) {
		c.conn = hb.Conn
	}
	c.producer = make(map[string]bool, len(hb.ProducerGroups))
	for _, g := range hb.ProducerGroups {
		c.producer[g] = true
	}
	next := make(map[string]ConsumerData, len(hb.Consumers))
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
			gi = &groupInfo{clients: make(map[string]*Session), subscriptions: make(map[string]Subscription)}
			r.groups[g] = gi
		}
		gi.model = cd.Model
		gi.orderly = cd.Orderly
		for _, s := range cd.Subscriptions {
			gi.subscriptions[s.Topic] = s
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
func (r *clientRegistry) leaveLocked(c *Session, g string) bool {
	gi := r.groups[g]
	if gi == nil || gi.clients[c.id] != c {
		return false
	}
	delete(gi.clients, c.id)
	return true
}

// disconnect removes a client (its connection ended or it expired).
func (r *clientRegistry) disconnect(c *Session) {
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
func (r *clientRegistry) notifyLocked(g string) {
	gi := r.groups[g]
	if gi == nil {
		return
	}
	for _, c := range gi.clients {
		select {
		case c.notices <- Notice{ConsumerIDsChanged: g}:
		default: // the client rebalances periodically anyway
		}
	}
}

// expire drops clients silent for longer than ttl and returns them.
func (r *clientRegistry) expire(now time.Time, ttl time.Duration) []*Session {
	r.mu.Lock()
	var dead []*Session
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
func (r *clientRegistry) members(g string) []string {
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

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Group         string
	Model         MessageModel
	Orderly       bool
	Subscriptions []Subscription // sorted by topic
	ClientIDs     []string       // sorted
}

// groupList describes every connected consumer group.
func (r *clientRegistry) groupList() []GroupInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]GroupInfo, 0, len(r.groups))
	for name, gi := range r.groups {
		info := GroupInfo{Group: name, Model: gi.model, Orderly: gi.orderly}
		for _, sub := range gi.subscriptions {
			info.Subscriptions = append(info.Subscriptions, sub)
		}
		sort.Slice(info.Subscriptions, func(i, j int) bool { return info.Subscriptions[i].Topic < info.Subscriptions[j].Topic })
		for id := range gi.clients {
			info.ClientIDs = append(info.ClientIDs, id)
		}
		sort.Strings(info.ClientIDs)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// subscribedTopics returns the topics a group subscribes to.
func (r *clientRegistry) subscribedTopics(g string) []string {
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
func (r *clientRegistry) known(g string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups[g] != nil
}

// producersOf returns the connected clients that said (in their last
// heartbeat) they are producers of group, sorted by client id.
func (r *clientRegistry) producersOf(group string) []*Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Session
	for c := range r.clients {
		if c.producer[group] {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id }) // c.id changes under r.mu
	return out
}
