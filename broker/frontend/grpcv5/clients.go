package grpcv5

import (
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
)

// A RocketMQ 5 client is known by its x-mq-client-id. It opens a Telemetry
// stream to the broker and sends its Settings there (producer: its topics;
// consumer: its group and subscriptions), heartbeats every 10 s and says
// NotifyClientTermination when it stops (but never closes its streams).
// The client table keeps, per client id: the Settings, the open Telemetry
// streams, when it was last heard of, and a core session (broker.Connect)
// opened at its first Settings, so that the core knows it: a producer's
// topics are its producer groups (Apache's proxy uses the topic as the
// producer group, and so do sends: PGROUP = topic), which routes the
// transaction check-backs of those topics to it, and a consumer is a
// member of its group for the admin listings. The session's notices go
// out on the client's newest Telemetry stream. A client not heard of for
// the broker's ClientExpiry (120 s) is dropped like one that terminated:
// its session closes, its streams end and its auto-renewed in-flight POP
// messages are released.

// maxProducerTopics bounds the topics a producer's sends add to its
// session (beyond those its Settings name).
const maxProducerTopics = 64

// sweepEvery is the longest time between two expiry sweeps.
const sweepEvery = 10 * time.Second

// clientTable is the connected clients by id.
type clientTable struct {
	s      *Service
	expiry time.Duration

	mu        sync.Mutex
	clients   map[string]*client
	sweepOnce sync.Once
}

func newClientTable(s *Service, expiry time.Duration) *clientTable {
	if expiry <= 0 {
		expiry = 120 * time.Second
	}
	return &clientTable{s: s, expiry: expiry, clients: make(map[string]*client)}
}

// client is one client id's state.
type client struct {
	id string
	// owner is the access key of the caller that first used the id (ACL
	// on): calls naming the id with another key are refused (auth.go).
	owner string

	mu        sync.Mutex
	lastSeen  time.Time
	language  string
	version   string
	addr      string // the remote address of its latest call
	namespace string
	settings  *v2.Settings     // the client's own, as last received (nil before)
	group     string           // a consumer's group, folded
	hb        broker.Heartbeat // what the core was last told
	sess      *broker.Session  // nil before the first Settings
	streams   []*telemetryStream
	changed   chan struct{} // closed and replaced when streams or sess change
	dropped   bool
	gone      chan struct{} // closed when the client is dropped
}

// touch returns the client of m.clientID (m.clientID is not empty),
// creating it, and records that it was heard of now.
func (t *clientTable) touch(m callMeta) *client {
	t.sweepOnce.Do(func() { go t.sweep() })
	now := time.Now()
	t.mu.Lock()
	c := t.clients[m.clientID]
	if c == nil {
		c = &client{id: m.clientID, owner: m.accessKey, changed: make(chan struct{}), gone: make(chan struct{})}
		t.clients[m.clientID] = c
	}
	t.mu.Unlock()
	c.mu.Lock()
	c.lastSeen = now
	if m.language != "" {
		c.language, c.version = m.language, m.version
	}
	if m.peer.IsValid() {
		c.addr = m.peer.String()
	}
	if m.namespace != "" {
		c.namespace = m.namespace
	}
	c.mu.Unlock()
	return c
}

// get returns a known client, or nil.
func (t *clientTable) get(id string) *client {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clients[id]
}

// drop forgets a client: its session closes (the core forgets its groups),
// its streams end, and the POP messages it had auto-renewed become visible
// again soon.
func (t *clientTable) drop(c *client, why string) {
	t.mu.Lock()
	if t.clients[c.id] == c {
		delete(t.clients, c.id)
	}
	t.mu.Unlock()
	c.mu.Lock()
	if c.dropped {
		c.mu.Unlock()
		return
	}
	c.dropped = true
	sess := c.sess
	c.sess = nil
	c.mu.Unlock()
	// The core forgets the client before its streams end.
	if sess != nil {
		sess.Close()
	}
	t.s.releaseClient(c.id)
	c.mu.Lock()
	close(c.gone)
	c.signalLocked()
	lang, ver, group := c.language, c.version, c.group
	c.mu.Unlock()
	t.s.log.Debug("client dropped", zap.String("client", c.id), zap.String("why", why),
		zap.String("language", lang), zap.String("version", ver), zap.String("group", group))
}

// sweep drops clients silent for longer than the expiry, until the broker
// stops.
func (t *clientTable) sweep() {
	tick := time.NewTicker(min(t.expiry/4, sweepEvery))
	defer tick.Stop()
	for {
		select {
		case <-t.s.b.Stopping():
			return
		case now := <-tick.C:
			t.mu.Lock()
			var dead []*client
			for _, c := range t.clients {
				c.mu.Lock()
				if now.Sub(c.lastSeen) > t.expiry {
					dead = append(dead, c)
				}
				c.mu.Unlock()
			}
			t.mu.Unlock()
			for _, c := range dead {
				t.drop(c, "expired")
			}
		}
	}
}

// releaseClient tells the core's POP that a client is gone: the in-flight
// messages it had auto-renewed become visible again after about 1 s.
func (s *Service) releaseClient(id string) { s.b.ReleaseClient(id) }

// isConsumer reports whether a client type is a consumer's.
func isConsumer(t v2.ClientType) bool {
	return t == v2.ClientType_PUSH_CONSUMER || t == v2.ClientType_SIMPLE_CONSUMER || t == v2.ClientType_LITE_PUSH_CONSUMER
}

// signalLocked wakes the stream loops waiting on c.changed.
func (c *client) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// apply gives the core the client's heartbeat hb, opening the client's
// session at the first one.
func (c *client) apply(b *broker.Broker, hb broker.Heartbeat) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return errorf(v2.Code_BAD_REQUEST, "client %s has terminated", c.id)
	}
	if err := hb.Validate(); err != nil {
		return err
	}
	hb.Conn = c.connLocked()
	c.hb = hb
	if c.sess != nil {
		c.sess.Heartbeat(hb)
		return nil
	}
	sess, err := b.Connect(hb)
	if err != nil {
		return err
	}
	c.sess = sess
	c.signalLocked()
	return nil
}

// beat records a heartbeat: the core hears of the client again.
func (c *client) beat() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		c.hb.Conn = c.connLocked()
		c.sess.Heartbeat(c.hb)
	}
}

// connLocked describes the client's connection for the core's listings;
// the caller holds c.mu.
func (c *client) connLocked() broker.ConnInfo {
	return broker.ConnInfo{RemoteAddr: c.addr, Language: c.language, Version: c.version, Protocol: broker.ProtocolGRPCv5}
}

// addProducerTopic makes topic one of the producer groups of a client
// that sends transactional messages to it, so that their check-backs
// reach it even when its Settings do not name the topic.
func (c *client) addProducerTopic(b *broker.Broker, topic string) {
	c.mu.Lock()
	if c.sess == nil || c.dropped || slices.Contains(c.hb.ProducerGroups, topic) || len(c.hb.ProducerGroups) >= maxProducerTopics {
		c.mu.Unlock()
		return
	}
	hb := c.hb
	hb.ProducerGroups = append(slices.Clip(hb.ProducerGroups), topic)
	c.mu.Unlock()
	_ = c.apply(b, hb) // a topic that passed the send's checks is a legal group
}

// kind is the client's type as its Settings say (CLIENT_TYPE_UNSPECIFIED
// before them).
func (c *client) kind() v2.ClientType {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings.GetClientType()
}

// attach registers an open Telemetry stream: the newest one carries the
// session's notices.
func (c *client) attach(st *telemetryStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streams = append(c.streams, st)
	c.signalLocked()
}

// detach forgets a stream that ended.
func (c *client) detach(st *telemetryStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.streams, st); i >= 0 {
		c.streams = slices.Delete(c.streams, i, i+1)
		c.signalLocked()
	}
}

// noticesFor returns the session's notices when st is the stream that
// delivers them (nil otherwise), and the channel closed at the next change.
func (c *client) noticesFor(st *telemetryStream) (<-chan broker.Notice, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped || c.sess == nil || len(c.streams) == 0 || c.streams[len(c.streams)-1] != st {
		return nil, c.changed
	}
	return c.sess.Notices(), c.changed
}
