package nameserver

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func topics(specs ...string) []TopicConfig {
	var out []TopicConfig
	for _, s := range specs {
		var name string
		var n int32
		if _, err := fmt.Sscanf(strings.Replace(s, ":", " ", 1), "%s %d", &name, &n); err != nil {
			panic(s)
		}
		out = append(out, TopicConfig{Name: name, ReadQueues: n, WriteQueues: n, Perm: 6})
	}
	return out
}

func reg(cluster, name string, id int64, addr string, ts ...TopicConfig) Registration {
	return Registration{
		Cluster: cluster, BrokerName: name, ID: id, Addr: addr,
		HAAddr: haOf(addr), GossipAddr: "g-" + addr, Topics: ts,
		DataVersion: &DataVersion{Timestamp: 1, Counter: 1},
	}
}

func haOf(addr string) string { return strings.Replace(addr, ":109", ":119", 1) }

func mustRegister(t *testing.T, r *Routes, g Registration, now time.Time) RegisterResult {
	t.Helper()
	res, err := r.Register(g, now)
	if err != nil {
		t.Fatalf("Register(%s/%d %s): %v", g.BrokerName, g.ID, g.Addr, err)
	}
	return res
}

func wantCode(t *testing.T, err error, code pb.Code) {
	t.Helper()
	if got := wire.CodeOf(err); got != code {
		t.Fatalf("code %v (%v), want %v", got, err, code)
	}
}

// twoGroups registers broker-a and broker-b, each a master and a slave, in
// cluster C1: a serves orders(8) and common(4), b serves common(4) and
// pay(2). Slaves register topics too; they must be ignored.
func twoGroups(t *testing.T) *Routes {
	t.Helper()
	r := NewRoutes(2 * time.Minute)
	mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("orders:8", "common:4")...), t0)
	mustRegister(t, r, reg("C1", "broker-a", 1, "10.0.0.2:10911", topics("orders:8", "common:4", "slaveonly:1")...), t0)
	mustRegister(t, r, reg("C1", "broker-b", 0, "10.0.0.3:10911", topics("common:4", "pay:2")...), t0)
	mustRegister(t, r, reg("C1", "broker-b", 1, "10.0.0.4:10911", topics("common:4", "pay:2")...), t0)
	return r
}

func TestRoutesRegisterAndRoute(t *testing.T) {
	r := twoGroups(t)
	rt, err := r.Route("common")
	if err != nil {
		t.Fatal(err)
	}
	want := Route{
		Queues: []QueueData{
			{BrokerName: "broker-a", ReadQueues: 4, WriteQueues: 4, Perm: 6},
			{BrokerName: "broker-b", ReadQueues: 4, WriteQueues: 4, Perm: 6},
		},
		Brokers: []BrokerData{
			{Cluster: "C1", BrokerName: "broker-a", Addrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}},
			{Cluster: "C1", BrokerName: "broker-b", Addrs: map[int64]string{0: "10.0.0.3:10911", 1: "10.0.0.4:10911"}},
		},
	}
	if !reflect.DeepEqual(rt, want) {
		t.Fatalf("route(common) = %+v\nwant %+v", rt, want)
	}
	rt, _ = r.Route("orders")
	if len(rt.Queues) != 1 || rt.Queues[0].ReadQueues != 8 || len(rt.Brokers) != 1 || rt.Brokers[0].BrokerName != "broker-a" {
		t.Fatalf("route(orders) = %+v", rt)
	}
	_, err = r.Route("slaveonly")
	wantCode(t, err, pb.Code_TOPIC_NOT_EXIST)
	_, err = r.Route("bad topic")
	wantCode(t, err, pb.Code_ILLEGAL_TOPIC)

	if got := r.Topics(); !reflect.DeepEqual(got, []string{"common", "orders", "pay"}) {
		t.Fatalf("topics = %v", got)
	}
	ci := r.ClusterInfo()
	if !reflect.DeepEqual(ci.Clusters, map[string][]string{"C1": {"broker-a", "broker-b"}}) {
		t.Fatalf("clusters = %v", ci.Clusters)
	}
	if len(ci.Brokers) != 2 || len(ci.Live) != 4 {
		t.Fatalf("cluster info = %+v", ci)
	}
	lb := ci.Live[1]
	if lb.Addr != "10.0.0.2:10911" || lb.ID != 1 || lb.BrokerName != "broker-a" || lb.HAAddr != "10.0.0.2:11911" ||
		lb.GossipAddr != "g-10.0.0.2:10911" || lb.TopicCount != 3 || !lb.LastUpdate.Equal(t0) || lb.Timeout != 2*time.Minute {
		t.Fatalf("live[1] = %+v", lb)
	}

	// The returned data are copies.
	rt.Brokers[0].Addrs[0] = "mutated"
	if again, _ := r.Route("orders"); again.Brokers[0].Addrs[0] != "10.0.0.1:10911" {
		t.Fatal("route shares its map with the table")
	}
}

func TestRoutesSlaveLearnsMaster(t *testing.T) {
	r := NewRoutes(time.Minute)
	res := mustRegister(t, r, reg("C1", "broker-a", 1, "10.0.0.2:10911"), t0)
	if !res.New || res.MasterAddr != "" || res.MasterHAAddr != "" {
		t.Fatalf("slave before master: %+v", res)
	}
	res = mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911"), t0)
	if res.MasterAddr != "" {
		t.Fatalf("master told of a master: %+v", res)
	}
	res = mustRegister(t, r, reg("C1", "broker-a", 1, "10.0.0.2:10911"), t0)
	if res.New || res.MasterAddr != "10.0.0.1:10911" || res.MasterHAAddr != "10.0.0.1:11911" {
		t.Fatalf("slave after master: %+v", res)
	}
}

func TestRoutesUnregister(t *testing.T) {
	r := twoGroups(t)
	if ok, err := r.Unregister("C1", "broker-a", "10.0.0.2:10911", 1); err != nil || !ok {
		t.Fatalf("unregister slave: %v %v", ok, err)
	}
	rt, _ := r.Route("orders")
	if !reflect.DeepEqual(rt.Brokers[0].Addrs, map[int64]string{0: "10.0.0.1:10911"}) {
		t.Fatalf("after slave left: %+v", rt.Brokers)
	}
	// Stale or foreign unregistrations change nothing.
	for _, c := range []struct {
		cluster, name, addr string
	}{
		{"C1", "broker-a", "10.0.0.9:10911"},
		{"C1", "broker-b", "10.0.0.1:10911"},
		{"C2", "broker-a", "10.0.0.1:10911"},
	} {
		if ok, err := r.Unregister(c.cluster, c.name, c.addr, 0); ok || err != nil {
			t.Fatalf("Unregister(%v) = %v, %v", c, ok, err)
		}
	}
	if ok, _ := r.Unregister("C1", "broker-a", "10.0.0.1:10911", 0); !ok {
		t.Fatal("unregister master")
	}
	_, err := r.Route("orders")
	wantCode(t, err, pb.Code_TOPIC_NOT_EXIST)
	rt, _ = r.Route("common")
	if len(rt.Queues) != 1 || rt.Queues[0].BrokerName != "broker-b" {
		t.Fatalf("common after broker-a left: %+v", rt)
	}
	ci := r.ClusterInfo()
	if _, ok := ci.Brokers["broker-a"]; ok || !reflect.DeepEqual(ci.Clusters["C1"], []string{"broker-b"}) {
		t.Fatalf("cluster info: %+v", ci)
	}
	r.Unregister("C1", "broker-b", "10.0.0.3:10911", 0)
	// A group whose master is gone keeps its queue data: consumers may
	// still read from the slave.
	if rt, err := r.Route("pay"); err != nil || len(rt.Brokers[0].Addrs) != 1 {
		t.Fatalf("pay with only a slave: %+v %v", rt, err)
	}
	r.Unregister("C1", "broker-b", "10.0.0.4:10911", 1)
	ci = r.ClusterInfo()
	if len(ci.Brokers) != 0 || len(ci.Clusters) != 0 || len(ci.Live) != 0 || len(r.Topics()) != 0 {
		t.Fatalf("table not empty: %+v topics %v", ci, r.Topics())
	}
}

func TestRoutesPromotion(t *testing.T) {
	r := twoGroups(t)
	// broker-a's slave is promoted while the old master is still listed.
	g := reg("C1", "broker-a", 0, "10.0.0.2:10911", topics("orders:8", "common:4", "newtopic:2")...)
	res := mustRegister(t, r, g, t0.Add(time.Second))
	if res.New || res.Displaced != "10.0.0.1:10911" || !res.TopicsApplied {
		t.Fatalf("promotion result %+v", res)
	}
	rt, _ := r.Route("newtopic")
	if !reflect.DeepEqual(rt.Brokers[0].Addrs, map[int64]string{0: "10.0.0.2:10911"}) {
		t.Fatalf("addrs after promotion: %v", rt.Brokers[0].Addrs)
	}
	if _, ok := r.Live("10.0.0.1:10911"); ok {
		t.Fatal("displaced master still live")
	}
	// And demoted back: the id 0 entry goes.
	mustRegister(t, r, reg("C1", "broker-a", 2, "10.0.0.2:10911"), t0)
	rt, _ = r.Route("newtopic")
	if !reflect.DeepEqual(rt.Brokers[0].Addrs, map[int64]string{2: "10.0.0.2:10911"}) {
		t.Fatalf("addrs after demotion: %v", rt.Brokers[0].Addrs)
	}
}

func TestRoutesDataVersionGatesTopics(t *testing.T) {
	r := NewRoutes(time.Minute)
	g := reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("t1:4", "t2:4")...)
	mustRegister(t, r, g, t0)
	// Same version, different topics: a heartbeat, topics untouched.
	g.Topics = topics("t3:4")
	if res := mustRegister(t, r, g, t0); res.TopicsApplied {
		t.Fatal("topics applied without a version change")
	}
	if got := r.Topics(); !reflect.DeepEqual(got, []string{"t1", "t2"}) {
		t.Fatalf("topics = %v", got)
	}
	// New version: the list replaces the group's topics.
	g.DataVersion = &DataVersion{Timestamp: 2, Counter: 2}
	g.Topics = topics("t2:8", "t3:4")
	mustRegister(t, r, g, t0)
	if got := r.Topics(); !reflect.DeepEqual(got, []string{"t2", "t3"}) {
		t.Fatalf("topics = %v", got)
	}
	if rt, _ := r.Route("t2"); rt.Queues[0].WriteQueues != 8 {
		t.Fatalf("t2 not updated: %+v", rt)
	}
	// No version at all: always applied.
	g.DataVersion = nil
	g.Topics = nil
	mustRegister(t, r, g, t0)
	if got := r.Topics(); len(got) != 0 {
		t.Fatalf("topics = %v", got)
	}
}

func TestRoutesDeleteTopic(t *testing.T) {
	r := twoGroups(t)
	mustRegister(t, r, reg("C2", "broker-c", 0, "10.0.1.1:10911", topics("common:4")...), t0)

	wantCode(t, r.DeleteTopic("nope", ""), pb.Code_TOPIC_NOT_EXIST)
	wantCode(t, r.DeleteTopic("a b", ""), pb.Code_ILLEGAL_TOPIC)
	wantCode(t, r.DeleteTopic("orders", "C2"), pb.Code_TOPIC_NOT_EXIST)

	if err := r.DeleteTopic("common", "C1"); err != nil {
		t.Fatal(err)
	}
	rt, _ := r.Route("common")
	if len(rt.Queues) != 1 || rt.Queues[0].BrokerName != "broker-c" {
		t.Fatalf("common after deleting from C1: %+v", rt)
	}
	if err := r.DeleteTopic("orders", ""); err != nil {
		t.Fatal(err)
	}
	_, err := r.Route("orders")
	wantCode(t, err, pb.Code_TOPIC_NOT_EXIST)
	// A heartbeat with the same data version does not bring it back...
	mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("orders:8", "common:4")...), t0)
	_, err = r.Route("orders")
	wantCode(t, err, pb.Code_TOPIC_NOT_EXIST)
	// ...a changed topic table does.
	g := reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("orders:8", "common:4")...)
	g.DataVersion.Counter++
	mustRegister(t, r, g, t0)
	if _, err := r.Route("orders"); err != nil {
		t.Fatal(err)
	}
}

func TestRoutesSweep(t *testing.T) {
	r := twoGroups(t)
	g := reg("C1", "broker-b", 1, "10.0.0.4:10911")
	g.Timeout = 10 * time.Second
	mustRegister(t, r, g, t0)
	mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("orders:8", "common:4")...), t0.Add(time.Minute))

	if gone := r.Sweep(t0.Add(10 * time.Second)); len(gone) != 0 {
		t.Fatalf("evicted at the timeout: %+v", gone)
	}
	gone := r.Sweep(t0.Add(11 * time.Second))
	if len(gone) != 1 || gone[0].Addr != "10.0.0.4:10911" {
		t.Fatalf("sweep at 11s: %+v", gone)
	}
	gone = r.Sweep(t0.Add(2*time.Minute + time.Second))
	if len(gone) != 2 || gone[0].Addr != "10.0.0.2:10911" || gone[1].Addr != "10.0.0.3:10911" {
		t.Fatalf("sweep at 2m1s: %+v", gone)
	}
	// broker-a's master, refreshed a minute later, is all that is left.
	if got := r.Topics(); !reflect.DeepEqual(got, []string{"common", "orders"}) {
		t.Fatalf("topics = %v", got)
	}
	if len(r.ClusterInfo().Live) != 1 {
		t.Fatal("live")
	}
}

func TestRoutesRemoveByGossipAddr(t *testing.T) {
	r := twoGroups(t)
	gone := r.RemoveByGossipAddr("g-10.0.0.1:10911", "")
	if len(gone) != 1 || gone[0].Addr != "10.0.0.1:10911" {
		t.Fatalf("removed %+v", gone)
	}
	// The group keeps its slave and its queue data.
	rt, err := r.Route("orders")
	if err != nil || !reflect.DeepEqual(rt.Brokers[0].Addrs, map[int64]string{1: "10.0.0.2:10911"}) {
		t.Fatalf("orders: %+v %v", rt, err)
	}
	if gone := r.RemoveByGossipAddr("g-unknown", ""); len(gone) != 0 {
		t.Fatalf("removed %+v", gone)
	}
	// A broker that registered no gossip address is matched by service address.
	g := reg("C1", "broker-c", 0, "10.0.0.5:10911", topics("t:1")...)
	g.GossipAddr = ""
	mustRegister(t, r, g, t0)
	if gone := r.RemoveByGossipAddr("10.0.0.5:7946", "10.0.0.3:10911"); len(gone) != 0 {
		t.Fatalf("a broker with a gossip address matched by service address: %+v", gone)
	}
	if gone := r.RemoveByGossipAddr("10.0.0.5:7946", "10.0.0.5:10911"); len(gone) != 1 {
		t.Fatalf("fallback by service address: %+v", gone)
	}
}

func TestRoutesAddressReusedByAnotherGroup(t *testing.T) {
	r := twoGroups(t)
	// broker-b's master died silently; a broker-c master takes its port.
	mustRegister(t, r, reg("C1", "broker-c", 0, "10.0.0.3:10911", topics("new:1")...), t0)
	rt, _ := r.Route("common")
	if len(rt.Brokers) != 2 || !reflect.DeepEqual(rt.Brokers[1].Addrs, map[int64]string{1: "10.0.0.4:10911"}) {
		t.Fatalf("broker-b after losing its address: %+v", rt.Brokers)
	}
	if lb, _ := r.Live("10.0.0.3:10911"); lb.BrokerName != "broker-c" {
		t.Fatalf("live = %+v", lb)
	}
}

func TestRoutesClusterConflict(t *testing.T) {
	r := twoGroups(t)
	_, err := r.Register(reg("C2", "broker-a", 2, "10.0.0.9:10911"), t0)
	wantCode(t, err, pb.Code_INVALID_PARAMETER)
	// A group's only broker may move to another cluster.
	r.Unregister("C1", "broker-b", "10.0.0.4:10911", 1)
	mustRegister(t, r, reg("C2", "broker-b", 0, "10.0.0.3:10911", topics("pay:2")...), t0)
	ci := r.ClusterInfo()
	if !reflect.DeepEqual(ci.Clusters, map[string][]string{"C1": {"broker-a"}, "C2": {"broker-b"}}) {
		t.Fatalf("clusters = %v", ci.Clusters)
	}
}

func TestRoutesBadInputChangesNothing(t *testing.T) {
	good := reg("C1", "broker-x", 0, "10.0.0.7:10911", topics("fine:1")...)
	cases := []struct {
		name string
		mod  func(*Registration)
		code pb.Code
	}{
		{"no cluster", func(g *Registration) { g.Cluster = "" }, pb.Code_INVALID_PARAMETER},
		{"no name", func(g *Registration) { g.BrokerName = "" }, pb.Code_INVALID_PARAMETER},
		{"no addr", func(g *Registration) { g.Addr = "" }, pb.Code_INVALID_PARAMETER},
		{"addr without port", func(g *Registration) { g.Addr = "10.0.0.7" }, pb.Code_INVALID_PARAMETER},
		{"negative id", func(g *Registration) { g.ID = -1 }, pb.Code_INVALID_PARAMETER},
		{"negative timeout", func(g *Registration) { g.Timeout = -time.Second }, pb.Code_INVALID_PARAMETER},
		{"illegal topic", func(g *Registration) { g.Topics = append(g.Topics, TopicConfig{Name: "a/b"}) }, pb.Code_ILLEGAL_TOPIC},
		{"empty topic", func(g *Registration) { g.Topics = append(g.Topics, TopicConfig{}) }, pb.Code_ILLEGAL_TOPIC},
		{"long topic", func(g *Registration) { g.Topics = topics(strings.Repeat("x", 200) + ":1") }, pb.Code_ILLEGAL_TOPIC},
		{"duplicate topic", func(g *Registration) { g.Topics = topics("d:1", "d:2") }, pb.Code_INVALID_PARAMETER},
		{"negative queues", func(g *Registration) { g.Topics = []TopicConfig{{Name: "n", ReadQueues: -1}} }, pb.Code_INVALID_PARAMETER},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := twoGroups(t)
			before := r.ClusterInfo()
			topicsBefore := r.Topics()
			g := good
			g.Topics = append([]TopicConfig(nil), good.Topics...)
			c.mod(&g)
			_, err := r.Register(g, t0)
			wantCode(t, err, c.code)
			if !reflect.DeepEqual(r.ClusterInfo(), before) || !reflect.DeepEqual(r.Topics(), topicsBefore) {
				t.Fatal("rejected registration changed the table")
			}
		})
	}
	r := NewRoutes(time.Minute)
	for _, c := range []struct{ cluster, name, addr string }{{"", "b", "h:1"}, {"c", "", "h:1"}, {"c", "b", ""}, {"c", "b", "h"}} {
		_, err := r.Unregister(c.cluster, c.name, c.addr, 0)
		wantCode(t, err, pb.Code_INVALID_PARAMETER)
	}
}

func TestRoutesConcurrent(t *testing.T) {
	r := NewRoutes(time.Minute)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("broker-%d", i)
			for j := range 200 {
				g := reg("C1", name, int64(j%2), fmt.Sprintf("10.0.%d.%d:10911", i, j%2), topics("shared:4", name+":1")...)
				g.DataVersion = &DataVersion{Counter: int64(j)}
				if _, err := r.Register(g, t0); err != nil {
					t.Error(err)
					return
				}
				_, _ = r.Route("shared")
				_ = r.ClusterInfo()
				if j%50 == 0 {
					r.Unregister("C1", name, g.Addr, g.ID)
					r.Sweep(t0)
				}
			}
		}()
	}
	wg.Wait()
	rt, err := r.Route("shared")
	if err != nil || len(rt.Queues) != 8 {
		t.Fatalf("shared: %d groups, %v", len(rt.Queues), err)
	}
}
