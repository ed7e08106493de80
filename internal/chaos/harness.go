package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/faultproxy"
	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Config describes a cluster: NameServers with embedded controllers and
// one broker group.
type Config struct {
	// Dir holds every process's data and log.
	Dir string
	// Group is the broker group's name.
	Group       string
	Controllers int // 3
	Brokers     int // 3
	// Replication is "sync" or "async"; InSyncReplicas the slaves a sync
	// send needs.
	Replication    string
	InSyncReplicas int
	SegmentSize    int64
	// Controller timings (lease < broker timeout) and the brokers' beat.
	Lease, BrokerTimeout, RaftHeartbeat, RaftElection, ControllerHeartbeat time.Duration
	// Extra flags.
	NameServerArgs, BrokerArgs []string
}

// DefaultConfig is the suite's cluster: 3 controllers, 3 brokers, sync
// replication with one in-sync slave, test timings.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, Group: "chaos", Controllers: 3, Brokers: 3, Replication: "sync", InSyncReplicas: 1,
		SegmentSize: 16 << 20, Lease: time.Second, BrokerTimeout: 1500 * time.Millisecond,
		RaftHeartbeat: 300 * time.Millisecond, RaftElection: 300 * time.Millisecond, ControllerHeartbeat: 200 * time.Millisecond}
}

// NameServer is a NameServer process with its controller.
type NameServer struct {
	Name     string // controller id: n1, n2, ...
	Addr     string
	RaftAddr string
	Dir      string
	Proc     *Proc
}

// Broker is a broker process of the group.
type Broker struct {
	Name string // b<ID>
	ID   int64
	// Addr is its client address (fixed across restarts), HAAddr its real
	// HA listener; HAProxy stands in front of HAAddr and is what it
	// advertises.
	Addr     string
	HAAddr   string
	HAProxy  *faultproxy.Proxy
	StoreDir string
	// CtlProxies stand between the broker and each NameServer (its
	// registrations and controller streams).
	CtlProxies []*faultproxy.Proxy
	Proc       *Proc
}

// Cluster is a running cluster. Methods are safe for concurrent use.
type Cluster struct {
	cfg         Config
	NameServers []*NameServer
	Brokers     []*Broker

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// binDir returns the directory of the daemons: $BOLIDE_BIN (make build's
// bin/) when set, else a build of the current tree.
func binDir(t testing.TB) string {
	if d := os.Getenv("BOLIDE_BIN"); d != "" {
		return d
	}
	return cluster.Binaries(t)
}

// freePorts picks n loopback ports for the daemons (fixed ports keep
// addresses across restarts; freeport.Pick).
func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		p, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func hostPort(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

func dur(d time.Duration) string { return d.String() }

// StartCluster starts the NameServers, then the brokers, and waits until
// the group has a master. Everything is stopped at t's cleanup.
func StartCluster(t testing.TB, cfg Config) (*Cluster, error) {
	bins := binDir(t)
	c := &Cluster{cfg: cfg, conns: make(map[string]*grpc.ClientConn)}
	t.Cleanup(c.Close)
	// The daemons' ports and the fault proxies' are reserved together: a
	// proxy bound to port 0 after the reservation could take a daemon's.
	nDaemon := 2*cfg.Controllers + 2*cfg.Brokers
	ports, err := freePorts(nDaemon + cfg.Brokers*(1+cfg.Controllers))
	if err != nil {
		return nil, err
	}
	proxyPorts := ports[nDaemon:]
	nextProxy := func() string {
		p := proxyPorts[0]
		proxyPorts = proxyPorts[1:]
		return hostPort(p)
	}
	var peers []string
	for i := range cfg.Controllers {
		ns := &NameServer{Name: fmt.Sprintf("n%d", i+1), Addr: hostPort(ports[2*i]), RaftAddr: hostPort(ports[2*i+1])}
		ns.Dir = filepath.Join(cfg.Dir, ns.Name)
		c.NameServers = append(c.NameServers, ns)
		peers = append(peers, ns.Name+"="+ns.RaftAddr)
	}
	for _, ns := range c.NameServers {
		args := []string{"--listen", ns.Addr, "--gossip", "off", "--admin-listen", "off",
			"--controller", "--controller-id", ns.Name, "--controller-peers", strings.Join(peers, ","),
			"--controller-raft-listen", ns.RaftAddr, "--controller-dir", filepath.Join(ns.Dir, "controller"),
			"--raft-heartbeat", dur(cfg.RaftHeartbeat), "--raft-election-timeout", dur(cfg.RaftElection),
			"--controller-broker-timeout", dur(cfg.BrokerTimeout), "--lease", dur(cfg.Lease)}
		args = append(args, cfg.NameServerArgs...)
		if err := os.MkdirAll(ns.Dir, 0o755); err != nil {
			return nil, err
		}
		ns.Proc = newProc(ns.Name, filepath.Join(bins, "bolide-nameserver"), cfg.Dir, args...)
	}
	if err := startAll(len(c.NameServers), func(i int) error { return c.NameServers[i].Proc.Start() }); err != nil {
		return c, err
	}
	base := 2 * cfg.Controllers
	for i := range cfg.Brokers {
		b := &Broker{Name: fmt.Sprintf("b%d", i+1), ID: int64(i + 1), Addr: hostPort(ports[base+2*i]), HAAddr: hostPort(ports[base+2*i+1])}
		b.StoreDir = filepath.Join(cfg.Dir, b.Name)
		if b.HAProxy, err = faultproxy.New(nextProxy(), b.HAAddr, nil); err != nil {
			return c, err
		}
		b.HAProxy.Start()
		var ctl []string
		for _, ns := range c.NameServers {
			p, err := faultproxy.New(nextProxy(), ns.Addr, nil)
			if err != nil {
				return c, err
			}
			p.Start()
			b.CtlProxies = append(b.CtlProxies, p)
			ctl = append(ctl, p.Addr())
		}
		c.Brokers = append(c.Brokers, b)
		args := []string{"--listen", b.Addr, "--ha-listen", b.HAAddr, "--ha-advertise", b.HAProxy.Addr(),
			"--namesrv", strings.Join(ctl, ","), "--controller-addr", strings.Join(ctl, ","),
			"--controller-heartbeat", dur(cfg.ControllerHeartbeat),
			"--broker-name", cfg.Group, "--broker-id", strconv.FormatInt(b.ID, 10), "--store-dir", b.StoreDir,
			"--segment-size", strconv.FormatInt(cfg.SegmentSize, 10), "--flush", "async",
			"--replication", cfg.Replication, "--in-sync-replicas", strconv.Itoa(max(cfg.InSyncReplicas, 1)),
			"--register-interval", "500ms", "--gossip", "off", "--admin-listen", "off",
			"--ha-heartbeat", "200ms", "--ha-timeout", "2s", "--metadata-sync-interval", "200ms"}
		args = append(args, cfg.BrokerArgs...)
		b.Proc = newProc(b.Name, filepath.Join(bins, "bolide-broker"), cfg.Dir, args...)
	}
	if err := startAll(len(c.Brokers), func(i int) error { return c.Brokers[i].Proc.Start() }); err != nil {
		return c, err
	}
	return c, nil
}

func startAll(n int, start func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = start(i) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every process and proxy.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, b := range c.Brokers {
		wg.Add(1)
		go func() { defer wg.Done(); b.Proc.Term(3 * time.Second) }()
	}
	wg.Wait()
	for _, ns := range c.NameServers {
		wg.Add(1)
		go func() { defer wg.Done(); ns.Proc.Term(3 * time.Second) }()
	}
	wg.Wait()
	for _, b := range c.Brokers {
		if b.HAProxy != nil {
			_ = b.HAProxy.Close()
		}
		for _, p := range b.CtlProxies {
			_ = p.Close()
		}
	}
	c.mu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
}

// NameServerAddrs are the addresses clients use.
func (c *Cluster) NameServerAddrs() []string {
	out := make([]string, len(c.NameServers))
	for i, ns := range c.NameServers {
		out[i] = ns.Addr
	}
	return out
}

func (c *Cluster) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	return cc, nil
}

// Broker returns the broker named name (b1, ...), nil if none.
func (c *Cluster) Broker(name string) *Broker {
	for _, b := range c.Brokers {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// BrokerID returns the broker of replica id.
func (c *Cluster) BrokerID(id int64) *Broker {
	for _, b := range c.Brokers {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// HostName maps a store host ("127.0.0.1:port", as in offset message ids
// and records) to the broker's name ("" when unknown).
func (c *Cluster) HostName(host string) string {
	for _, b := range c.Brokers {
		if b.Addr == host {
			return b.Name
		}
	}
	return ""
}

// NameServer returns the NameServer (controller) named name.
func (c *Cluster) NameServer(name string) *NameServer {
	for _, ns := range c.NameServers {
		if ns.Name == name {
			return ns
		}
	}
	return nil
}

// Describe asks one controller for DescribeController.
func (c *Cluster) Describe(ctx context.Context, ns *NameServer) (*pb.DescribeControllerResponse, error) {
	cc, err := c.conn(ns.Addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := pb.NewControllerClient(cc).DescribeController(ctx, &pb.DescribeControllerRequest{})
	if err != nil {
		return nil, err
	}
	return resp, wire.FromStatus(resp.GetStatus())
}

// Leader finds the controller that says it is the Raft leader.
func (c *Cluster) Leader(ctx context.Context) (*NameServer, *pb.DescribeControllerResponse, error) {
	var errs []error
	for _, ns := range c.NameServers {
		if !ns.Proc.Running() {
			continue
		}
		resp, err := c.Describe(ctx, ns)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ns.Name, err))
			continue
		}
		if resp.GetLeaderId() == ns.Name && resp.GetSelfId() == ns.Name {
			return ns, resp, nil
		}
	}
	return nil, nil, fmt.Errorf("no controller leader: %w", errors.Join(errs...))
}

// Group returns the group as the controller leader holds it.
func (c *Cluster) Group(ctx context.Context) (*pb.GroupState, error) {
	_, resp, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range resp.GetGroups() {
		if g.GetBrokerName() == c.cfg.Group {
			return g, nil
		}
	}
	return nil, fmt.Errorf("the controller leader knows no group %q", c.cfg.Group)
}

// Info asks a broker for GetBrokerInfo.
func (c *Cluster) Info(ctx context.Context, b *Broker) (*pb.GetBrokerInfoResponse, error) {
	cc, err := c.conn(b.Addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := pb.NewBrokerClient(cc).GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
	if err != nil {
		return nil, err
	}
	return resp, wire.FromStatus(resp.GetStatus())
}

// poll calls cond every 50 ms until it succeeds, ctx ends or d passes.
func poll(ctx context.Context, d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", d, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Master is the group's master: the controller leader names it and the
// broker says it is MASTER of that epoch.
func (c *Cluster) Master(ctx context.Context) (*Broker, int64, error) {
	g, err := c.Group(ctx)
	if err != nil {
		return nil, 0, err
	}
	b := c.BrokerID(g.GetMasterId())
	if b == nil {
		return nil, 0, fmt.Errorf("group has no master (master id %d, epoch %d)", g.GetMasterId(), g.GetMasterEpoch())
	}
	info, err := c.Info(ctx, b)
	if err != nil {
		return nil, 0, fmt.Errorf("master %s: %w", b.Name, err)
	}
	if r := info.GetReplication(); r.GetRole() != "MASTER" || r.GetEpoch() != g.GetMasterEpoch() {
		return nil, 0, fmt.Errorf("controller says %s is master of epoch %d, it says %s of epoch %d", b.Name, g.GetMasterEpoch(), r.GetRole(), r.GetEpoch())
	}
	return b, g.GetMasterEpoch(), nil
}

// WaitNewMaster waits up to d for a master of an epoch above after (any
// broker: a restarted master may be elected again, at a new epoch).
func (c *Cluster) WaitNewMaster(ctx context.Context, after int64, d time.Duration) (*Broker, int64, error) {
	var (
		m     *Broker
		epoch int64
	)
	err := poll(ctx, d, func() error {
		b, e, err := c.Master(ctx)
		if err != nil {
			return err
		}
		if e <= after {
			return fmt.Errorf("%s is still master of epoch %d", b.Name, e)
		}
		m, epoch = b, e
		return nil
	})
	return m, epoch, err
}

// WaitMaster waits up to d for a master other than not ("" any).
func (c *Cluster) WaitMaster(ctx context.Context, not string, d time.Duration) (*Broker, int64, error) {
	var (
		m     *Broker
		epoch int64
	)
	err := poll(ctx, d, func() error {
		b, e, err := c.Master(ctx)
		if err != nil {
			return err
		}
		if b.Name == not {
			return fmt.Errorf("%s is still master (epoch %d)", b.Name, e)
		}
		m, epoch = b, e
		return nil
	})
	return m, epoch, err
}

// WaitInSync waits until every broker is in the sync state set and holds
// the master's CommitLog end (load may continue: "holds" is within what
// the master wrote since its last look).
func (c *Cluster) WaitInSync(ctx context.Context, d time.Duration) (*Broker, error) {
	var master *Broker
	err := poll(ctx, d, func() error {
		m, _, err := c.Master(ctx)
		if err != nil {
			return err
		}
		g, err := c.Group(ctx)
		if err != nil {
			return err
		}
		if len(g.GetSyncStateSet()) != len(c.Brokers) {
			return fmt.Errorf("sync state set %v", g.GetSyncStateSet())
		}
		master = m
		return nil
	})
	return master, err
}

// WaitConverged waits, with no load running, until there is one master,
// every other broker is its slave with the same CommitLog end, and the
// master has dispatched everything.
func (c *Cluster) WaitConverged(ctx context.Context, d time.Duration) (*Broker, error) {
	var master *Broker
	err := poll(ctx, d, func() error {
		m, _, err := c.Master(ctx)
		if err != nil {
			return err
		}
		mi, err := c.Info(ctx, m)
		if err != nil {
			return err
		}
		if mi.GetDispatchBehindBytes() != 0 {
			return fmt.Errorf("master %s has %d bytes to dispatch", m.Name, mi.GetDispatchBehindBytes())
		}
		end := mi.GetCommitLogMaxOffset()
		for _, b := range c.Brokers {
			if b == m {
				continue
			}
			bi, err := c.Info(ctx, b)
			if err != nil {
				return fmt.Errorf("%s: %w", b.Name, err)
			}
			r := bi.GetReplication()
			if r.GetRole() != "SLAVE" || bi.GetCommitLogMaxOffset() != end {
				return fmt.Errorf("%s is %s (%s, %s) at %d, master %s at %d", b.Name, r.GetRole(), r.GetState(), r.GetLastError(), bi.GetCommitLogMaxOffset(), m.Name, end)
			}
		}
		master = m
		return nil
	})
	return master, err
}

// Isolate cuts a broker from every controller and NameServer and its
// slaves from it: its proxies drop everything (connections stay open, as
// in a partition).
func (c *Cluster) Isolate(b *Broker) {
	b.HAProxy.Blackhole(true)
	for _, p := range b.CtlProxies {
		p.Blackhole(true)
	}
}

// Heal ends Isolate: the connections that lived through it are reset (they
// have holes) and new ones pass.
func (c *Cluster) Heal(b *Broker) {
	for _, p := range append([]*faultproxy.Proxy{b.HAProxy}, b.CtlProxies...) {
		p.Cut()
		p.Blackhole(false)
	}
}

// CreateTopic creates topic on the master and waits until every
// NameServer routes it.
func (c *Cluster) CreateTopic(ctx context.Context, topic string, queues int32) error {
	m, _, err := c.WaitMaster(ctx, "", 30*time.Second)
	if err != nil {
		return err
	}
	return createTopicOn(ctx, c, m, topic, queues)
}

// createTopicOn creates topic on broker m and waits until every NameServer
// routes it.
func createTopicOn(ctx context.Context, c *Cluster, m *Broker, topic string, queues int32) error {
	cc, err := c.conn(m.Addr)
	if err != nil {
		return err
	}
	// A master just elected may not hold its write lease yet (NOT_MASTER
	// until its next controller heartbeat): ask again while it does not.
	create := func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := pb.NewBrokerClient(cc).CreateTopic(rctx, &pb.CreateTopicRequest{
			Topic: &pb.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}, Update: true})
		if err == nil {
			err = wire.FromStatus(resp.GetStatus())
		}
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for err = create(); errcode.Of(err) == errcode.NotMaster && time.Now().Before(deadline); err = create() {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("create topic on %s: %w", m.Name, err)
	}
	return poll(ctx, 20*time.Second, func() error {
		for _, ns := range c.NameServers {
			cc, err := c.conn(ns.Addr)
			if err != nil {
				return err
			}
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := pb.NewNameServerClient(cc).GetRoute(rctx, &pb.GetRouteRequest{Topic: topic})
			cancel()
			if err == nil {
				err = wire.FromStatus(resp.GetStatus())
			}
			if err != nil {
				return fmt.Errorf("%s: route of %s: %w", ns.Name, topic, err)
			}
			if len(resp.GetRoute().GetQueueDatas()) == 0 {
				return fmt.Errorf("%s routes %s nowhere", ns.Name, topic)
			}
		}
		return nil
	})
}

// Snapshot reads a master's replication state (just before a kill).
func (c *Cluster) Snapshot(ctx context.Context, m *Broker) (KillSnapshot, error) {
	s := KillSnapshot{Master: m.Name, SlaveAck: make(map[string]int64)}
	info, err := c.Info(ctx, m)
	if err != nil {
		return s, err
	}
	s.MasterEnd = info.GetCommitLogMaxOffset()
	for _, sl := range info.GetReplication().GetSlaves() {
		if b := c.BrokerID(sl.GetBrokerId()); b != nil {
			s.SlaveAck[b.Name] = sl.GetAckOffset()
		}
		s.LagBytes = max(s.LagBytes, sl.GetLagBytes())
	}
	return s, nil
}

// ReadFinal reads every queue of topic from offset 0 on broker m, and m's
// epoch entries.
func (c *Cluster) ReadFinal(ctx context.Context, m *Broker, topic string, queues int32) (*FinalLog, error) {
	info, err := c.Info(ctx, m)
	if err != nil {
		return nil, err
	}
	fin := &FinalLog{}
	for _, e := range info.GetReplication().GetEpochs() {
		fin.Epochs = append(fin.Epochs, EpochEntry{Epoch: e.GetEpoch(), Start: e.GetStartOffset()})
	}
	cc, err := c.conn(m.Addr)
	if err != nil {
		return nil, err
	}
	bc := pb.NewBrokerClient(cc)
	for q := int32(0); q < queues; q++ {
		off := int64(0)
		for {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := bc.Pull(rctx, &pb.PullRequest{Topic: topic, QueueId: q, Offset: off, MaxMessages: 1024, CommitOffset: -1})
			cancel()
			if err == nil {
				err = wire.FromStatus(resp.GetStatus())
			}
			if err != nil {
				return nil, fmt.Errorf("pull %s/%d at %d from %s: %w", topic, q, off, m.Name, err)
			}
			if resp.GetPullStatus() != pb.PullStatus_FOUND {
				if resp.GetPullStatus() == pb.PullStatus_OFFSET_ILLEGAL {
					return nil, fmt.Errorf("pull %s/%d at %d from %s: offset illegal (next %d)", topic, q, off, m.Name, resp.GetNextOffset())
				}
				break
			}
			for _, rec := range resp.GetRecords() {
				e, err := message.Decode(rec)
				if err != nil {
					return nil, fmt.Errorf("%s/%d at %d: %w", topic, q, off, err)
				}
				if e.QueueOffset != off {
					return nil, fmt.Errorf("%s/%d: record at queue offset %d where %d was expected", topic, q, e.QueueOffset, off)
				}
				id, ok := ParseBody(e.Body)
				fin.Records = append(fin.Records, Stored{ID: id, OK: ok, Offset: e.PhysicalOffset, Size: e.StoreSize,
					Queue: q, QueueOffset: e.QueueOffset, Writer: c.HostName(e.StoreHost.String())})
				off++
			}
		}
	}
	slices.SortFunc(fin.Records, func(a, b Stored) int { return cmp.Compare(a.Offset, b.Offset) })
	return fin, nil
}

// Replicas returns every broker's CommitLog end, the master first.
func (c *Cluster) Replicas(ctx context.Context, master *Broker) ([]ReplicaLog, error) {
	order := []*Broker{master}
	for _, b := range c.Brokers {
		if b != master {
			order = append(order, b)
		}
	}
	var out []ReplicaLog
	for _, b := range order {
		info, err := c.Info(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name, err)
		}
		out = append(out, ReplicaLog{Name: b.Name, StoreDir: b.StoreDir, End: info.GetCommitLogMaxOffset()})
	}
	return out, nil
}
