package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/frame"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Perm is a topic's permission bits (RocketMQ's PermName).
type Perm int32

// Permission bits.
const (
	PermInherit  Perm = 1
	PermWrite    Perm = 2
	PermRead     Perm = 4
	PermPriority Perm = 8
	// PermReadWrite is the usual permission of a topic.
	PermReadWrite = PermRead | PermWrite
)

// Readable reports the read bit.
func (p Perm) Readable() bool { return p&PermRead != 0 }

// Writable reports the write bit.
func (p Perm) Writable() bool { return p&PermWrite != 0 }

// TopicRoute is where a topic lives: its queues on each broker group and
// the groups' addresses.
type TopicRoute struct {
	Topic   string
	Queues  []QueueData
	Brokers []BrokerData
}

// QueueData is one broker group's queues of a topic.
type QueueData struct {
	BrokerName   string
	ReadQueues   int32
	WriteQueues  int32
	Perm         Perm
	TopicSysFlag int32
}

// BrokerData is a broker group: addresses by broker id (0 = master).
type BrokerData struct {
	Cluster    string
	BrokerName string
	Addrs      map[int64]string
}

// MasterAddr returns the master's address, or "".
func (b BrokerData) MasterAddr() string { return b.Addrs[0] }

// ReadAddr returns the master's address, or when there is no master the
// slave with the lowest id; "" when the group has no address.
func (b BrokerData) ReadAddr() string {
	if a := b.Addrs[0]; a != "" {
		return a
	}
	_, a := b.lowestSlave()
	return a
}

// lowestSlave returns the slave (id > 0) with the lowest id and its
// address, or (0, "") when the group has none.
func (b BrokerData) lowestSlave() (int64, string) {
	best := int64(0)
	for id, a := range b.Addrs {
		if id > 0 && a != "" && (best == 0 || id < best) {
			best = id
		}
	}
	if best == 0 {
		return 0, ""
	}
	return best, b.Addrs[best]
}

func brokerDataFromProto(bd *pb.BrokerData) BrokerData {
	d := BrokerData{Cluster: bd.GetCluster(), BrokerName: bd.GetBrokerName(), Addrs: make(map[int64]string, len(bd.GetBrokerAddrs()))}
	for id, a := range bd.GetBrokerAddrs() {
		if a != "" {
			d.Addrs[id] = a
		}
	}
	return d
}

func routeFromProto(topic string, r *pb.TopicRoute) *TopicRoute {
	tr := &TopicRoute{Topic: topic}
	for _, q := range r.GetQueueDatas() {
		tr.Queues = append(tr.Queues, QueueData{
			BrokerName: q.GetBrokerName(), ReadQueues: q.GetReadQueueNums(), WriteQueues: q.GetWriteQueueNums(),
			Perm: Perm(q.GetPerm()), TopicSysFlag: q.GetTopicSysFlag(),
		})
	}
	for _, b := range r.GetBrokerDatas() {
		tr.Brokers = append(tr.Brokers, brokerDataFromProto(b))
	}
	sort.Slice(tr.Queues, func(i, j int) bool { return tr.Queues[i].BrokerName < tr.Queues[j].BrokerName })
	sort.Slice(tr.Brokers, func(i, j int) bool { return tr.Brokers[i].BrokerName < tr.Brokers[j].BrokerName })
	return tr
}

// routeInfo is a cached route with the queue lists clients use.
type routeInfo struct {
	route   *TopicRoute
	brokers map[string]BrokerData
	// publish: writable queues of groups with a master, interleaved across
	// groups (a0 b0 a1 b1 ...) so that round-robin alternates brokers.
	publish []MessageQueue
	// ordered: the same queues sorted by broker name and queue id, the
	// stable order ordered sends hash into.
	ordered []MessageQueue
	// subscribe: readable queues sorted by broker name and queue id.
	subscribe []MessageQueue
	fetched   time.Time
}

func newRouteInfo(r *TopicRoute, now time.Time) *routeInfo {
	ri := &routeInfo{route: r, brokers: make(map[string]BrokerData, len(r.Brokers)), fetched: now}
	for _, b := range r.Brokers {
		ri.brokers[b.BrokerName] = b
	}
	var perBroker [][]MessageQueue
	for _, q := range r.Queues {
		if q.Perm.Readable() {
			for i := int32(0); i < q.ReadQueues; i++ {
				ri.subscribe = append(ri.subscribe, MessageQueue{Topic: r.Topic, BrokerName: q.BrokerName, QueueID: i})
			}
		}
		if !q.Perm.Writable() || ri.brokers[q.BrokerName].MasterAddr() == "" {
			continue
		}
		var qs []MessageQueue
		for i := int32(0); i < q.WriteQueues; i++ {
			qs = append(qs, MessageQueue{Topic: r.Topic, BrokerName: q.BrokerName, QueueID: i})
		}
		perBroker = append(perBroker, qs)
		ri.ordered = append(ri.ordered, qs...)
	}
	for i := 0; ; i++ {
		added := false
		for _, qs := range perBroker {
			if i < len(qs) {
				ri.publish = append(ri.publish, qs[i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	sort.Slice(ri.subscribe, func(i, j int) bool { return lessQueue(ri.subscribe[i], ri.subscribe[j]) })
	sort.Slice(ri.ordered, func(i, j int) bool { return lessQueue(ri.ordered[i], ri.ordered[j]) })
	return ri
}

// noWritableQueue explains a route with no queue to send to: when a group
// with writable queues has no master (it is failing over, or its master is
// down) the error matches ErrServiceNotAvailable and sends retry it; else
// the topic is not writable (ErrNoRoute alone).
func (ri *routeInfo) noWritableQueue() error {
	var groups []string
	for _, q := range ri.route.Queues {
		if q.Perm.Writable() && q.WriteQueues > 0 && ri.brokers[q.BrokerName].MasterAddr() == "" {
			groups = append(groups, q.BrokerName)
		}
	}
	if len(groups) == 0 {
		return fmt.Errorf("%w %q: no writable queue", ErrNoRoute, ri.route.Topic)
	}
	return fmt.Errorf("%w %q: %w", ErrNoRoute, ri.route.Topic, &noMasterError{groups: groups})
}

// nameServers calls a list of NameServers, starting with the last one that
// answered and moving on when one cannot be reached.
type nameServers struct {
	addrs   []string
	pool    *connPool
	frames  *framePool // route lookups; nil: over gRPC
	timeout time.Duration
	good    atomic.Uint32
}

// each calls fn on the NameServers' addresses in turn, from the preferred
// one, until fn returns nil or an error for which next returns false; the
// result is the last error, or ErrNoNameServer joined with every error. An
// error of grpcOf ends it at once.
func (n *nameServers) each(ctx context.Context, fn func(ctx context.Context, addr string) error, next func(error) bool) error {
	start := int(n.good.Load()) % len(n.addrs)
	var errs []error
	for i := range n.addrs {
		idx := (start + i) % len(n.addrs)
		addr := n.addrs[idx]
		cctx, cancel := withTimeout(ctx, n.timeout)
		err := fn(cctx, addr)
		cancel()
		if err == nil {
			n.good.Store(uint32(idx))
			return nil
		}
		if pe := (poolError{}); errors.As(err, &pe) {
			return pe.error
		}
		if ctx.Err() != nil {
			return fmt.Errorf("NameServer %s: %w", addr, errors.Join(ctx.Err(), err))
		}
		errs = append(errs, fmt.Errorf("NameServer %s: %w", addr, err))
		if !next(err) {
			return errs[len(errs)-1]
		}
	}
	return fmt.Errorf("%w: %w", ErrNoNameServer, errors.Join(errs...))
}

// grpcOf returns the gRPC client of the NameServer at addr, made on first
// use: a client whose route lookups go over frames never makes one. Its
// error (the client is closed, the address is unusable) ends each's walk.
func (n *nameServers) grpcOf(addr string) (pb.NameServerClient, error) {
	c, err := n.pool.nameServer(addr)
	if err != nil {
		return nil, poolError{err}
	}
	return c, nil
}

// poolError is an error of the connection pool, which no other NameServer
// would answer differently.
type poolError struct{ error }

func (e poolError) Unwrap() error { return e.error }

// call tries NameServers until one answers (a coded error is an answer).
func (n *nameServers) call(ctx context.Context, fn func(ctx context.Context, c pb.NameServerClient) error) error {
	return n.each(ctx, func(ctx context.Context, addr string) error {
		c, err := n.grpcOf(addr)
		if err != nil {
			return err
		}
		return fn(ctx, c)
	}, func(err error) bool { return !isCoded(err) })
}

// getRoute asks the NameServers for a topic's route. NameServers are
// independent, so one that does not know the topic yet does not end the
// search: the topic does not exist only when none knows it (and known,
// the broker groups of its last route, are registered: see noRoute).
// "Who routes the topic" and "who is registered" are two questions; a
// broker that registers between them would make a topic it serves look
// deleted, so that answer is checked by asking for the route once more.
func (n *nameServers) getRoute(ctx context.Context, topic string, known []string) (*TopicRoute, error) {
	route, err := n.askRoute(ctx, topic, known)
	if errors.Is(err, ErrTopicNotExist) && ctx.Err() == nil {
		if again, err2 := n.askRoute(ctx, topic, known); err2 == nil {
			return again, nil
		}
	}
	return route, err
}

// askRoute is one round of getRoute's questions.
func (n *nameServers) askRoute(ctx context.Context, topic string, known []string) (*TopicRoute, error) {
	var route *TopicRoute
	notExist := false
	err := n.each(ctx, func(ctx context.Context, addr string) error {
		resp, err := n.lookUp(ctx, addr, topic)
		if err != nil {
			return err
		}
		if err := fromStatus(resp.GetStatus()); err != nil {
			return err
		}
		r := routeFromProto(topic, resp.GetRoute())
		if len(r.Queues) == 0 {
			return codeErr(pb.Code_TOPIC_NOT_EXIST, "topic %q has no queues", topic)
		}
		route = r
		return nil
	}, func(err error) bool {
		if errors.Is(err, ErrTopicNotExist) {
			notExist = true
		}
		return !isRefusal(err)
	})
	if err == nil {
		return route, nil
	}
	if isRefusal(err) {
		return nil, err
	}
	if notExist {
		return nil, n.noRoute(ctx, topic, known)
	}
	return nil, fmt.Errorf("%w %q: %w", ErrNoRoute, topic, err)
}

// lookUp asks the NameServer at addr for topic's route: over the frame
// protocol when the client uses it and that NameServer speaks it, else
// over gRPC.
func (n *nameServers) lookUp(ctx context.Context, addr string, topic string) (*pb.GetRouteResponse, error) {
	req := &pb.GetRouteRequest{Topic: topic}
	resp := new(pb.GetRouteResponse)
	if ok, err := n.frames.call(ctx, 0, addr, frame.MethodGetRoute, req, resp); ok {
		return resp, err
	}
	c, err := n.grpcOf(addr)
	if err != nil {
		return nil, err
	}
	return c.GetRoute(ctx, req)
}

// noRoute explains a topic no NameServer routes. NameServers drop the
// routes of a broker group once none of its brokers is registered, so
// "no route" is not always "no such topic": when the groups that served
// it (known, from an earlier route), or for a topic never seen every
// broker, are not registered, they are down or still starting and the
// error matches ErrBrokerUnreachable; otherwise ErrTopicNotExist.
func (n *nameServers) noRoute(ctx context.Context, topic string, known []string) error {
	live, err := n.liveGroups(ctx)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrNoRoute, topic, ErrTopicNotExist)
	}
	// A broker that is down has left no trace on the NameServers: a topic
	// never seen that no registered broker serves may live on one.
	notExist := fmt.Errorf("%w %q: %w: no registered broker serves it (unless its brokers are down or still starting)",
		ErrNoRoute, topic, ErrTopicNotExist)
	if len(known) > 0 {
		for _, g := range known {
			if live[g] {
				return notExist // its broker is up without it: deleted
			}
		}
		what := "broker group " + known[0] + ", which serves it, is"
		if len(known) > 1 {
			what = "broker groups " + strings.Join(known, ", ") + ", which serve it, are"
		}
		return fmt.Errorf("%w %q: %w: %s not registered with the NameServers (down or still starting)",
			ErrNoRoute, topic, ErrBrokerUnreachable, what)
	}
	if len(live) == 0 {
		return fmt.Errorf("%w %q: %w: no broker is registered with the NameServers (down or still starting)",
			ErrNoRoute, topic, ErrBrokerUnreachable)
	}
	return notExist
}

// liveGroups returns the broker groups with a registered broker, as the
// first NameServer that answers knows them.
func (n *nameServers) liveGroups(ctx context.Context) (map[string]bool, error) {
	live := make(map[string]bool)
	err := n.call(ctx, func(ctx context.Context, c pb.NameServerClient) error {
		resp, err := c.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		if err := fromStatus(resp.GetStatus()); err != nil {
			return err
		}
		for _, l := range resp.GetLive() {
			live[l.GetBrokerName()] = true
		}
		return nil
	})
	return live, err
}

// routeCache caches topic routes. A route is fetched on first use, again
// when marked stale after an error, and by refreshAll; when a fetch fails
// the last known route is kept — also when the NameServers no longer route
// the topic because its brokers are not registered (down or restarting):
// calls then go to the last known addresses and fail, or succeed as soon
// as a broker is back there, with no wait for its registration.
type routeCache struct {
	ns  *nameServers
	log *zap.Logger
	now func() time.Time

	mu       sync.Mutex
	topics   map[string]*routeEntry
	brokers  map[string]BrokerData
	inflight map[string]*routeFetch
}

type routeEntry struct {
	info  *routeInfo
	stale bool
}

type routeFetch struct {
	done chan struct{}
	info *routeInfo
	err  error
}

func newRouteCache(ns *nameServers, log *zap.Logger) *routeCache {
	return &routeCache{
		ns: ns, log: log, now: time.Now,
		topics: make(map[string]*routeEntry), brokers: make(map[string]BrokerData),
		inflight: make(map[string]*routeFetch),
	}
}

// get returns the route of topic, fetching it when it is not cached or is
// stale.
func (c *routeCache) get(ctx context.Context, topic string) (*routeInfo, error) {
	c.mu.Lock()
	e := c.topics[topic]
	if e != nil && !e.stale {
		c.mu.Unlock()
		return e.info, nil
	}
	c.mu.Unlock()
	info, err := c.fetch(ctx, topic)
	if err == nil {
		return info, nil
	}
	if e != nil && !errors.Is(err, ErrTopicNotExist) {
		c.log.Warn("route refresh failed, using the cached route", zap.String("topic", topic), zap.Error(err))
		return e.info, nil
	}
	return nil, err
}

// fetch asks the NameServers, sharing one call among concurrent callers.
func (c *routeCache) fetch(ctx context.Context, topic string) (*routeInfo, error) {
	c.mu.Lock()
	if f := c.inflight[topic]; f != nil {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.info, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &routeFetch{done: make(chan struct{})}
	c.inflight[topic] = f
	c.mu.Unlock()

	var known []string
	if ri := c.cached(topic); ri != nil {
		known = ri.brokerNames()
	}
	r, err := c.ns.getRoute(ctx, topic, known)
	c.mu.Lock()
	delete(c.inflight, topic)
	switch {
	case err == nil:
		f.info = newRouteInfo(r, c.now())
		c.topics[topic] = &routeEntry{info: f.info}
		for _, b := range r.Brokers {
			c.brokers[b.BrokerName] = b
		}
	case errors.Is(err, ErrTopicNotExist):
		delete(c.topics, topic)
	}
	f.err = err
	c.mu.Unlock()
	close(f.done)
	return f.info, f.err
}

// brokerNames lists the route's broker groups, sorted.
func (ri *routeInfo) brokerNames() []string {
	out := make([]string, 0, len(ri.brokers))
	for name := range ri.brokers {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// cached returns the cached route of topic without fetching (nil if none).
func (c *routeCache) cached(topic string) *routeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.topics[topic]; e != nil {
		return e.info
	}
	return nil
}

// markStale makes the next get of topic fetch the route again.
func (c *routeCache) markStale(topic string) {
	c.mu.Lock()
	if e := c.topics[topic]; e != nil {
		e.stale = true
	}
	c.mu.Unlock()
}

// refreshAll fetches every cached route again.
func (c *routeCache) refreshAll(ctx context.Context) {
	c.mu.Lock()
	topics := make([]string, 0, len(c.topics))
	for t := range c.topics {
		topics = append(topics, t)
	}
	c.mu.Unlock()
	for _, t := range topics {
		if _, err := c.fetch(ctx, t); err != nil && ctx.Err() == nil {
			c.log.Warn("route refresh failed", zap.String("topic", t), zap.Error(err))
		}
	}
}

// topicsOf lists the cached topics routed to broker group name.
func (c *routeCache) topicsOf(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for t, e := range c.topics {
		if _, ok := e.info.brokers[name]; ok {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// broker returns the last known addresses of a broker group.
func (c *routeCache) broker(name string) (BrokerData, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.brokers[name]
	return b, ok
}
