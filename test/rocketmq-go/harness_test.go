package rocketmqgo_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/bolide-mq/bolide/client"
	"go.uber.org/zap"
)

// The harness: the daemons as real processes on free loopback ports, one
// cluster per layout shared by the tests that leave the processes alone.

const (
	// segmentSize is the brokers' CommitLog segment size: small, as each
	// segment is allocated on disk in full.
	segmentSize = 16 << 20
	// clusterName is the brokers' cluster.
	clusterName = "DefaultCluster"
)

// delayLevels are the brokers' 18 delay levels (--delay-levels), shortened
// so that the delay and retry tests are quick: level 2 is the one the delay
// test checks; the retry levels (3 + reconsume times) are 1 s.
var delayLevels = func() []time.Duration {
	d := make([]time.Duration, 18)
	for i := range d {
		d[i] = time.Second
	}
	d[1] = 2 * time.Second
	return d
}()

// Broker timers shortened for the tests: the first transaction check-back
// comes after txnTimeout, later ones every txnCheckInterval.
const (
	txnTimeout       = time.Second
	txnCheckInterval = 2 * time.Second
)

var binDir string

func TestMain(m *testing.M) {
	lvl := os.Getenv("RMQGO_LOG")
	if lvl == "" {
		lvl = "warn"
	}
	rlog.SetLogLevel(lvl)
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role)) // the child's log is its standard output
	}
	// The RocketMQ client's log goes to a file, shown when the run fails.
	clientLog := filepath.Join(os.TempDir(), fmt.Sprintf("rmqgo-client-%d.log", os.Getpid()))
	_ = rlog.SetOutputPath(clientLog)
	dir, cleanup, err := binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocketmq-go:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	keep := os.Getenv("RMQGO_KEEP") != ""
	stopShared(code != 0, keep)
	if code != 0 {
		p := &proc{logPath: clientLog}
		fmt.Fprintf(os.Stderr, "rocketmq-go: the RocketMQ client's log (%s, level %s), last lines:\n%s\n", clientLog, lvl, p.logTail(300))
	}
	if code == 0 && !keep {
		_ = os.Remove(clientLog)
	}
	cleanup()
	os.Exit(code)
}

// binaries returns the directory of bolide-nameserver and bolide-broker:
// $BOLIDE_BIN, or a temporary directory they are built into from the
// repository root (../..).
func binaries() (string, func(), error) {
	if dir := os.Getenv("BOLIDE_BIN"); dir != "" {
		for _, b := range []string{"bolide-nameserver", "bolide-broker"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return "", nil, fmt.Errorf("BOLIDE_BIN: %w", err)
			}
		}
		return dir, func() {}, nil
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "rmqgo-bin-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/bolide-nameserver", "./cmd/bolide-broker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build in %s: %w\n%s", root, err, out)
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// freePort returns a loopback port nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// proc is a daemon running as a child process. Its output goes to a log
// file in the cluster's directory.
type proc struct {
	name     string
	args     []string
	logPath  string
	addrFile string
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	addr     string
}

// start runs the daemon and waits until it writes its address file.
func (p *proc) start() error {
	_ = os.Remove(p.addrFile)
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	args := append(append([]string{}, p.args...), "--addr-file", p.addrFile, "--log-format", "console")
	cmd := exec.Command(filepath.Join(binDir, p.name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group (a terminal's Ctrl-C reaches only the test),
	// and killed if the test binary dies (a go test timeout) rather than
	// left running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited at start:\n%s", p.name, p.logTail(30))
		default:
		}
		if b, err := os.ReadFile(p.addrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			p.addr = strings.TrimSpace(string(b))
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("%s did not start in 30 s:\n%s", p.name, p.logTail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits up to d for a clean exit, then kills.
func (p *proc) stop(d time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(d):
		p.kill()
	}
}

// logTail returns the last n lines of the daemon's log.
func (p *proc) logTail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// layout is a cluster shape: its broker groups, one master each, and with
// slaves one slave each (broker id 1). fastEviction makes the NameServer
// drop a silent broker within about 4 s (instead of 2 min).
type layout struct {
	name         string
	brokers      []string
	slaves       bool
	fastEviction bool
}

var (
	oneGroup  = layout{name: "one-group", brokers: []string{"broker-a"}}
	twoGroups = layout{name: "two-groups", brokers: []string{"broker-a", "broker-b"}}
	layouts   = []layout{oneGroup, twoGroups}
)

// cluster is a NameServer and the masters of a layout.
type cluster struct {
	layout  layout
	dir     string
	ns      *proc
	brokers []*broker // the masters, in layout order
	slaves  []*broker // with slaves: one per group, in the same order
	// nameSrv is the NameServer's "ip:port" (an IP literal, as the
	// RocketMQ client requires).
	nameSrv string
	admin   *client.Admin
}

// broker is one broker process.
type broker struct {
	name string
	id   int // 0 master, 1 slave
	addr string
	p    *proc
}

// startCluster starts a NameServer and the layout's brokers and waits until
// the NameServer routes every broker.
func startCluster(l layout) (c *cluster, err error) {
	dir, err := os.MkdirTemp("", "rmqgo-"+l.name+"-")
	if err != nil {
		return nil, err
	}
	c = &cluster{layout: l, dir: dir}
	defer func() {
		if err != nil {
			c.close(true)
			err = fmt.Errorf("%w (logs in %s)", err, dir)
		}
	}()
	if err := c.startNameServer(); err != nil {
		return c, err
	}
	for _, name := range l.brokers {
		b, err := c.startBroker(name, 0)
		if err != nil {
			return c, err
		}
		c.brokers = append(c.brokers, b)
	}
	if l.slaves {
		for _, name := range l.brokers {
			b, err := c.startBroker(name, 1)
			if err != nil {
				return c, err
			}
			c.slaves = append(c.slaves, b)
		}
	}
	c.admin, err = client.NewAdmin(client.WithNameServers(c.nameSrv), client.WithLogger(zap.NewNop()))
	if err != nil {
		return c, err
	}
	return c, c.waitRegistered(30 * time.Second)
}

func (c *cluster) startNameServer() error {
	var err error
	for range 3 { // a free port may be taken by someone else meanwhile
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		c.nameSrv = fmt.Sprintf("127.0.0.1:%d", port)
		c.ns = &proc{name: "bolide-nameserver", logPath: filepath.Join(c.dir, "nameserver.log"),
			addrFile: filepath.Join(c.dir, "nameserver.addr"),
			args:     []string{"--listen", c.nameSrv, "--gossip", "off", "--admin-listen", "off"}}
		if c.layout.fastEviction {
			c.ns.args = append(c.ns.args, "--scan-interval", "1s")
		}
		if err = c.ns.start(); err == nil {
			return nil
		}
	}
	return err
}

func (c *cluster) startBroker(name string, id int) (*broker, error) {
	var err error
	for range 3 {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		b := &broker{name: name, id: id, addr: fmt.Sprintf("127.0.0.1:%d", port)}
		file := name
		if id > 0 {
			file = fmt.Sprintf("%s-%d", name, id)
		}
		b.p = &proc{name: "bolide-broker", logPath: filepath.Join(c.dir, file+".log"),
			addrFile: filepath.Join(c.dir, file+".addr"), args: c.brokerArgs(name, id, file, b.addr)}
		if err = b.p.start(); err == nil {
			return b, nil
		}
	}
	return nil, err
}

func (c *cluster) brokerArgs(name string, id int, dir, addr string) []string {
	levels := make([]string, len(delayLevels))
	for i, d := range delayLevels {
		levels[i] = d.String()
	}
	register := "5s"
	var extra []string
	if c.layout.fastEviction {
		register = "1s"
		extra = []string{"--broker-timeout", "3s"}
	}
	return append([]string{
		"--namesrv", c.nameSrv, "--listen", addr, "--store-dir", filepath.Join(c.dir, dir),
		"--broker-name", name, "--broker-id", strconv.Itoa(id), "--cluster", clusterName,
		"--segment-size", strconv.Itoa(segmentSize), "--ha-listen", "127.0.0.1:0",
		"--gossip", "off", "--admin-listen", "off",
		"--delay-levels", strings.Join(levels, " "),
		"--transaction-timeout", txnTimeout.String(), "--transaction-check-interval", txnCheckInterval.String(),
		"--drain-timeout", "5s", "--register-interval", register,
	}, extra...)
}

// waitRegistered waits until the NameServer knows every broker at its
// address.
func (c *cluster) waitRegistered(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ci, err := c.admin.ClusterInfo(ctx)
		if err == nil {
			ok := true
			for _, b := range append(append([]*broker{}, c.brokers...), c.slaves...) {
				bd, found := ci.Brokers[b.name]
				if !found || bd.Addrs[int64(b.id)] != b.addr {
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

// restartBroker stops broker i (SIGKILL when kill, else SIGTERM) and starts
// it again on the same port and store.
func (c *cluster) restartBroker(t testing.TB, i int, kill bool) {
	t.Helper()
	b := c.brokers[i]
	if kill {
		b.p.kill()
	} else {
		b.p.stop(15 * time.Second)
	}
	var err error
	for range 50 { // the port may linger for a moment
		if err = b.p.start(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart %s: %v", b.name, err)
	}
	if err := c.waitRegistered(30 * time.Second); err != nil {
		t.Fatalf("restart %s: %v", b.name, err)
	}
}

// restartNameServer kills the NameServer (-9) and starts it again on the
// same port; the brokers register again within their register interval.
func (c *cluster) restartNameServer(t testing.TB) {
	t.Helper()
	c.ns.kill()
	var err error
	for range 50 {
		if err = c.ns.start(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart the NameServer: %v", err)
	}
	if err := c.waitRegistered(30 * time.Second); err != nil {
		t.Fatalf("after the NameServer's restart: %v", err)
	}
}

// close stops the brokers, then the NameServer, and removes the directory
// unless keep.
func (c *cluster) close(keep bool) {
	if c.admin != nil {
		_ = c.admin.Close()
	}
	var wg sync.WaitGroup
	for _, b := range append(append([]*broker{}, c.brokers...), c.slaves...) {
		wg.Add(1)
		go func() { defer wg.Done(); b.p.stop(10 * time.Second) }()
	}
	wg.Wait()
	if c.ns != nil {
		c.ns.stop(10 * time.Second)
	}
	if keep {
		fmt.Fprintf(os.Stderr, "rocketmq-go: cluster %s kept in %s\n", c.layout.name, c.dir)
		return
	}
	_ = os.RemoveAll(c.dir)
}

// logs returns the tail of every daemon's log, for a failing test.
func (c *cluster) logs(n int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- nameserver (%s)\n%s\n", c.ns.logPath, c.ns.logTail(n))
	for _, b := range append(append([]*broker{}, c.brokers...), c.slaves...) {
		fmt.Fprintf(&sb, "--- %s/%d (%s)\n%s\n", b.name, b.id, b.p.logPath, b.p.logTail(n))
	}
	return sb.String()
}

// brokerAddr returns the address of the broker group name.
func (c *cluster) brokerAddr(name string) string {
	for _, b := range c.brokers {
		if b.name == name {
			return b.addr
		}
	}
	return ""
}

var shared struct {
	mu       sync.Mutex
	clusters map[string]*cluster
	errs     map[string]error
}

// sharedCluster returns the layout's cluster shared by the tests that do not
// restart processes, starting it on first use.
func sharedCluster(t testing.TB, l layout) *cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.clusters == nil {
		shared.clusters, shared.errs = map[string]*cluster{}, map[string]error{}
	}
	if err := shared.errs[l.name]; err != nil {
		t.Fatalf("cluster %s: %v", l.name, err)
	}
	c := shared.clusters[l.name]
	if c == nil {
		var err error
		if c, err = startCluster(l); err != nil {
			shared.errs[l.name] = err
			t.Fatalf("cluster %s: %v", l.name, err)
		}
		shared.clusters[l.name] = c
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon logs of the shared cluster %s are in %s (kept)", l.name, c.dir)
		}
	})
	return c
}

// stopShared stops the shared clusters; after a failed run it prints the
// tail of their daemons' logs and keeps their directories.
func stopShared(failed, keep bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for _, c := range shared.clusters {
		if failed {
			fmt.Fprintf(os.Stderr, "rocketmq-go: daemon logs of the shared cluster %s:\n%s", c.layout.name, c.logs(60))
		}
		c.close(failed || keep)
	}
}

// privateCluster starts a cluster for one test, stopped at its end.
func privateCluster(t testing.TB, l layout) *cluster {
	t.Helper()
	c, err := startCluster(l)
	if err != nil {
		t.Fatalf("cluster %s: %v", l.name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon logs:\n%s", c.logs(40))
		}
		c.close(t.Failed() || os.Getenv("RMQGO_KEEP") != "")
	})
	return c
}

// forLayouts runs f on the shared cluster of every layout, in parallel
// subtests.
func forLayouts(t *testing.T, f func(t *testing.T, c *cluster)) {
	t.Parallel()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			f(t, sharedCluster(t, l))
		})
	}
}

var seq atomic.Int64

// uniq returns a name no other test of this run uses: prefix-<n>-<time>.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, seq.Add(1), time.Now().UnixNano()%1e9)
}

// createTopic creates topic with queues queues on every broker group and
// waits until the NameServer routes it.
func (c *cluster) createTopic(t testing.TB, topic string, queues int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.admin.CreateTopic(ctx, client.TopicSpec{Name: topic, Queues: queues}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for {
		r, err := c.admin.Route(ctx, topic)
		if err == nil && len(r.Queues) == len(c.brokers) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not routed on %d brokers: %v", topic, len(c.brokers), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newTopic creates a fresh topic with queues queues per broker group.
func (c *cluster) newTopic(t testing.TB, prefix string, queues int) string {
	t.Helper()
	topic := uniq(prefix)
	c.createTopic(t, topic, queues)
	return topic
}

// groupOffsets returns the group's committed offsets of topic by
// "broker/queue" (-1: none), as the brokers report them.
func (c *cluster) groupOffsets(t testing.TB, group, topic string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.admin.ConsumeStats(ctx, group, topic)
	if err != nil {
		t.Fatalf("consume stats %s/%s: %v", group, topic, err)
	}
	m := map[string]int64{}
	for _, q := range st.Queues {
		m[fmt.Sprintf("%s/%d", q.Queue.BrokerName, q.Queue.QueueID)] = q.ConsumerOffset
	}
	return m
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
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
