package proccluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"go.uber.org/zap"
)

// ClusterName is the brokers' cluster.
const ClusterName = "DefaultCluster"

// Options are the settings of every cluster of a Harness.
type Options struct {
	// Name prefixes the clusters' temporary directories and the harness's
	// messages (e.g. "rocketmq-go").
	Name string
	// BinDir holds bolide-nameserver and bolide-broker (see Binaries).
	BinDir string
	// SegmentSize is the brokers' CommitLog segment size (default 16 MiB:
	// small, as each segment is allocated on disk in full).
	SegmentSize int64
	// DelayLevels are the brokers' delay levels (--delay-levels); nil keeps
	// the broker's default.
	DelayLevels []time.Duration
	// TxnTimeout and TxnCheckInterval are the brokers' transaction
	// check-back timers (0 keeps the broker's default).
	TxnTimeout, TxnCheckInterval time.Duration
	// BrokerArgs and NameServerArgs are extra flags of every broker and
	// NameServer.
	BrokerArgs, NameServerArgs []string
	// Keep keeps the directories of private clusters (logs, stores) after
	// their test, and of shared ones after Close.
	Keep bool
}

// Layout is a cluster shape: its broker groups, one master each, and with
// Slaves one slave each (broker id 1). FastEviction makes the NameServer
// drop a silent broker within about 4 s (instead of 2 min).
type Layout struct {
	Name         string
	Brokers      []string
	Slaves       bool
	FastEviction bool
}

// The two usual layouts.
var (
	OneGroup  = Layout{Name: "one-group", Brokers: []string{"broker-a"}}
	TwoGroups = Layout{Name: "two-groups", Brokers: []string{"broker-a", "broker-b"}}
)

// Layouts returns OneGroup and TwoGroups.
func Layouts() []Layout { return []Layout{OneGroup, TwoGroups} }

// Harness starts clusters with one set of Options and keeps the shared
// ones.
type Harness struct {
	opts     Options
	mu       sync.Mutex
	clusters map[string]*Cluster
	errs     map[string]error
}

// New returns a harness; o.BinDir is required.
func New(o Options) *Harness {
	if o.Name == "" {
		o.Name = "bolide"
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 16 << 20
	}
	return &Harness{opts: o, clusters: map[string]*Cluster{}, errs: map[string]error{}}
}

// Options returns the harness's settings.
func (h *Harness) Options() Options { return h.opts }

// Cluster is a NameServer and the brokers of a layout.
type Cluster struct {
	Layout Layout
	// Dir holds the daemons' logs, address files and stores.
	Dir string
	NS  *Proc
	// Brokers are the masters, in layout order; Slaves (with slaves) one
	// per group, in the same order.
	Brokers []*Broker
	Slaves  []*Broker
	// NameSrv is the NameServer's "ip:port" (an IP literal, as RocketMQ's
	// clients require).
	NameSrv string
	// Admin talks to the cluster with Bolide's SDK.
	Admin *client.Admin

	h *Harness
	v5probe
}

// Broker is one broker process.
type Broker struct {
	Name string
	ID   int // 0 master, 1 slave
	Addr string
	Proc *Proc
}

// Start starts a NameServer and the layout's brokers and waits until the
// NameServer routes every broker.
func (h *Harness) Start(l Layout) (c *Cluster, err error) {
	dir, err := os.MkdirTemp("", h.opts.Name+"-"+l.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", l.Name, err)
	}
	c = &Cluster{Layout: l, Dir: dir, h: h}
	defer func() {
		if err != nil {
			c.Close(true)
			err = fmt.Errorf("%w (logs in %s)", err, dir)
		}
	}()
	if err := c.startNameServer(); err != nil {
		return c, err
	}
	for _, name := range l.Brokers {
		b, err := c.startBroker(name, 0)
		if err != nil {
			return c, err
		}
		c.Brokers = append(c.Brokers, b)
	}
	if l.Slaves {
		for _, name := range l.Brokers {
			b, err := c.startBroker(name, 1)
			if err != nil {
				return c, err
			}
			c.Slaves = append(c.Slaves, b)
		}
	}
	c.Admin, err = client.NewAdmin(client.WithNameServers(c.NameSrv), client.WithLogger(zap.NewNop()))
	if err != nil {
		return c, fmt.Errorf("admin client: %w", err)
	}
	return c, c.WaitRegistered(30 * time.Second)
}

func (c *Cluster) startNameServer() error {
	var err error
	for range 3 { // a free port may be taken by someone else meanwhile
		var port int
		if port, err = FreePort(); err != nil {
			return err
		}
		c.NameSrv = fmt.Sprintf("127.0.0.1:%d", port)
		c.NS = &Proc{Bin: filepath.Join(c.h.opts.BinDir, "bolide-nameserver"), LogPath: filepath.Join(c.Dir, "nameserver.log"),
			AddrFile: filepath.Join(c.Dir, "nameserver.addr"),
			Args:     []string{"--listen", c.NameSrv, "--gossip", "off", "--admin-listen", "off"}}
		if c.Layout.FastEviction {
			c.NS.Args = append(c.NS.Args, "--scan-interval", "1s")
		}
		c.NS.Args = append(c.NS.Args, c.h.opts.NameServerArgs...)
		if err = c.NS.Start(); err == nil {
			return nil
		}
	}
	return err
}

func (c *Cluster) startBroker(name string, id int) (*Broker, error) {
	var err error
	for range 3 {
		var port int
		if port, err = FreePort(); err != nil {
			return nil, err
		}
		b := &Broker{Name: name, ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", port)}
		file := name
		if id > 0 {
			file = fmt.Sprintf("%s-%d", name, id)
		}
		b.Proc = &Proc{Bin: filepath.Join(c.h.opts.BinDir, "bolide-broker"), LogPath: filepath.Join(c.Dir, file+".log"),
			AddrFile: filepath.Join(c.Dir, file+".addr"), Args: c.brokerArgs(name, id, file, b.Addr)}
		if err = b.Proc.Start(); err == nil {
			return b, nil
		}
	}
	return nil, err
}

func (c *Cluster) brokerArgs(name string, id int, dir, addr string) []string {
	o := c.h.opts
	register := "5s"
	var extra []string
	if c.Layout.FastEviction {
		register = "1s"
		extra = []string{"--broker-timeout", "3s"}
	}
	args := []string{
		"--namesrv", c.NameSrv, "--listen", addr, "--store-dir", filepath.Join(c.Dir, dir),
		"--broker-name", name, "--broker-id", strconv.Itoa(id), "--cluster", ClusterName,
		"--segment-size", strconv.FormatInt(o.SegmentSize, 10), "--ha-listen", "127.0.0.1:0",
		"--gossip", "off", "--admin-listen", "off",
		"--drain-timeout", "5s", "--register-interval", register,
	}
	if len(o.DelayLevels) > 0 {
		levels := make([]string, len(o.DelayLevels))
		for i, d := range o.DelayLevels {
			levels[i] = d.String()
		}
		args = append(args, "--delay-levels", strings.Join(levels, " "))
	}
	if o.TxnTimeout > 0 {
		args = append(args, "--transaction-timeout", o.TxnTimeout.String())
	}
	if o.TxnCheckInterval > 0 {
		args = append(args, "--transaction-check-interval", o.TxnCheckInterval.String())
	}
	return append(append(args, extra...), o.BrokerArgs...)
}

// all returns the masters, then the slaves.
func (c *Cluster) all() []*Broker {
	return append(append([]*Broker{}, c.Brokers...), c.Slaves...)
}

// WaitRegistered waits until the NameServer knows every broker at its
// address.
func (c *Cluster) WaitRegistered(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ci, err := c.Admin.ClusterInfo(ctx)
		if err == nil {
			ok := true
			for _, b := range c.all() {
				bd, found := ci.Brokers[b.Name]
				if !found || bd.Addrs[int64(b.ID)] != b.Addr {
					ok = false
				}
			}
			if ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("brokers not registered with the NameServer in %v (last error %v)", d, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartBroker starts master i again (after KillBroker or a Stop of its
// Proc) on the same port and store, and waits until it is registered.
func (c *Cluster) StartBroker(i int) error {
	b := c.Brokers[i]
	var err error
	for range 50 { // the port may linger for a moment
		if err = b.Proc.Start(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("restart %s: %w", b.Name, err)
	}
	if err := c.WaitRegistered(30 * time.Second); err != nil {
		return fmt.Errorf("restart %s: %w", b.Name, err)
	}
	return nil
}

// RestartBroker stops master i (SIGKILL when kill, else SIGTERM) and
// starts it again on the same port and store.
func (c *Cluster) RestartBroker(t testing.TB, i int, kill bool) {
	t.Helper()
	b := c.Brokers[i]
	if kill {
		b.Proc.Kill()
	} else {
		b.Proc.Stop(15 * time.Second)
	}
	if err := c.StartBroker(i); err != nil {
		t.Fatal(err)
	}
}

// RestartNameServer kills the NameServer (-9) and starts it again on the
// same port; the brokers register again within their register interval.
func (c *Cluster) RestartNameServer(t testing.TB) {
	t.Helper()
	c.NS.Kill()
	var err error
	for range 50 {
		if err = c.NS.Start(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart the NameServer: %v", err)
	}
	if err := c.WaitRegistered(30 * time.Second); err != nil {
		t.Fatalf("after the NameServer's restart: %v", err)
	}
}

// Close stops the brokers, then the NameServer, and removes the directory
// unless keep.
func (c *Cluster) Close(keep bool) {
	if c.Admin != nil {
		_ = c.Admin.Close()
	}
	var wg sync.WaitGroup
	for _, b := range c.all() {
		wg.Add(1)
		go func() { defer wg.Done(); b.Proc.Stop(10 * time.Second) }()
	}
	wg.Wait()
	if c.NS != nil {
		c.NS.Stop(10 * time.Second)
	}
	if keep {
		fmt.Fprintf(os.Stderr, "%s: cluster %s kept in %s\n", c.h.opts.Name, c.Layout.Name, c.Dir)
		return
	}
	_ = os.RemoveAll(c.Dir)
}

// Logs returns the tail of every daemon's log, for a failing test.
func (c *Cluster) Logs(n int) string {
	var sb strings.Builder
	if c.NS != nil {
		fmt.Fprintf(&sb, "--- nameserver (%s)\n%s\n", c.NS.LogPath, c.NS.LogTail(n))
	}
	for _, b := range c.all() {
		fmt.Fprintf(&sb, "--- %s/%d (%s)\n%s\n", b.Name, b.ID, b.Proc.LogPath, b.Proc.LogTail(n))
	}
	return sb.String()
}

// BrokerAddr returns the master address of the broker group name.
func (c *Cluster) BrokerAddr(name string) string {
	for _, b := range c.Brokers {
		if b.Name == name {
			return b.Addr
		}
	}
	return ""
}

// Shared returns the layout's cluster shared by the tests that do not
// restart processes, starting it on first use.
func (h *Harness) Shared(t testing.TB, l Layout) *Cluster {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.errs[l.Name]; err != nil {
		t.Fatalf("cluster %s: %v", l.Name, err)
	}
	c := h.clusters[l.Name]
	if c == nil {
		var err error
		if c, err = h.Start(l); err != nil {
			h.errs[l.Name] = err
			t.Fatalf("cluster %s: %v", l.Name, err)
		}
		h.clusters[l.Name] = c
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon logs of the shared cluster %s are in %s (kept)", l.Name, c.Dir)
		}
	})
	return c
}

// Close stops the shared clusters; after a failed run it prints the tail
// of their daemons' logs and keeps their directories.
func (h *Harness) Close(failed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, c := range h.clusters {
		if failed {
			fmt.Fprintf(os.Stderr, "%s: daemon logs of the shared cluster %s:\n%s", h.opts.Name, c.Layout.Name, c.Logs(60))
		}
		c.Close(failed || h.opts.Keep)
		delete(h.clusters, name)
	}
}

// Private starts a cluster for one test, stopped at its end (its daemons'
// logs shown when the test failed).
func (h *Harness) Private(t testing.TB, l Layout) *Cluster {
	t.Helper()
	c, err := h.Start(l)
	if err != nil {
		t.Fatalf("cluster %s: %v", l.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon logs:\n%s", c.Logs(40))
		}
		c.Close(t.Failed() || h.opts.Keep)
	})
	return c
}

// ForLayouts runs f on the shared cluster of OneGroup and of TwoGroups, in
// parallel subtests.
func (h *Harness) ForLayouts(t *testing.T, f func(t *testing.T, c *Cluster)) {
	t.Parallel()
	for _, l := range Layouts() {
		t.Run(l.Name, func(t *testing.T) {
			t.Parallel()
			f(t, h.Shared(t, l))
		})
	}
}

var seq atomic.Int64

// Uniq returns a name no other test of this run uses: prefix-<n>-<time>.
func Uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, seq.Add(1), time.Now().UnixNano()%1e9)
}

// CreateTopic creates topic with queues queues on every broker group and
// waits until the NameServer routes it.
func (c *Cluster) CreateTopic(t testing.TB, topic string, queues int) {
	t.Helper()
	c.CreateTopicSpec(t, client.TopicSpec{Name: topic, Queues: queues})
}

// CreateTopicSpec creates a topic on every broker group (unless the spec
// names some) and waits until the NameServer routes it on all of them.
func (c *Cluster) CreateTopicSpec(t testing.TB, spec client.TopicSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Admin.CreateTopic(ctx, spec); err != nil {
		t.Fatalf("create topic %s: %v", spec.Name, err)
	}
	if err := c.WaitRouted(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
}

// WaitRouted waits until the NameServer routes topic on every broker
// group.
func (c *Cluster) WaitRouted(ctx context.Context, topic string) error {
	for {
		r, err := c.Admin.Route(ctx, topic)
		if err == nil && len(r.Queues) == len(c.Brokers) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not routed on %d brokers: %v", topic, len(c.Brokers), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewTopic creates a fresh topic with queues queues per broker group.
func (c *Cluster) NewTopic(t testing.TB, prefix string, queues int) string {
	t.Helper()
	topic := Uniq(prefix)
	c.CreateTopic(t, topic, queues)
	return topic
}

// GroupOffsets returns the group's committed offsets of topic by
// "broker/queue" (-1: none), as the brokers report them.
func (c *Cluster) GroupOffsets(t testing.TB, group, topic string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Admin.ConsumeStats(ctx, group, topic)
	if err != nil {
		t.Fatalf("consume stats %s/%s: %v", group, topic, err)
	}
	m := map[string]int64{}
	for _, q := range st.Queues {
		m[fmt.Sprintf("%s/%d", q.Queue.BrokerName, q.Queue.QueueID)] = q.ConsumerOffset
	}
	return m
}

// WaitFor polls cond every 50 ms until it holds or d passes.
func WaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
