package nameserver

import (
	"maps"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// MasterID is the broker id of a group's master.
const MasterID = 0

// QueueData is one broker group's queues of a topic.
type QueueData struct {
	BrokerName  string
	ReadQueues  int32
	WriteQueues int32
	Perm        int32
	SysFlag     int32
	// MessageType is the topic's message.type attribute on this group
	// ("" when it has none).
	MessageType string
}

// BrokerData is a broker group: its addresses by broker id (0 = master).
type BrokerData struct {
	Cluster    string
	BrokerName string
	Addrs      map[int64]string
}

// TopicConfig is a topic as a broker registers it.
type TopicConfig struct {
	Name        string
	ReadQueues  int32
	WriteQueues int32
	Perm        int32
	SysFlag     int32
	// MessageType is the topic's message.type attribute (RocketMQ 5's
	// topic message type; "" when it has none).
	MessageType string
}

// DataVersion identifies a broker's topic table; it changes whenever the
// table does.
type DataVersion struct {
	Timestamp int64
	Counter   int64
}

// Registration is one RegisterBroker call.
type Registration struct {
	Cluster    string
	BrokerName string
	Addr       string
	ID         int64
	HAAddr     string
	AdminAddr  string
	Version    string
	GossipAddr string
	// Epoch fences old masters: a master (id 0) registering with an epoch
	// below the highest seen for its broker name is refused (NOT_MASTER).
	Epoch  int64
	Topics []TopicConfig
	// FifoGroups are the subscription groups the broker declares as
	// consuming in order. A master's list replaces the group's previous one
	// at every registration (DataVersion does not gate it).
	FifoGroups []string
	// DataVersion gates topic updates: a master's topics are applied when it
	// first registers, when its id changes, or when this version differs
	// from the last one. nil applies them every time.
	DataVersion *DataVersion
	// Timeout is this broker's heartbeat timeout (0: the table's default).
	Timeout time.Duration
	// Delta: Topics holds only the topics changed since BaseVersion and
	// Removed those deleted since; DataVersion (required) is the version
	// with them applied and TopicCount the topics the broker has. It is
	// applied only when the version held for the address, under the same
	// id, is BaseVersion; otherwise nothing changes and the result says
	// TopicsStale (the broker then registers its whole table).
	Delta       bool
	BaseVersion DataVersion
	Removed     []string
	TopicCount  int

	// guard refuses a registration for a broker name and id held by another
	// registered address (see Server: the identity check), except when the
	// holder is takeover (found unreachable) or, for a master, when the
	// registration's epoch is higher than the holder's (a promoted slave).
	guard    bool
	takeover string
}

// RegisterResult is what a registering broker is told back.
type RegisterResult struct {
	// MasterAddr and MasterHAAddr are the group master's addresses, for a
	// slave when the master is registered.
	MasterAddr   string
	MasterHAAddr string
	// New is true when this address was not registered before.
	New bool
	// Displaced is the address that held this broker id until now, if any.
	Displaced string
	// TopicsApplied is true when a master's topics replaced its queue data.
	TopicsApplied bool
	// HeldBy is, for a registration refused because another live address
	// holds its broker name and id, that address.
	HeldBy string
	// TopicsStale is true when a delta registration was not applied: its
	// base is not the version held (or the routes of one of its topics
	// were deleted here since). Nothing changed.
	TopicsStale bool
}

// LiveBroker is what the table knows of one registered broker.
type LiveBroker struct {
	Cluster     string
	BrokerName  string
	ID          int64
	Addr        string
	HAAddr      string
	AdminAddr   string
	Version     string
	GossipAddr  string
	LastUpdate  time.Time
	Timeout     time.Duration
	DataVersion DataVersion
	TopicCount  int
	Epoch       int64
	// wholeNext makes a delta that changes topics stale: the routes of a
	// topic of this master were deleted (DeleteTopic), and the next change
	// of its table brings them back with the whole table, as it did when
	// every registration carried the whole table.
	wholeNext bool
}

// Route is a topic's route: queue data per broker group and those groups.
// Both lists are sorted by broker name.
type Route struct {
	Queues  []QueueData
	Brokers []BrokerData
}

// ClusterInfo is the whole broker side of the table.
type ClusterInfo struct {
	Brokers  map[string]BrokerData // by broker name
	Clusters map[string][]string   // cluster -> sorted broker names
	Live     []LiveBroker          // sorted by address
}

// Routes is the route table. All methods are safe for concurrent use; one
// RWMutex guards every map, as RocketMQ's RouteInfoManager does. Invariant:
// every address in a group's Addrs has exactly one live entry, and every
// live entry's address appears in exactly one group, under one id.
type Routes struct {
	defaultTimeout time.Duration

	mu       sync.RWMutex                    // mu protects the maps below
	topics   map[string]map[string]QueueData // topic -> broker name -> queues
	groups   map[string]*brokerGroup         // broker name -> group
	clusters map[string]map[string]struct{}  // cluster -> broker names
	live     map[string]*LiveBroker          // broker addr -> liveness
	// epochs is the highest master epoch seen per broker name. It outlives
	// the group's registrations so that an old master coming back after
	// its successor registered is still fenced (until this NameServer
	// restarts: NameServers keep no state).
	epochs map[string]int64
}

type brokerGroup struct {
	cluster string
	name    string
	addrs   map[int64]string
	// fifoGroups are the ordered-consumption groups its master declared
	// last.
	fifoGroups map[string]struct{}
	// topics are the topics the group has queue data of (in Routes.topics).
	topics map[string]struct{}
}

// NewRoutes returns an empty table whose brokers expire after
// defaultTimeout unless they register with their own timeout.
func NewRoutes(defaultTimeout time.Duration) *Routes {
	return &Routes{
		defaultTimeout: defaultTimeout,
		topics:         make(map[string]map[string]QueueData),
		groups:         make(map[string]*brokerGroup),
		clusters:       make(map[string]map[string]struct{}),
		live:           make(map[string]*LiveBroker),
		epochs:         make(map[string]int64),
	}
}

// Register records or refreshes a broker at time now. Invalid input is
// rejected with a coded error (INVALID_PARAMETER, ILLEGAL_TOPIC) and
// changes nothing.
func (r *Routes) Register(reg Registration, now time.Time) (RegisterResult, error) {
	if err := validateRegistration(&reg); err != nil {
		return RegisterResult{}, err
	}
	timeout := reg.Timeout
	if timeout == 0 {
		timeout = r.defaultTimeout
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if reg.ID == MasterID {
		// Fencing: a master whose epoch is below the newest master's was
		// replaced (a slave was promoted); it must not take writes again.
		if hi, ok := r.epochs[reg.BrokerName]; ok && reg.Epoch < hi {
			return RegisterResult{}, wire.Errorf(pb.Code_NOT_MASTER,
				"broker %s at %s is fenced: its epoch %d is lower than epoch %d of the group's newest master",
				reg.BrokerName, reg.Addr, reg.Epoch, hi)
		}
	}
	// Identity: after fencing (a fenced master is told NOT_MASTER), before
	// anything changes.
	if reg.guard {
		if lb, ok := r.holderLocked(reg.BrokerName, reg.ID); ok && lb.Addr != reg.Addr && lb.Addr != reg.takeover &&
			!(reg.ID == MasterID && reg.Epoch > lb.Epoch) {
			return RegisterResult{HeldBy: lb.Addr}, identityHeldError(reg, lb)
		}
	}
	if g, ok := r.groups[reg.BrokerName]; ok && g.cluster != reg.Cluster {
		// A group lives in one cluster. Its only broker may move to another
		// (a restart with a new config); otherwise this is a misconfiguration.
		if len(g.addrs) != 1 || !slices.Contains(slices.Collect(maps.Values(g.addrs)), reg.Addr) {
			return RegisterResult{}, wire.Errorf(pb.Code_INVALID_PARAMETER,
				"broker %q is registered in cluster %q, not %q", reg.BrokerName, g.cluster, reg.Cluster)
		}
		r.removeAddrLocked(reg.Addr)
	}
	var res RegisterResult
	prev := r.live[reg.Addr]
	if reg.Delta && (prev == nil || prev.BrokerName != reg.BrokerName || prev.Cluster != reg.Cluster || prev.ID != reg.ID ||
		prev.DataVersion != reg.BaseVersion || prev.wholeNext && (len(reg.Topics) > 0 || len(reg.Removed) > 0)) {
		return RegisterResult{TopicsStale: true}, nil
	}
	if prev != nil && prev.BrokerName != reg.BrokerName {
		// The address now belongs to another group (the old broker died
		// without unregistering and a new one took its port).
		r.removeAddrLocked(reg.Addr)
		prev = nil
	}
	res.New = prev == nil

	g := r.groupLocked(reg.Cluster, reg.BrokerName)
	for id, a := range g.addrs {
		if a == reg.Addr && id != reg.ID {
			delete(g.addrs, id) // same broker, new id: a slave promoted or a master demoted
		}
	}
	if old, ok := g.addrs[reg.ID]; ok && old != reg.Addr {
		delete(r.live, old) // another broker takes this id over
		res.Displaced = old
	}
	g.addrs[reg.ID] = reg.Addr

	changed := prev == nil || prev.ID != reg.ID || reg.DataVersion == nil || prev.DataVersion != *reg.DataVersion
	topicCount := len(reg.Topics)
	if reg.Delta {
		topicCount = reg.TopicCount
	}
	lb := &LiveBroker{
		Cluster:    reg.Cluster,
		BrokerName: reg.BrokerName,
		ID:         reg.ID,
		Addr:       reg.Addr,
		HAAddr:     reg.HAAddr,
		AdminAddr:  reg.AdminAddr,
		Version:    reg.Version,
		GossipAddr: reg.GossipAddr,
		LastUpdate: now,
		Timeout:    timeout,
		TopicCount: topicCount,
		Epoch:      reg.Epoch,
	}
	if prev != nil && !changed {
		lb.wholeNext = prev.wholeNext
	}
	if reg.ID == MasterID {
		r.epochs[reg.BrokerName] = max(r.epochs[reg.BrokerName], reg.Epoch)
	}
	if reg.DataVersion != nil {
		lb.DataVersion = *reg.DataVersion
	}
	r.live[reg.Addr] = lb

	if reg.ID == MasterID {
		g.fifoGroups = make(map[string]struct{}, len(reg.FifoGroups))
		for _, name := range reg.FifoGroups {
			g.fifoGroups[name] = struct{}{}
		}
	}
	if reg.ID == MasterID && changed {
		if reg.Delta {
			r.applyDeltaLocked(g, reg.Topics, reg.Removed)
		} else {
			r.applyTopicsLocked(g, reg.Topics)
		}
		res.TopicsApplied = true
	}
	if reg.ID != MasterID {
		if m, ok := g.addrs[MasterID]; ok {
			res.MasterAddr = m
			if ml := r.live[m]; ml != nil {
				res.MasterHAAddr = ml.HAAddr
			}
		}
	}
	return res, nil
}

func validateRegistration(reg *Registration) error {
	switch {
	case reg.Cluster == "":
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "cluster is empty")
	case reg.BrokerName == "":
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "broker name is empty")
	case reg.ID < 0:
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "broker id %d is negative", reg.ID)
	case reg.Timeout < 0:
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "heartbeat timeout %v is negative", reg.Timeout)
	case reg.Epoch < 0:
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "epoch %d is negative", reg.Epoch)
	case reg.Delta && reg.DataVersion == nil:
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "a delta registration has no data version")
	case reg.Delta && reg.TopicCount < 0:
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "topic count %d is negative", reg.TopicCount)
	}
	if err := checkAddr("broker address", reg.Addr); err != nil {
		return err
	}
	seen := make(map[string]bool, len(reg.Topics))
	for _, t := range reg.Topics {
		if err := message.ValidateTopic(t.Name); err != nil {
			return wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
		}
		if seen[t.Name] {
			return wire.Errorf(pb.Code_INVALID_PARAMETER, "topic %q registered twice", t.Name)
		}
		seen[t.Name] = true
		if t.ReadQueues < 0 || t.WriteQueues < 0 {
			return wire.Errorf(pb.Code_INVALID_PARAMETER, "topic %q: negative queue count", t.Name)
		}
	}
	for _, name := range reg.Removed {
		if err := message.ValidateTopic(name); err != nil {
			return wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
		}
		if seen[name] {
			return wire.Errorf(pb.Code_INVALID_PARAMETER, "topic %q both registered and removed", name)
		}
		seen[name] = true
	}
	return nil
}

func checkAddr(what, addr string) error {
	if addr == "" {
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "%s is empty", what)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "%s %q is not host:port", what, addr)
	}
	return nil
}

// groupLocked returns the group, creating it (and its cluster entry).
func (r *Routes) groupLocked(cluster, name string) *brokerGroup {
	g := r.groups[name]
	if g == nil {
		g = &brokerGroup{cluster: cluster, name: name, addrs: make(map[int64]string), topics: make(map[string]struct{})}
		r.groups[name] = g
	}
	set := r.clusters[cluster]
	if set == nil {
		set = make(map[string]struct{})
		r.clusters[cluster] = set
	}
	set[name] = struct{}{}
	return g
}

// applyTopicsLocked makes topics the complete list of the group's queue
// data: a master's registration carries its whole topic table, so a topic it
// no longer lists loses the group. The work is in the topics registered and
// those the group had, not in every topic of the table.
func (r *Routes) applyTopicsLocked(g *brokerGroup, topics []TopicConfig) {
	keep := make(map[string]struct{}, len(topics))
	for i := range topics {
		keep[topics[i].Name] = struct{}{}
		r.putQueuesLocked(g, &topics[i])
	}
	for topic := range g.topics {
		if _, ok := keep[topic]; !ok {
			r.dropQueuesLocked(topic, g)
		}
	}
}

// applyDeltaLocked applies a delta registration: the changed topics' queue
// data, and the removed topics' dropped.
func (r *Routes) applyDeltaLocked(g *brokerGroup, topics []TopicConfig, removed []string) {
	for i := range topics {
		r.putQueuesLocked(g, &topics[i])
	}
	for _, topic := range removed {
		r.dropQueuesLocked(topic, g)
	}
}

// putQueuesLocked sets the group's queue data of a topic.
func (r *Routes) putQueuesLocked(g *brokerGroup, t *TopicConfig) {
	m := r.topics[t.Name]
	if m == nil {
		m = make(map[string]QueueData, 1)
		r.topics[t.Name] = m
	}
	m[g.name] = QueueData{BrokerName: g.name, ReadQueues: t.ReadQueues, WriteQueues: t.WriteQueues, Perm: t.Perm,
		SysFlag: t.SysFlag, MessageType: t.MessageType}
	g.topics[t.Name] = struct{}{}
}

// dropQueuesLocked removes a group's queues of a topic, and the topic when
// no group serves it any more.
func (r *Routes) dropQueuesLocked(topic string, g *brokerGroup) {
	delete(g.topics, topic)
	m := r.topics[topic]
	if m == nil {
		return
	}
	delete(m, g.name)
	if len(m) == 0 {
		delete(r.topics, topic)
	}
}

// Holder returns the live broker registered under a broker name and id.
func (r *Routes) Holder(brokerName string, id int64) (LiveBroker, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.holderLocked(brokerName, id)
}

func (r *Routes) holderLocked(brokerName string, id int64) (LiveBroker, bool) {
	g := r.groups[brokerName]
	if g == nil {
		return LiveBroker{}, false
	}
	addr, ok := g.addrs[id]
	if !ok {
		return LiveBroker{}, false
	}
	lb := r.live[addr]
	if lb == nil {
		return LiveBroker{}, false
	}
	return *lb, true
}

// identityHeldError is the refusal of a registration for a broker name and
// id that a live broker at another address holds.
func identityHeldError(reg Registration, holder LiveBroker) error {
	return wire.Errorf(pb.Code_INVALID_PARAMETER,
		"broker identity %s/%s id %d is held by a live broker at %s; refusing the registration from %s: "+
			"give this broker another --broker-name or --broker-id, or stop the broker at %s first",
		holder.Cluster, reg.BrokerName, reg.ID, holder.Addr, reg.Addr, holder.Addr)
}

// removeAddrLocked removes a registered address; a group left without
// addresses goes, with its queue data and, if it was the last, its cluster.
func (r *Routes) removeAddrLocked(addr string) (LiveBroker, bool) {
	lb, ok := r.live[addr]
	if !ok {
		return LiveBroker{}, false
	}
	delete(r.live, addr)
	g := r.groups[lb.BrokerName]
	if g == nil {
		return *lb, true
	}
	for id, a := range g.addrs {
		if a == addr {
			delete(g.addrs, id)
		}
	}
	if len(g.addrs) > 0 {
		return *lb, true
	}
	delete(r.groups, g.name)
	if set := r.clusters[g.cluster]; set != nil {
		delete(set, g.name)
		if len(set) == 0 {
			delete(r.clusters, g.cluster)
		}
	}
	for topic := range g.topics {
		r.dropQueuesLocked(topic, g)
	}
	return *lb, true
}

// Unregister removes the broker at addr, as a broker does on a clean stop.
// It reports whether anything was removed: unregistering an unknown
// address, or one that now belongs to another group, changes nothing.
func (r *Routes) Unregister(cluster, brokerName, addr string, id int64) (bool, error) {
	switch {
	case cluster == "":
		return false, wire.Errorf(pb.Code_INVALID_PARAMETER, "cluster is empty")
	case brokerName == "":
		return false, wire.Errorf(pb.Code_INVALID_PARAMETER, "broker name is empty")
	case id < 0:
		return false, wire.Errorf(pb.Code_INVALID_PARAMETER, "broker id %d is negative", id)
	}
	if err := checkAddr("broker address", addr); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lb := r.live[addr]
	if lb == nil || lb.BrokerName != brokerName || lb.Cluster != cluster {
		return false, nil
	}
	_, ok := r.removeAddrLocked(addr)
	return ok, nil
}

// Sweep evicts every broker whose last registration is older than its
// timeout at time now, and returns them sorted by address.
func (r *Routes) Sweep(now time.Time) []LiveBroker {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []LiveBroker
	for addr, lb := range r.live {
		if now.Sub(lb.LastUpdate) > lb.Timeout {
			if gone, ok := r.removeAddrLocked(addr); ok {
				out = append(out, gone)
			}
		}
	}
	sortLive(out)
	return out
}

// RemoveByGossipAddr removes every broker registered with the given gossip
// address, when membership reports that node gone, and returns them. A
// broker that registered no gossip address is matched by its service
// address instead, when serviceAddr is not empty.
func (r *Routes) RemoveByGossipAddr(gossipAddr, serviceAddr string) []LiveBroker {
	if gossipAddr == "" && serviceAddr == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []LiveBroker
	for addr, lb := range r.live {
		match := lb.GossipAddr != "" && lb.GossipAddr == gossipAddr
		if lb.GossipAddr == "" && serviceAddr != "" && addr == serviceAddr {
			match = true
		}
		if match {
			if gone, ok := r.removeAddrLocked(addr); ok {
				out = append(out, gone)
			}
		}
	}
	sortLive(out)
	return out
}

// Route returns a topic's route; TOPIC_NOT_EXIST when no group serves it.
func (r *Routes) Route(topic string) (Route, error) {
	if err := message.ValidateTopic(topic); err != nil {
		return Route{}, wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	m := r.topics[topic]
	if len(m) == 0 {
		return Route{}, wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %q not exist", topic)
	}
	var rt Route
	for _, name := range slices.Sorted(maps.Keys(m)) {
		rt.Queues = append(rt.Queues, m[name])
		if g := r.groups[name]; g != nil {
			rt.Brokers = append(rt.Brokers, g.data())
		}
	}
	return rt, nil
}

// FifoGroup reports whether the master of any of the named broker groups
// declared the subscription group as consuming in order.
func (r *Routes) FifoGroup(group string, brokerNames ...string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, name := range brokerNames {
		if g := r.groups[name]; g != nil {
			if _, ok := g.fifoGroups[group]; ok {
				return true
			}
		}
	}
	return false
}

func (g *brokerGroup) data() BrokerData {
	return BrokerData{Cluster: g.cluster, BrokerName: g.name, Addrs: maps.Clone(g.addrs)}
}

// Topics returns every topic some group serves, sorted.
func (r *Routes) Topics() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.topics))
}

// TopicsByCluster returns, sorted, every topic some group of cluster
// serves; none for an unknown cluster.
func (r *Routes) TopicsByCluster(cluster string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set := r.clusters[cluster]
	var out []string
	for topic, m := range r.topics {
		for name := range m {
			if _, ok := set[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// ClusterInfo returns a copy of the broker side of the table.
func (r *Routes) ClusterInfo() ClusterInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ci := ClusterInfo{
		Brokers:  make(map[string]BrokerData, len(r.groups)),
		Clusters: make(map[string][]string, len(r.clusters)),
		Live:     make([]LiveBroker, 0, len(r.live)),
	}
	for name, g := range r.groups {
		ci.Brokers[name] = g.data()
	}
	for c, set := range r.clusters {
		ci.Clusters[c] = slices.Sorted(maps.Keys(set))
	}
	for _, lb := range r.live {
		ci.Live = append(ci.Live, *lb)
	}
	sortLive(ci.Live)
	return ci
}

// DeleteTopic removes a topic's queue data: of every group, or of the
// groups of one cluster. TOPIC_NOT_EXIST when there was nothing to remove.
// A master that still has the topic brings it back when its topic table
// next changes; deleting it on the brokers is the admin's job.
func (r *Routes) DeleteTopic(topic, cluster string) error {
	if err := message.ValidateTopic(topic); err != nil {
		return wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.topics[topic]
	if len(m) == 0 {
		return wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %q not exist", topic)
	}
	removed := 0
	for name := range m {
		if g := r.groups[name]; g != nil && (cluster == "" || g.cluster == cluster) {
			r.dropQueuesLocked(topic, g)
			if ml := r.live[g.addrs[MasterID]]; ml != nil {
				ml.wholeNext = true
			}
			removed++
		} else if g == nil && cluster == "" {
			delete(m, name)
		}
	}
	if len(m) == 0 {
		delete(r.topics, topic)
	}
	if removed == 0 {
		return wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %q not served by cluster %q", topic, cluster)
	}
	return nil
}

// Live returns the live entry of a broker address.
func (r *Routes) Live(addr string) (LiveBroker, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	lb, ok := r.live[addr]
	if !ok {
		return LiveBroker{}, false
	}
	return *lb, true
}

func sortLive(l []LiveBroker) {
	sort.Slice(l, func(i, j int) bool { return l[i].Addr < l[j].Addr })
}
