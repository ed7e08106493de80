package membership

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/internal/freeport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects the events of one node.
type recorder struct {
	joins, leaves chan Member
}

func newRecorder() *recorder {
	return &recorder{joins: make(chan Member, 64), leaves: make(chan Member, 64)}
}

func (r *recorder) opts(o *Options) {
	o.OnJoin = func(m Member) { r.joins <- m }
	o.OnLeave = func(m Member) { r.leaves <- m }
}

// waitLeave waits for a leave event about the node named name.
func (r *recorder) waitLeave(t *testing.T, name string, d time.Duration) Member {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m := <-r.leaves:
			if m.Name == name {
				return m
			}
		case <-timeout:
			t.Fatalf("no leave event for %s within %v", name, d)
		}
	}
}

func startNode(t *testing.T, role Role, addr string, seeds []string, rec *recorder) *Node {
	t.Helper()
	o := DefaultOptions()
	o.Role = role
	o.Profile = ProfileFast
	o.Seeds = seeds
	o.Meta = map[string]string{MetaAddr: addr, MetaCluster: "DefaultCluster"}
	if rec != nil {
		rec.opts(&o)
	}
	n, err := New(o, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// startPool starts three nodes, the second and third joining the first,
// and waits until every node sees all three.
func startPool(t *testing.T) ([]*Node, []*recorder) {
	t.Helper()
	recs := []*recorder{newRecorder(), newRecorder(), newRecorder()}
	a := startNode(t, RoleNameServer, "127.0.0.1:9876", nil, recs[0])
	b := startNode(t, RoleBroker, "127.0.0.1:10911", []string{a.GossipAddr()}, recs[1])
	c := startNode(t, RoleBroker, "127.0.0.1:10921", []string{a.GossipAddr()}, recs[2])
	nodes := []*Node{a, b, c}
	waitFor(t, 10*time.Second, "pool formed", func() error {
		for _, n := range nodes {
			if got := len(n.Members()); got != 3 {
				// On a loaded machine a probe may time out and a node be
				// declared dead; joining again heals the pool.
				for _, o := range nodes {
					if o != n {
						_, _ = n.Join(o.GossipAddr())
					}
				}
				return fmt.Errorf("%s sees %d members", n.Name(), got)
			}
		}
		return nil
	})
	return nodes, recs
}

func TestPoolFormsAndMetaRoundTrips(t *testing.T) {
	nodes, recs := startPool(t)
	byName := map[string]Member{}
	for _, m := range nodes[1].Members() {
		byName[m.Name] = m
	}
	want := map[string]struct {
		role Role
		addr string
		gos  string
	}{
		"namesrv-127.0.0.1:9876": {RoleNameServer, "127.0.0.1:9876", nodes[0].GossipAddr()},
		"broker-127.0.0.1:10911": {RoleBroker, "127.0.0.1:10911", nodes[1].GossipAddr()},
		"broker-127.0.0.1:10921": {RoleBroker, "127.0.0.1:10921", nodes[2].GossipAddr()},
	}
	for name, w := range want {
		m, ok := byName[name]
		if !ok {
			t.Fatalf("member %s missing; have %v", name, byName)
		}
		if m.Role != w.role || m.Meta[MetaAddr] != w.addr || m.Meta[MetaCluster] != "DefaultCluster" ||
			m.GossipAddr != w.gos {
			t.Errorf("member %s = %+v, want role %s addr %s gossip %s", name, m, w.role, w.addr, w.gos)
		}
	}
	// The first node saw both others join, and never itself.
	seen := map[string]bool{}
	waitFor(t, 5*time.Second, "join events", func() error {
		for {
			select {
			case m := <-recs[0].joins:
				if m.Name == nodes[0].Name() {
					return fmt.Errorf("join event about self")
				}
				seen[m.Name] = true
			default:
				if len(seen) == 2 {
					return nil
				}
				return fmt.Errorf("joins seen: %v", seen)
			}
		}
	})
}

func TestCloseReportsLeft(t *testing.T) {
	nodes, recs := startPool(t)
	name := nodes[2].Name()
	if err := nodes[2].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := nodes[2].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i := range 2 {
		m := recs[i].waitLeave(t, name, 5*time.Second)
		if m.Role != RoleBroker || m.Meta[MetaAddr] != "127.0.0.1:10921" {
			t.Errorf("node %d: leave event %+v, want a left broker with its meta", i, m)
		}
	}
	waitFor(t, 5*time.Second, "members after leave", func() error {
		if got := len(nodes[0].Members()); got != 2 {
			return fmt.Errorf("%d members, want 2", got)
		}
		return nil
	})
	if _, err := nodes[2].Join(nodes[0].GossipAddr()); err == nil {
		t.Error("Join after Close succeeded")
	}
}

func TestAbortReportsDead(t *testing.T) {
	nodes, recs := startPool(t)
	name := nodes[1].Name()
	start := time.Now()
	if err := nodes[1].Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	for _, i := range []int{0, 2} {
		recs[i].waitLeave(t, name, 5*time.Second)
	}
	t.Logf("dead node reported after %v", time.Since(start))
	if err := nodes[1].Close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
}

func TestRejoinAfterDeath(t *testing.T) {
	rec := newRecorder()
	a := startNode(t, RoleNameServer, "127.0.0.1:9876", nil, rec)
	b := startNode(t, RoleBroker, "127.0.0.1:10911", []string{a.GossipAddr()}, nil)
	addr := b.GossipAddr()
	waitFor(t, 5*time.Second, "joined", func() error {
		if len(a.Members()) != 2 {
			return fmt.Errorf("members %v", a.Members())
		}
		return nil
	})
	_ = b.Abort()
	rec.waitLeave(t, b.Name(), 5*time.Second)

	// The same daemon restarted on the same address comes back alive.
	o := DefaultOptions()
	o.Role, o.Profile, o.BindAddr = RoleBroker, ProfileFast, addr
	o.Meta = map[string]string{MetaAddr: "127.0.0.1:10911"}
	o.Seeds = []string{a.GossipAddr()}
	b2, err := New(o, testLogger(t))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	waitFor(t, 5*time.Second, "rejoined", func() error {
		for _, m := range a.Members() {
			if m.Name == b2.Name() {
				return nil
			}
		}
		return fmt.Errorf("members %v", a.Members())
	})
}

func TestSeedsUnreachableIsNotFatal(t *testing.T) {
	dead, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, RoleBroker, "127.0.0.1:10911", []string{dead}, nil)
	if got := len(n.Members()); got != 1 {
		t.Fatalf("members = %d, want just self", got)
	}
}

func TestOptionsRejected(t *testing.T) {
	big := map[string]string{"k": strings.Repeat("x", MaxMetaSize)}
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no role", func(o *Options) { o.Role = "" }, "role"},
		{"bad role", func(o *Options) { o.Role = "proxy" }, "role"},
		{"bad bind", func(o *Options) { o.BindAddr = "localhost" }, "bind address"},
		{"bad port", func(o *Options) { o.BindAddr = "127.0.0.1:99999" }, "bad port"},
		{"bad profile", func(o *Options) { o.Profile = "wan" }, "profile"},
		{"meta too large", func(o *Options) { o.Meta = big }, "at most 512"},
		{"bad advertise", func(o *Options) { o.AdvertiseAddr = "x" }, "advertise"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Role = RoleBroker
			c.mod(&o)
			n, err := New(o, testLogger(t))
			if err == nil {
				_ = n.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestBindConflictFails(t *testing.T) {
	a := startNode(t, RoleBroker, "127.0.0.1:10911", nil, nil)
	o := DefaultOptions()
	o.Role = RoleBroker
	o.BindAddr = a.GossipAddr()
	n, err := New(o, testLogger(t))
	if err == nil {
		_ = n.Close()
		t.Fatal("second node bound a port in use")
	}
	if !isAddrInUse(err) {
		t.Fatalf("error %v is not a bind conflict", err)
	}
}

func TestDefaultNodeNameWithoutAddr(t *testing.T) {
	o := DefaultOptions()
	o.Role = RoleBroker
	n, err := New(o, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if want := "broker-" + n.GossipAddr(); n.Name() != want {
		t.Fatalf("name %q, want %q", n.Name(), want)
	}
	if _, port, _ := net.SplitHostPort(n.GossipAddr()); port == "0" {
		t.Fatal("gossip port still 0")
	}
}

func TestDeriveGossipAddr(t *testing.T) {
	cases := []struct {
		in   string
		off  int
		want string
	}{
		{"127.0.0.1:9876", 1, "127.0.0.1:9877"},
		{"127.0.0.1:0", 1, "127.0.0.1:0"},
		{":10911", 2, ":10913"},
		{"[::1]:9876", 1, "[::1]:9877"},
		{"host.example:100", -1, "host.example:99"},
		{"127.0.0.1:65535", 1, ""},
		{"127.0.0.1", 1, ""},
		{"127.0.0.1:x", 1, ""},
	}
	for _, c := range cases {
		if got := DeriveGossipAddr(c.in, c.off); got != c.want {
			t.Errorf("DeriveGossipAddr(%q, %d) = %q, want %q", c.in, c.off, got, c.want)
		}
	}
}

func TestMetaCodec(t *testing.T) {
	in := map[string]string{MetaAddr: "10.0.0.1:10911", MetaBrokerID: strconv.Itoa(0), MetaBrokerName: "broker-a"}
	b, err := encodeMeta(RoleBroker, in)
	if err != nil {
		t.Fatal(err)
	}
	role, out, err := decodeMeta(b)
	if err != nil || role != RoleBroker || len(out) != len(in) {
		t.Fatalf("decode = %v %v %v", role, out, err)
	}
	for k, v := range in {
		if out[k] != v {
			t.Errorf("meta[%s] = %q, want %q", k, out[k], v)
		}
	}
	if _, _, err := decodeMeta([]byte("not json")); err == nil {
		t.Error("garbage meta decoded")
	}
	if r, m, err := decodeMeta(nil); r != "" || m != nil || err != nil {
		t.Error("empty meta")
	}
}

func TestDefaultName(t *testing.T) {
	hn, _ := os.Hostname()
	cases := []struct{ svc, gossip, want string }{
		{"127.0.0.1:9876", "127.0.0.1:9877", "namesrv-127.0.0.1:9876"},
		{"", "127.0.0.1:9877", "namesrv-127.0.0.1:9877"},
		{"0.0.0.0:9876", "0.0.0.0:9877", "namesrv-" + net.JoinHostPort(hn, "9876")},
		{":9876", ":9877", "namesrv-" + net.JoinHostPort(hn, "9876")},
	}
	for _, c := range cases {
		if got := defaultName(RoleNameServer, c.svc, c.gossip); got != c.want {
			t.Errorf("defaultName(%q, %q) = %q, want %q", c.svc, c.gossip, got, c.want)
		}
	}
}

// startKeyed starts a node with key (nil: gossip in the clear).
func startKeyed(t *testing.T, role Role, addr string, key []byte, seeds []string) *Node {
	t.Helper()
	o := DefaultOptions()
	o.Role = role
	o.Profile = ProfileFast
	o.Meta = map[string]string{MetaAddr: addr}
	o.SecretKey = key
	o.Seeds = seeds
	n, err := New(o, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// Nodes with the same key form a pool; a node with another key, or none,
// does not join it.
func TestGossipKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	other := []byte("fedcba9876543210")
	a := startKeyed(t, RoleNameServer, "127.0.0.1:9876", key, nil)
	b := startKeyed(t, RoleBroker, "127.0.0.1:10911", key, []string{a.GossipAddr()})
	waitFor(t, 10*time.Second, "keyed pool formed", func() error {
		if got := len(a.Members()); got != 2 {
			_, _ = b.Join(a.GossipAddr())
			return fmt.Errorf("a sees %d members", got)
		}
		return nil
	})
	for _, k := range [][]byte{other, nil} {
		c := startKeyed(t, RoleBroker, "127.0.0.1:10921", k, nil)
		if n, err := c.Join(a.GossipAddr()); err == nil && n > 0 {
			t.Errorf("key %q: joined a node with another key (%d reached)", k, n)
		}
		// Nor does the pool learn of it, from either side.
		if _, err := a.Join(c.GossipAddr()); err == nil {
			t.Errorf("key %q: the keyed node joined it", k)
		}
		time.Sleep(500 * time.Millisecond)
		for _, n := range []*Node{a, b} {
			for _, m := range n.Members() {
				if m.Meta[MetaAddr] == "127.0.0.1:10921" {
					t.Errorf("key %q: %s sees the node with another key", k, n.Name())
				}
			}
		}
		if got := len(c.Members()); got != 1 {
			t.Errorf("key %q: the outsider sees %d members", k, got)
		}
		_ = c.Close()
	}
	if len(a.Members()) != 2 || len(b.Members()) != 2 {
		t.Fatalf("the keyed pool changed: %d, %d", len(a.Members()), len(b.Members()))
	}
}

func TestGossipKeySizeChecked(t *testing.T) {
	o := DefaultOptions()
	o.Role = RoleBroker
	o.SecretKey = []byte("short")
	if err := o.Validate(); err == nil {
		t.Fatal("a 5-byte key accepted")
	}
}
