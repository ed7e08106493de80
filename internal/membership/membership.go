package membership

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// Role is what a node is in the cluster.
type Role string

// Roles of Bolide's daemons.
const (
	RoleNameServer Role = "namesrv"
	RoleBroker     Role = "broker"
)

// Profiles of failure-detection timings.
const (
	ProfileLAN  = "lan"  // memberlist's DefaultLANConfig
	ProfileFast = "fast" // short timeouts for tests on loopback
)

// leaveTimeout bounds how long Close waits for its leave message to go out.
const leaveTimeout = time.Second

// Member is one node of the pool as this node sees it.
type Member struct {
	Name       string
	GossipAddr string // host:port of the node's memberlist
	Role       Role
	Meta       map[string]string
}

// Options configure a Node.
type Options struct {
	// NodeName must be unique in the pool. Default: Role+"-"+Meta["addr"],
	// or Role+"-"+the gossip address when Meta has no "addr".
	NodeName string
	// BindAddr is the host:port memberlist binds for both TCP and UDP.
	// Port 0 picks a port that is free for both.
	BindAddr string
	// AdvertiseAddr, if set, is the host:port other nodes reach this one
	// at (behind NAT, or when BindAddr is 0.0.0.0 on a host with no private
	// address). Default: derived by memberlist from BindAddr.
	AdvertiseAddr string
	Role          Role
	// Meta is announced to every node; see the Meta* keys. Its encoding
	// must fit in MaxMetaSize bytes.
	Meta map[string]string
	// Seeds are gossip addresses joined by New. Failing to reach them is
	// logged, not fatal: others may join this node later.
	Seeds []string
	// Profile is ProfileLAN (default) or ProfileFast.
	Profile string
	// SecretKey, when set, encrypts and authenticates every gossip
	// message (memberlist's AES-GCM keyring: 16, 24 or 32 bytes; every
	// member needs the same). Messages without it, or under another key,
	// are dropped and counted as bad packets: a node with another key
	// does not join.
	SecretKey []byte
	// OnJoin and OnLeave report other nodes joining, and leaving or being
	// declared dead. They run on one goroutine of this package, in the order
	// memberlist saw the events, never concurrently; they may call Members
	// but must return quickly (a slow callback delays the next events) and
	// must not call Close or Abort.
	OnJoin, OnLeave func(Member)
}

// DefaultOptions returns options for a node on loopback with the LAN
// profile. Role must still be set.
func DefaultOptions() Options {
	return Options{BindAddr: "127.0.0.1:0", Profile: ProfileLAN}
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch o.Role {
	case RoleNameServer, RoleBroker:
	default:
		return fmt.Errorf("membership: role must be %q or %q, not %q", RoleNameServer, RoleBroker, o.Role)
	}
	if _, _, err := splitBindAddr(o.BindAddr); err != nil {
		return err
	}
	if o.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(o.AdvertiseAddr); err != nil {
			return fmt.Errorf("membership: advertise address %q: %w", o.AdvertiseAddr, err)
		}
	}
	switch o.Profile {
	case "", ProfileLAN, ProfileFast:
	default:
		return fmt.Errorf("membership: profile must be %q or %q, not %q", ProfileLAN, ProfileFast, o.Profile)
	}
	if _, err := encodeMeta(o.Role, o.Meta); err != nil {
		return err
	}
	if n := len(o.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("membership: secret key of %d bytes: want 16, 24 or 32", n)
	}
	return nil
}

// Node is this process's member of the gossip pool.
type Node struct {
	opts   Options
	lg     *zap.Logger
	ml     *memberlist.Memberlist
	bridge *logBridge
	events *eventQueue
	view   *memberView
	name   string
	addr   string // advertised gossip address

	mu     sync.Mutex // mu serialises Close and Abort
	closed bool       // guarded by mu
}

// New validates opts, binds the gossip port, starts memberlist and joins
// the seeds, if any.
func New(opts Options, lg *zap.Logger) (*Node, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	meta, _ := encodeMeta(opts.Role, opts.Meta) // checked by Validate
	n := &Node{
		opts:   opts,
		lg:     lg,
		bridge: newLogBridge(lg.Named("memberlist")),
	}
	n.events = newEventQueue(opts.OnJoin, opts.OnLeave)
	n.view = newMemberView()
	ml, err := n.create(meta)
	if err != nil {
		n.events.stop()
		return nil, err
	}
	n.ml = ml
	// Nobody knows this node before it joins, so memberlist is not yet
	// updating its own entry: read it now, once.
	self := ml.LocalNode()
	n.name, n.addr = self.Name, self.Address()
	lg.Info("gossip node started", zap.String("name", n.Name()),
		zap.String("gossip_addr", n.GossipAddr()), zap.String("role", string(opts.Role)),
		zap.String("profile", n.profile()))
	if len(opts.Seeds) > 0 {
		if k, err := n.Join(opts.Seeds...); err != nil {
			lg.Warn("gossip: could not reach any seed", zap.Strings("seeds", opts.Seeds), zap.Error(err))
		} else {
			lg.Info("gossip: joined", zap.Strings("seeds", opts.Seeds), zap.Int("reached", k))
		}
	}
	return n, nil
}

// create binds memberlist, retrying with another port when the port
// picked for BindAddr ":0" was taken in the meantime.
func (n *Node) create(meta []byte) (*memberlist.Memberlist, error) {
	host, port, err := splitBindAddr(n.opts.BindAddr)
	if err != nil {
		return nil, err
	}
	attempts := 1
	if port == 0 {
		attempts = 10
	}
	for i := 0; ; i++ {
		p := port
		if p == 0 {
			if p, err = freePort(host); err != nil {
				return nil, err
			}
		}
		conf, err := n.config(host, p, meta)
		if err != nil {
			return nil, err
		}
		ml, err := memberlist.Create(conf)
		if err == nil {
			return ml, nil
		}
		if !isAddrInUse(err) || i+1 >= attempts {
			return nil, fmt.Errorf("membership: bind %s: %w", net.JoinHostPort(host, strconv.Itoa(p)), err)
		}
		n.lg.Debug("gossip port taken, retrying", zap.Int("port", p), zap.Error(err))
	}
}

func (n *Node) profile() string {
	if n.opts.Profile == "" {
		return ProfileLAN
	}
	return n.opts.Profile
}

// config builds memberlist's configuration for one bind attempt.
func (n *Node) config(host string, port int, meta []byte) (*memberlist.Config, error) {
	var conf *memberlist.Config
	switch n.profile() {
	case ProfileFast:
		conf = fastConfig()
	default:
		conf = memberlist.DefaultLANConfig()
		// A daemon restarted on another gossip port keeps its name; let it
		// take the name back once the old incarnation is dead.
		conf.DeadNodeReclaimTime = 30 * time.Second
	}
	conf.Name = n.opts.NodeName
	if conf.Name == "" {
		conf.Name = defaultName(n.opts.Role, n.opts.Meta[MetaAddr], net.JoinHostPort(host, strconv.Itoa(port)))
	}
	conf.BindAddr = host
	conf.BindPort = port
	conf.AdvertisePort = port
	if n.opts.AdvertiseAddr != "" {
		ah, ap, _ := net.SplitHostPort(n.opts.AdvertiseAddr)
		p, err := strconv.Atoi(ap)
		if err != nil {
			return nil, fmt.Errorf("membership: advertise address %q: bad port", n.opts.AdvertiseAddr)
		}
		conf.AdvertiseAddr = ah
		if p != 0 {
			conf.AdvertisePort = p
		}
	}
	if len(n.opts.SecretKey) > 0 {
		conf.SecretKey = n.opts.SecretKey
		conf.GossipVerifyIncoming = true
		conf.GossipVerifyOutgoing = true
	}
	d := &delegate{meta: meta, self: conf.Name, events: n.events, view: n.view}
	conf.Delegate = d
	conf.Events = d
	conf.LogOutput = nil
	conf.Logger = n.bridge.stdLogger()
	return conf, nil
}

// defaultName names a node after its role and service address (or its
// gossip address when it has none). A wildcard host (0.0.0.0, ::) is
// replaced by the host name, so that daemons listening on every interface
// of different hosts do not share a name.
func defaultName(role Role, serviceAddr, gossipAddr string) string {
	id := serviceAddr
	if id == "" {
		id = gossipAddr
	}
	if host, port, err := net.SplitHostPort(id); err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if hn, err := os.Hostname(); err == nil && hn != "" {
				id = net.JoinHostPort(hn, port)
			}
		}
	}
	return string(role) + "-" + id
}

// fastConfig declares a silent node dead in one to two seconds on loopback:
// a probe every 200 ms with a 100 ms timeout, then a suspicion of 600 ms
// (up to 1.8 s in a pool of three or more until another member confirms
// it). Suspicion multiplier 3 rather than 2 leaves a suspected node time to
// refute on a loaded test machine.
func fastConfig() *memberlist.Config {
	c := memberlist.DefaultLocalConfig() // TCPTimeout 1 s
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.SuspicionMult = 3
	c.SuspicionMaxTimeoutMult = 3
	c.GossipInterval = 50 * time.Millisecond
	c.PushPullInterval = 2 * time.Second
	c.GossipToTheDeadTime = 2 * time.Second
	c.DeadNodeReclaimTime = time.Second
	return c
}

// Name is this node's name in the pool.
func (n *Node) Name() string { return n.name }

// GossipAddr is the host:port other nodes join this node at (the advertised
// address). Brokers send it in RegisterBroker so that a NameServer can match
// membership events to registrations.
func (n *Node) GossipAddr() string { return n.addr }

// Join contacts the given gossip addresses and merges their view of the
// pool. It returns how many were reached; an error means none was.
func (n *Node) Join(seeds ...string) (int, error) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return 0, errors.New("membership: node closed")
	}
	return n.ml.Join(seeds)
}

// Members returns the alive members, this node included, sorted by name.
// The list is this node's own copy, kept from memberlist's events:
// memberlist's Members() hands out nodes it goes on mutating.
func (n *Node) Members() []Member {
	return n.view.list()
}

// Close announces the leave (waiting at most a second for it to go out),
// then stops memberlist and the event goroutine. Close is idempotent.
func (n *Node) Close() error {
	return n.stop(true)
}

// Abort stops the node at once without announcing a leave, as a crashed
// process would: the others declare it dead after their failure-detection
// timeout. It is for fault-injection tests; daemons call Close. Abort after
// Close (or Close after Abort) does nothing.
func (n *Node) Abort() error {
	return n.stop(false)
}

func (n *Node) stop(leave bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if leave {
		if err := n.ml.Leave(leaveTimeout); err != nil {
			n.lg.Warn("gossip: leave not confirmed", zap.Error(err))
		}
	}
	err := n.ml.Shutdown()
	n.events.stop()
	n.bridge.closed.Store(true)
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	n.lg.Info("gossip node stopped", zap.String("name", n.name), zap.Bool("left", leave))
	return nil
}

// toMember copies a memberlist node; the caller must not keep nd.
func toMember(nd *memberlist.Node) Member {
	role, meta, _ := decodeMeta(nd.Meta)
	return Member{
		Name:       nd.Name,
		GossipAddr: nd.Address(),
		Role:       role,
		Meta:       maps.Clone(meta),
	}
}

// delegate answers memberlist's callbacks. memberlist calls the event
// methods with its node lock held, the only time its node may be read: they
// copy it into the view and queue the event.
type delegate struct {
	meta   []byte
	self   string
	events *eventQueue
	view   *memberView
}

func (d *delegate) NodeMeta(limit int) []byte { return d.meta }

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(nd *memberlist.Node) {
	d.view.put(toMember(nd))
	if nd.Name != d.self {
		d.events.push(event{join: true, m: toMember(nd)})
	}
}

// NotifyLeave reports a node that left or was declared dead. memberlist
// does not tell the two apart here (its Node.State is not kept up to date).
func (d *delegate) NotifyLeave(nd *memberlist.Node) {
	d.view.remove(nd.Name)
	if nd.Name != d.self {
		d.events.push(event{m: toMember(nd)})
	}
}

// NotifyUpdate reports a meta change: the view follows, no event is sent
// (Bolide nodes do not change their meta while running).
func (d *delegate) NotifyUpdate(nd *memberlist.Node) {
	d.view.put(toMember(nd))
}

// memberView is the set of alive members, kept from memberlist's events.
type memberView struct {
	mu sync.Mutex // mu protects m
	m  map[string]Member
}

func newMemberView() *memberView { return &memberView{m: make(map[string]Member)} }

func (v *memberView) put(m Member) {
	v.mu.Lock()
	v.m[m.Name] = m
	v.mu.Unlock()
}

func (v *memberView) remove(name string) {
	v.mu.Lock()
	delete(v.m, name)
	v.mu.Unlock()
}

func (v *memberView) list() []Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Member, 0, len(v.m))
	for _, name := range slices.Sorted(maps.Keys(v.m)) {
		m := v.m[name]
		m.Meta = maps.Clone(m.Meta)
		out = append(out, m)
	}
	return out
}
