package nameserver

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/membership"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pbTopics(names ...string) []*pb.TopicConfig {
	var out []*pb.TopicConfig
	for _, n := range names {
		out = append(out, &pb.TopicConfig{Name: n, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	}
	return out
}

func registerReq(name string, id int64, addr string, topics ...string) *pb.RegisterBrokerRequest {
	return &pb.RegisterBrokerRequest{
		Cluster: "DefaultCluster", BrokerName: name, BrokerId: id, BrokerAddr: addr,
		HaAddr: "ha-" + addr, AdminAddr: "admin-" + addr, Version: "test",
		Topics: pbTopics(topics...), DataVersion: &pb.DataVersion{Timestamp: 1, Counter: 1},
	}
}

func register(t *testing.T, c pb.NameServerClient, req *pb.RegisterBrokerRequest) *pb.RegisterBrokerResponse {
	t.Helper()
	resp, err := c.RegisterBroker(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.FromStatus(resp.Status); err != nil {
		t.Fatalf("register %s/%d: %v", req.BrokerName, req.BrokerId, err)
	}
	return resp
}

func route(t *testing.T, c pb.NameServerClient, topic string) (*pb.TopicRoute, error) {
	t.Helper()
	resp, err := c.GetRoute(ctx(t), &pb.GetRouteRequest{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Route, wire.FromStatus(resp.Status)
}

func TestServerRoutesOverGRPC(t *testing.T) {
	s := startServer(t, nil)
	c := dial(t, s.Addr())
	if s.GossipAddr() == "" {
		t.Fatal("gossip address empty")
	}

	resp := register(t, c, registerReq("broker-a", 0, "127.0.0.1:10911", "orders", "common"))
	if resp.GossipAddr != s.GossipAddr() || resp.MasterAddr != "" {
		t.Fatalf("master response %+v", resp)
	}
	resp = register(t, c, registerReq("broker-a", 1, "127.0.0.1:10921", "orders", "common", "ignored"))
	if resp.MasterAddr != "127.0.0.1:10911" || resp.MasterHaAddr != "ha-127.0.0.1:10911" || resp.GossipAddr != s.GossipAddr() {
		t.Fatalf("slave response %+v", resp)
	}
	register(t, c, registerReq("broker-b", 0, "127.0.0.1:10931", "common", "pay"))
	register(t, c, registerReq("broker-b", 1, "127.0.0.1:10941", "common", "pay"))

	rt, err := route(t, c, "common")
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.QueueDatas) != 2 || rt.QueueDatas[0].BrokerName != "broker-a" || rt.QueueDatas[1].BrokerName != "broker-b" ||
		rt.QueueDatas[0].WriteQueueNums != 4 || rt.QueueDatas[0].Perm != 6 {
		t.Fatalf("queue datas %v", rt.QueueDatas)
	}
	if len(rt.BrokerDatas) != 2 ||
		!reflect.DeepEqual(rt.BrokerDatas[1].BrokerAddrs, map[int64]string{0: "127.0.0.1:10931", 1: "127.0.0.1:10941"}) ||
		rt.BrokerDatas[1].Cluster != "DefaultCluster" {
		t.Fatalf("broker datas %v", rt.BrokerDatas)
	}
	if _, err := route(t, c, "ignored"); !errors.Is(err, wire.ErrTopicNotExist) {
		t.Fatalf("slave-only topic: %v", err)
	}

	lt, err := c.ListTopics(ctx(t), &pb.ListTopicsRequest{})
	if err != nil || !reflect.DeepEqual(lt.Topics, []string{"common", "orders", "pay"}) {
		t.Fatalf("topics %v %v", lt.GetTopics(), err)
	}

	ci, err := c.GetClusterInfo(ctx(t), &pb.GetClusterInfoRequest{})
	if err != nil || wire.FromStatus(ci.Status) != nil {
		t.Fatal(err, ci.GetStatus())
	}
	if got := ci.Clusters["DefaultCluster"].GetBrokerNames(); !reflect.DeepEqual(got, []string{"broker-a", "broker-b"}) {
		t.Fatalf("clusters %v", ci.Clusters)
	}
	if len(ci.Brokers) != 2 || len(ci.Brokers["broker-a"].BrokerAddrs) != 2 || len(ci.Live) != 4 {
		t.Fatalf("cluster info %v", ci)
	}
	lb := ci.Live[1]
	if lb.BrokerAddr != "127.0.0.1:10921" || lb.BrokerId != 1 || lb.BrokerName != "broker-a" || lb.HaAddr != "ha-127.0.0.1:10921" ||
		lb.AdminAddr != "admin-127.0.0.1:10921" || lb.Version != "test" || lb.TopicCount != 3 ||
		time.Since(time.UnixMilli(lb.LastUpdateMs)) > time.Minute {
		t.Fatalf("live %v", lb)
	}

	// Unregister broker-a's master, then its slave: the group goes.
	for _, r := range []struct {
		addr string
		id   int64
	}{{"127.0.0.1:10911", 0}, {"127.0.0.1:10921", 1}} {
		ur, err := c.UnregisterBroker(ctx(t), &pb.UnregisterBrokerRequest{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddr: r.addr, BrokerId: r.id})
		if err != nil || wire.FromStatus(ur.Status) != nil {
			t.Fatal(err, ur.GetStatus())
		}
		if r.id == 0 {
			if rt, err := route(t, c, "orders"); err != nil || len(rt.BrokerDatas[0].BrokerAddrs) != 1 {
				t.Fatalf("orders with a slave only: %v %v", rt, err)
			}
		}
	}
	if _, err := route(t, c, "orders"); !errors.Is(err, wire.ErrTopicNotExist) {
		t.Fatalf("orders after broker-a left: %v", err)
	}

	// broker-b's slave is promoted: it re-registers with id 0.
	register(t, c, registerReq("broker-b", 0, "127.0.0.1:10941", "common", "pay", "fresh"))
	rt, err = route(t, c, "fresh")
	if err != nil || !reflect.DeepEqual(rt.BrokerDatas[0].BrokerAddrs, map[int64]string{0: "127.0.0.1:10941"}) {
		t.Fatalf("after promotion: %v %v", rt, err)
	}

	// Delete a topic.
	dr, err := c.DeleteTopic(ctx(t), &pb.DeleteTopicRequest{Topic: "pay"})
	if err != nil || wire.FromStatus(dr.Status) != nil {
		t.Fatal(err, dr.GetStatus())
	}
	if _, err := route(t, c, "pay"); !errors.Is(err, wire.ErrTopicNotExist) {
		t.Fatalf("pay after delete: %v", err)
	}
	dr, _ = c.DeleteTopic(ctx(t), &pb.DeleteTopicRequest{Topic: "pay"})
	if !errors.Is(wire.FromStatus(dr.Status), wire.ErrTopicNotExist) {
		t.Fatalf("second delete: %v", dr.Status)
	}
}

func TestServerBadInput(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	c := dial(t, s.Addr())
	cases := []struct {
		name string
		mod  func(*pb.RegisterBrokerRequest)
		want error
	}{
		{"empty cluster", func(r *pb.RegisterBrokerRequest) { r.Cluster = "" }, wire.ErrInvalidParameter},
		{"empty name", func(r *pb.RegisterBrokerRequest) { r.BrokerName = "" }, wire.ErrInvalidParameter},
		{"empty addr", func(r *pb.RegisterBrokerRequest) { r.BrokerAddr = "" }, wire.ErrInvalidParameter},
		{"negative id", func(r *pb.RegisterBrokerRequest) { r.BrokerId = -2 }, wire.ErrInvalidParameter},
		{"negative timeout", func(r *pb.RegisterBrokerRequest) { r.HeartbeatTimeoutMs = -1 }, wire.ErrInvalidParameter},
		{"illegal topic", func(r *pb.RegisterBrokerRequest) { r.Topics = pbTopics("ok", "not ok") }, wire.ErrIllegalTopic},
	}
	for _, cs := range cases {
		req := registerReq("broker-a", 0, "127.0.0.1:10911", "ok")
		cs.mod(req)
		resp, err := c.RegisterBroker(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := wire.FromStatus(resp.Status); !errors.Is(got, cs.want) {
			t.Errorf("%s: %v, want %v", cs.name, got, cs.want)
		}
	}
	if ci, _ := c.GetClusterInfo(ctx(t), &pb.GetClusterInfoRequest{}); len(ci.Live) != 0 {
		t.Fatalf("rejected registrations changed the table: %v", ci)
	}
	ur, _ := c.UnregisterBroker(ctx(t), &pb.UnregisterBrokerRequest{Cluster: "c", BrokerName: "", BrokerAddr: "h:1"})
	if !errors.Is(wire.FromStatus(ur.Status), wire.ErrInvalidParameter) {
		t.Errorf("unregister without name: %v", ur.Status)
	}
	if _, err := route(t, c, "bad/topic"); !errors.Is(err, wire.ErrIllegalTopic) {
		t.Errorf("route of an illegal topic: %v", err)
	}
	if _, err := route(t, c, ""); !errors.Is(err, wire.ErrIllegalTopic) {
		t.Errorf("route of an empty topic: %v", err)
	}
	dr, _ := c.DeleteTopic(ctx(t), &pb.DeleteTopicRequest{Topic: "a b"})
	if !errors.Is(wire.FromStatus(dr.Status), wire.ErrIllegalTopic) {
		t.Errorf("delete of an illegal topic: %v", dr.Status)
	}
	// With membership off the gossip address is empty.
	resp := register(t, c, registerReq("broker-a", 0, "127.0.0.1:10911", "ok"))
	if resp.GossipAddr != "" || s.GossipAddr() != "" {
		t.Fatalf("gossip address %q with membership off", resp.GossipAddr)
	}
}

func TestServerSweepEvictsSilentBrokers(t *testing.T) {
	s := startServer(t, func(o *Options) {
		o.GossipAddr = GossipOff
		o.BrokerTimeout = 300 * time.Millisecond
		o.ScanInterval = 50 * time.Millisecond
	})
	c := dial(t, s.Addr())
	register(t, c, registerReq("broker-a", 0, "127.0.0.1:10911", "short"))
	long := registerReq("broker-b", 0, "127.0.0.1:10931", "long")
	long.HeartbeatTimeoutMs = time.Minute.Milliseconds()
	register(t, c, long)

	start := time.Now()
	waitFor(t, 5*time.Second, "silent broker evicted", func() error {
		if _, err := route(t, c, "short"); !errors.Is(err, wire.ErrTopicNotExist) {
			return fmt.Errorf("route(short): %v", err)
		}
		return nil
	})
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("evicted after %v, before its timeout", el)
	}
	if _, err := route(t, c, "long"); err != nil {
		t.Fatalf("broker with its own long timeout evicted: %v", err)
	}
	ci, _ := c.GetClusterInfo(ctx(t), &pb.GetClusterInfoRequest{})
	if len(ci.Live) != 1 || ci.Live[0].BrokerName != "broker-b" {
		t.Fatalf("live %v", ci.Live)
	}
}

// fakeBroker is a gossip node acting as a broker process.
func fakeBroker(t *testing.T, addr string, seeds ...string) *membership.Node {
	t.Helper()
	o := membership.DefaultOptions()
	o.Role = membership.RoleBroker
	o.Profile = membership.ProfileFast
	o.Meta = map[string]string{membership.MetaAddr: addr, membership.MetaBrokerName: "broker-a", membership.MetaBrokerID: "0"}
	o.Seeds = seeds
	n, err := membership.New(o, testLogger(t).Named("fake-broker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func waitMembers(t *testing.T, want int, servers ...*Server) {
	t.Helper()
	waitFor(t, 5*time.Second, "gossip pool formed", func() error {
		for _, s := range servers {
			if got := len(s.members.Load().Members()); got != want {
				return fmt.Errorf("%s sees %d members, want %d", s.Addr(), got, want)
			}
		}
		return nil
	})
}

// TestServerDropsDeadBrokerViaGossip: two NameServers share a gossip pool;
// a broker registers with both and joins through the first; when its
// process dies (no leave message), both drop it within seconds, long
// before the 120 s heartbeat timeout.
func TestServerDropsDeadBrokerViaGossip(t *testing.T) {
	ns1 := startServer(t, nil)
	ns2 := startServer(t, func(o *Options) { o.GossipSeeds = []string{ns1.GossipAddr()} })
	waitMembers(t, 2, ns1, ns2)
	c1, c2 := dial(t, ns1.Addr()), dial(t, ns2.Addr())

	const addr = "127.0.0.1:10911"
	b := fakeBroker(t, addr)
	req := registerReq("broker-a", 0, addr, "orders")
	req.GossipAddr = b.GossipAddr()
	resp := register(t, c1, req)
	register(t, c2, req)
	waitFor(t, 10*time.Second, "broker joins through the address RegisterBroker returned", func() error {
		_, err := b.Join(resp.GossipAddr)
		return err
	})
	waitMembers(t, 3, ns1, ns2)

	start := time.Now()
	if err := b.Abort(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []pb.NameServerClient{c1, c2} {
		waitFor(t, 10*time.Second, "dead broker dropped", func() error {
			if _, err := route(t, c, "orders"); !errors.Is(err, wire.ErrTopicNotExist) {
				return fmt.Errorf("route(orders): %v", err)
			}
			return nil
		})
	}
	t.Logf("dead broker dropped after %v", time.Since(start))
	ci, _ := c1.GetClusterInfo(ctx(t), &pb.GetClusterInfoRequest{})
	if len(ci.Live) != 0 || len(ci.Brokers) != 0 {
		t.Fatalf("cluster info after death: %v", ci)
	}

	// The broker comes back on the same gossip address and re-registers.
	o := membership.DefaultOptions()
	o.Role, o.Profile, o.BindAddr = membership.RoleBroker, membership.ProfileFast, req.GossipAddr
	o.Meta = map[string]string{membership.MetaAddr: addr}
	o.Seeds = []string{ns1.GossipAddr()}
	b2, err := membership.New(o, testLogger(t).Named("fake-broker-2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	register(t, c1, req)
	if _, err := route(t, c1, "orders"); err != nil {
		t.Fatalf("route after the broker came back: %v", err)
	}
	waitMembers(t, 3, ns1)

	// A clean stop (leave message) drops it too.
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "left broker dropped", func() error {
		if _, err := route(t, c1, "orders"); !errors.Is(err, wire.ErrTopicNotExist) {
			return fmt.Errorf("route(orders): %v", err)
		}
		return nil
	})
}

// TestServerJoinsRegisteredBrokerMissingFromPool: a broker that registers
// with a gossip address the NameServer does not see (it never joined, was
// declared dead by mistake, or was cut off) is joined by the NameServer.
func TestServerJoinsRegisteredBrokerMissingFromPool(t *testing.T) {
	s := startServer(t, nil)
	c := dial(t, s.Addr())
	b := fakeBroker(t, "127.0.0.1:10911")
	req := registerReq("broker-a", 0, "127.0.0.1:10911", "orders")
	req.GossipAddr = b.GossipAddr()
	register(t, c, req)
	waitFor(t, 10*time.Second, "broker in the pool", func() error {
		if len(b.Members()) != 2 {
			register(t, c, req) // the next heartbeat asks again
			return fmt.Errorf("broker sees %d members", len(b.Members()))
		}
		return nil
	})
	waitMembers(t, 2, s)
}

// TestServerJoinsSeedsThatComeUpLater: a NameServer whose seed is down at
// start keeps trying while it is alone.
func TestServerJoinsSeedsThatComeUpLater(t *testing.T) {
	seed, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	ns2 := startServer(t, func(o *Options) {
		o.GossipSeeds = []string{seed}
		o.ScanInterval = 100 * time.Millisecond
	})
	ns1 := startServer(t, func(o *Options) { o.GossipAddr = seed })
	waitMembers(t, 2, ns1, ns2)
}

func TestServerLifecycle(t *testing.T) {
	o := DefaultOptions()
	o.ListenAddr = "127.0.0.1:0"
	s, err := New(o, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, port, _ := net.SplitHostPort(s.Addr()); port == "0" {
		t.Fatal("New did not bind")
	}
	if _, port, _ := net.SplitHostPort(s.GossipAddr()); port == "0" {
		t.Fatal("gossip not bound")
	}
	// Close without Start releases the ports.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("address still bound after Close: %v", err)
	}
	_ = l.Close()

	s = startServer(t, nil)
	if err := s.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
	c := dial(t, s.Addr())
	register(t, c, registerReq("broker-a", 0, "127.0.0.1:10911", "t"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTopics(ctx(t), &pb.ListTopicsRequest{}); err == nil {
		t.Fatal("call after Close succeeded")
	}

	// Binding a port in use fails in New.
	s2 := startServer(t, nil)
	o.ListenAddr = s2.Addr()
	if _, err := New(o, testLogger(t)); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("New on a used port: %v", err)
	}
	o.ListenAddr, o.GossipAddr = "127.0.0.1:0", s2.GossipAddr()
	if _, err := New(o, testLogger(t)); err == nil || !strings.Contains(err.Error(), "gossip") {
		t.Fatalf("New on a used gossip port: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		want string // "" = valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"any port", func(o *Options) { o.ListenAddr = ":0" }, ""},
		{"gossip off", func(o *Options) { o.GossipAddr = "off" }, ""},
		{"explicit gossip", func(o *Options) { o.GossipAddr = "127.0.0.1:7946"; o.GossipSeeds = []string{"10.0.0.1:7946"} }, ""},
		{"bad listen", func(o *Options) { o.ListenAddr = "9876" }, "listen_addr"},
		{"underivable gossip", func(o *Options) { o.ListenAddr = "127.0.0.1:65535" }, "gossip_addr"},
		{"bad gossip", func(o *Options) { o.GossipAddr = "nope" }, "gossip_addr"},
		{"bad seed", func(o *Options) { o.GossipSeeds = []string{"host"} }, "gossip_seeds"},
		{"bad profile", func(o *Options) { o.GossipProfile = "wan" }, "gossip_profile"},
		{"zero scan", func(o *Options) { o.ScanInterval = 0 }, "scan_interval"},
		{"negative timeout", func(o *Options) { o.BrokerTimeout = -time.Second }, "broker_timeout"},
	}
	for _, c := range cases {
		o := DefaultOptions()
		c.mod(&o)
		err := o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.want)
		}
	}
	if _, err := New(Options{}, nil); err == nil {
		t.Fatal("New with zero options succeeded")
	}
}
