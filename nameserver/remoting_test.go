package nameserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/wire"
)

// rmqDial opens a remoting connection to addr, closed when the test ends.
func rmqDial(t *testing.T, addr string) *remoting.Conn {
	t.Helper()
	c, err := remoting.Dial(ctx(t), addr, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rmqCall sends one request and returns its response.
func rmqCall(t *testing.T, c *remoting.Conn, code int32, ext map[string]string) *remoting.Command {
	t.Helper()
	resp, err := c.Invoke(ctx(t), remoting.NewRequest(code, ext, nil))
	if err != nil {
		t.Fatalf("request %d: %v", code, err)
	}
	if !resp.IsResponse() {
		t.Fatalf("request %d: the answer's flag %d lacks the response bit", code, resp.Flag)
	}
	return resp
}

// rmqOK is rmqCall that requires SUCCESS.
func rmqOK(t *testing.T, c *remoting.Conn, code int32, ext map[string]string) *remoting.Command {
	t.Helper()
	resp := rmqCall(t, c, code, ext)
	if resp.Code != remoting.Success {
		t.Fatalf("request %d: code %d %q", code, resp.Code, resp.Remark)
	}
	return resp
}

// goClientRoute decodes a TopicRouteData body the way rocketmq-client-go
// does (its hand-written decoder, see the remoting reference §2.1):
// queueDatas must be an array of numbers; orderTopicConf is read as text;
// each brokerAddrs object is taken as raw text, its first and last bytes
// cut, split at commas, each item split at its first colon, quotes dropped
// from both halves and the id parsed (a failed parse is id 0).
type goClientRoute struct {
	OrderTopicConf string
	Queues         []struct {
		BrokerName     string `json:"brokerName"`
		ReadQueueNums  int    `json:"readQueueNums"`
		WriteQueueNums int    `json:"writeQueueNums"`
		Perm           int    `json:"perm"`
	}
	Brokers []goClientBroker
}

type goClientBroker struct {
	Cluster, BrokerName string
	Addrs               map[int64]string
}

func decodeLikeGoClient(t *testing.T, body []byte) goClientRoute {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("route body is not JSON: %v\n%s", err, body)
	}
	var rt goClientRoute
	qd := top["queueDatas"]
	if len(qd) == 0 || qd[0] != '[' {
		t.Fatalf("queueDatas is %s, not an array (the Go client fails to decode)", qd)
	}
	if err := json.Unmarshal(qd, &rt.Queues); err != nil {
		t.Fatalf("queueDatas: %v (numbers must be JSON numbers)", err)
	}
	if otc, ok := top["orderTopicConf"]; ok && string(otc) != "null" {
		if err := json.Unmarshal(otc, &rt.OrderTopicConf); err != nil {
			t.Fatalf("orderTopicConf: %v", err)
		}
	}
	var bds []map[string]json.RawMessage
	if err := json.Unmarshal(top["brokerDatas"], &bds); err != nil {
		t.Fatalf("brokerDatas: %v", err)
	}
	for _, bd := range bds {
		b := goClientBroker{Addrs: map[int64]string{}}
		_ = json.Unmarshal(bd["cluster"], &b.Cluster)
		_ = json.Unmarshal(bd["brokerName"], &b.BrokerName)
		raw := string(bd["brokerAddrs"])
		if len(raw) < 2 || raw == "null" {
			t.Fatalf("brokerAddrs %q: the Go client panics", raw)
		}
		for _, item := range strings.Split(raw[1:len(raw)-1], ",") {
			i := strings.Index(item, ":")
			if i < 0 {
				continue
			}
			id, _ := strconv.ParseInt(strings.ReplaceAll(item[:i], `"`, ""), 10, 64)
			b.Addrs[id] = strings.ReplaceAll(item[i+1:], `"`, "")
		}
		rt.Brokers = append(rt.Brokers, b)
	}
	return rt
}

// rmqCluster registers two groups of DefaultCluster (a master and a slave
// each) and a third group of another cluster, over gRPC on the port that
// also serves remoting.
func rmqCluster(t *testing.T, s *Server) {
	t.Helper()
	c := dial(t, s.Addr())
	register(t, c, registerReq("broker-a", 0, "127.0.0.1:10911", "orders", "common"))
	register(t, c, registerReq("broker-a", 1, "127.0.0.1:10921", "orders", "common"))
	register(t, c, registerReq("broker-b", 0, "127.0.0.1:10931", "common", "pay"))
	register(t, c, registerReq("broker-b", 1, "127.0.0.1:10941", "common", "pay"))
	other := registerReq("broker-c", 0, "127.0.0.1:10951", "common", "audit")
	other.Cluster = "OtherCluster"
	register(t, c, other)
}

func TestRemotingRouteHasRocketMQShape(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	rmqCluster(t, s)
	c := rmqDial(t, s.Addr())

	resp := rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"})
	want := `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a",` +
		`"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},` +
		`"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	if string(resp.Body) != want {
		t.Fatalf("route body\n got %s\nwant %s", resp.Body, want)
	}

	resp = rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "common"})
	if bytes.ContainsAny(resp.Body, " \t\r\n") {
		t.Fatalf("route body has whitespace (breaks the Go client's brokerAddrs split): %s", resp.Body)
	}
	if bytes.Contains(resp.Body, []byte("null")) {
		t.Fatalf("route body has a null: %s", resp.Body)
	}
	rt := decodeLikeGoClient(t, resp.Body)
	if rt.OrderTopicConf != "" {
		t.Fatalf("orderTopicConf %q", rt.OrderTopicConf)
	}
	if len(rt.Queues) != 3 || rt.Queues[0].BrokerName != "broker-a" || rt.Queues[1].BrokerName != "broker-b" ||
		rt.Queues[2].BrokerName != "broker-c" || rt.Queues[2].WriteQueueNums != 4 || rt.Queues[2].ReadQueueNums != 4 ||
		rt.Queues[2].Perm != 6 {
		t.Fatalf("queues %+v", rt.Queues)
	}
	wantBrokers := []goClientBroker{
		{"DefaultCluster", "broker-a", map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}},
		{"DefaultCluster", "broker-b", map[int64]string{0: "127.0.0.1:10931", 1: "127.0.0.1:10941"}},
		{"OtherCluster", "broker-c", map[int64]string{0: "127.0.0.1:10951"}},
	}
	if !reflect.DeepEqual(rt.Brokers, wantBrokers) {
		t.Fatalf("brokers as the Go client reads them\n got %+v\nwant %+v", rt.Brokers, wantBrokers)
	}

	// A topic no group serves: TOPIC_NOT_EXIST with a remark, no body.
	resp = rmqCall(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "NoSuchTopic"})
	if resp.Code != remoting.TopicNotExist || !strings.Contains(resp.Remark, "NoSuchTopic") || len(resp.Body) != 0 {
		t.Fatalf("missing topic: code %d remark %q body %q", resp.Code, resp.Remark, resp.Body)
	}
	resp = rmqCall(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "bad topic"})
	if resp.Code != remoting.TopicNotExist {
		t.Fatalf("illegal topic: code %d %q", resp.Code, resp.Remark)
	}
	resp = rmqCall(t, c, remoting.GetRouteInfoByTopic, nil)
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "topic") {
		t.Fatalf("no topic field: code %d %q", resp.Code, resp.Remark)
	}
}

func TestRemotingClusterInfoAndTopicLists(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	rmqCluster(t, s)
	c := rmqDial(t, s.Addr())

	resp := rmqOK(t, c, remoting.GetBrokerClusterInfo, nil)
	if bytes.ContainsAny(resp.Body, " \t\r\n") {
		t.Fatalf("cluster info has whitespace: %s", resp.Body)
	}
	var ci struct {
		BrokerAddrTable map[string]struct {
			Cluster     string            `json:"cluster"`
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
	}
	if err := json.Unmarshal(resp.Body, &ci); err != nil {
		t.Fatalf("cluster info: %v\n%s", err, resp.Body)
	}
	if !reflect.DeepEqual(ci.ClusterAddrTable, map[string][]string{
		"DefaultCluster": {"broker-a", "broker-b"}, "OtherCluster": {"broker-c"},
	}) {
		t.Fatalf("clusterAddrTable %v", ci.ClusterAddrTable)
	}
	b := ci.BrokerAddrTable["broker-b"]
	if len(ci.BrokerAddrTable) != 3 || b.Cluster != "DefaultCluster" || b.BrokerName != "broker-b" ||
		!reflect.DeepEqual(b.BrokerAddrs, map[string]string{"0": "127.0.0.1:10931", "1": "127.0.0.1:10941"}) {
		t.Fatalf("brokerAddrTable %+v", ci.BrokerAddrTable)
	}

	resp = rmqOK(t, c, remoting.GetAllTopicListFromNameServer, nil)
	if string(resp.Body) != `{"topicList":["audit","common","orders","pay"]}` {
		t.Fatalf("topic list %s", resp.Body)
	}
	resp = rmqOK(t, c, remoting.GetTopicsByCluster, map[string]string{"cluster": "OtherCluster"})
	if string(resp.Body) != `{"topicList":["audit","common"]}` {
		t.Fatalf("topics of OtherCluster %s", resp.Body)
	}
	resp = rmqOK(t, c, remoting.GetTopicsByCluster, map[string]string{"cluster": "NoCluster"})
	if string(resp.Body) != `{"topicList":[]}` {
		t.Fatalf("topics of an unknown cluster %s", resp.Body)
	}
	resp = rmqOK(t, c, remoting.GetSystemTopicListFromNS, nil)
	if string(resp.Body) != `{"brokerAddr":"127.0.0.1:10911","topicList":["DefaultCluster","OtherCluster","broker-a","broker-b","broker-c"]}` {
		t.Fatalf("system topics %s", resp.Body)
	}
}

func TestRemotingDeleteTopic(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	rmqCluster(t, s)
	c := rmqDial(t, s.Addr())

	// Of one cluster: the other cluster's group keeps serving it.
	rmqOK(t, c, remoting.DeleteTopicInNameServer, map[string]string{"topic": "common", "clusterName": "DefaultCluster"})
	rt := decodeLikeGoClient(t, rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "common"}).Body)
	if len(rt.Queues) != 1 || rt.Queues[0].BrokerName != "broker-c" {
		t.Fatalf("after deleting from DefaultCluster: %+v", rt.Queues)
	}
	// Of every group, then again: nothing left to delete still succeeds.
	rmqOK(t, c, remoting.DeleteTopicInNameServer, map[string]string{"topic": "common"})
	rmqOK(t, c, remoting.DeleteTopicInNameServer, map[string]string{"topic": "common", "clusterName": "DefaultCluster"})
	if resp := rmqCall(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "common"}); resp.Code != remoting.TopicNotExist {
		t.Fatalf("deleted topic: code %d", resp.Code)
	}
	if _, err := route(t, dial(t, s.Addr()), "common"); !errors.Is(err, wire.ErrTopicNotExist) {
		t.Fatalf("gRPC still routes the deleted topic: %v", err)
	}
	if resp := rmqCall(t, c, remoting.DeleteTopicInNameServer, nil); resp.Code != remoting.SystemError {
		t.Fatalf("delete without a topic: code %d", resp.Code)
	}
}

func TestRemotingUnsupportedCodesKeepTheConnection(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	rmqCluster(t, s)
	c := rmqDial(t, s.Addr())

	for _, code := range []int32{remoting.RegisterBroker, remoting.SendMessage, remoting.WipeWritePermOfBroker, 9999} {
		resp := rmqCall(t, c, code, map[string]string{"topic": "orders"})
		if resp.Code != remoting.RequestCodeNotSupported || resp.Remark == "" {
			t.Fatalf("code %d: answered %d %q; want %d with a remark", code, resp.Code, resp.Remark, remoting.RequestCodeNotSupported)
		}
	}
	rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"})

	// Key-value configuration, as mqadmin's order configuration uses it.
	kv := map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "orders"}
	if resp := rmqCall(t, c, remoting.GetKVConfig, kv); resp.Code != remoting.QueryNotFound || resp.Remark == "" {
		t.Fatalf("get of a missing key: code %d %q", resp.Code, resp.Remark)
	}
	if resp := rmqCall(t, c, remoting.GetKVListByNamespace, map[string]string{"namespace": "ORDER_TOPIC_CONFIG"}); resp.Code != remoting.QueryNotFound {
		t.Fatalf("list of an empty namespace: code %d", resp.Code)
	}
	rmqOK(t, c, remoting.PutKVConfig, map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "orders", "value": "broker-a:4"})
	if v := rmqOK(t, c, remoting.GetKVConfig, kv).String("value"); v != "broker-a:4" {
		t.Fatalf("value %q", v)
	}
	if body := rmqOK(t, c, remoting.GetKVListByNamespace, map[string]string{"namespace": "ORDER_TOPIC_CONFIG"}).Body; string(body) != `{"table":{"orders":"broker-a:4"}}` {
		t.Fatalf("kv list %s", body)
	}
	// The order configuration never reaches the route: Bolide does not
	// serve RocketMQ's orderTopicConf.
	if body := rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"}).Body; bytes.Contains(body, []byte("orderTopicConf")) {
		t.Fatalf("route carries an order configuration: %s", body)
	}
	rmqOK(t, c, remoting.DeleteKVConfig, kv)
	if resp := rmqCall(t, c, remoting.GetKVConfig, kv); resp.Code != remoting.QueryNotFound {
		t.Fatalf("get after delete: code %d", resp.Code)
	}
	if resp := rmqCall(t, c, remoting.PutKVConfig, map[string]string{"key": "x"}); resp.Code != remoting.SystemError {
		t.Fatalf("put without a namespace: code %d", resp.Code)
	}

	// Remoting calls are timed next to the gRPC ones.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "rocketmq_rpc_latency" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			calls[l["protocol_type"]+" "+l["request_code"]+" "+l["response_code"]] += m.GetHistogram().GetSampleCount()
		}
	}
	if calls["remoting 103 3"] != 1 || calls["remoting unsupported 3"] != 3 || calls["remoting 105 0"] != 2 || calls["remoting 101 22"] != 2 {
		t.Errorf("remoting latency samples %v", calls)
	}
}

func TestRemotingSharesThePortWithGRPC(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	g := dial(t, s.Addr())
	register(t, g, registerReq("broker-a", 0, "127.0.0.1:10911", "orders"))
	c := rmqDial(t, s.Addr())
	rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"})
	// gRPC keeps working beside an open remoting connection, and a change
	// made over one protocol is seen over the other.
	again := registerReq("broker-a", 0, "127.0.0.1:10911", "orders", "pay")
	again.DataVersion.Counter++
	register(t, g, again)
	rmqOK(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "pay"})
	rmqOK(t, c, remoting.DeleteTopicInNameServer, map[string]string{"topic": "pay"})
	if _, err := route(t, g, "pay"); !errors.Is(err, wire.ErrTopicNotExist) {
		t.Fatalf("gRPC after a remoting delete: %v", err)
	}
}

func TestRemotingOffClosesRemotingConnections(t *testing.T) {
	s := startServer(t, func(o *Options) {
		o.GossipAddr = GossipOff
		o.Remoting = false
	})
	g := dial(t, s.Addr())
	register(t, g, registerReq("broker-a", 0, "127.0.0.1:10911", "orders"))
	c := rmqDial(t, s.Addr())
	if resp, err := c.Invoke(ctx(t), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil)); err == nil {
		t.Fatalf("remoting is off, yet a request was answered: %+v", resp)
	}
	if _, err := route(t, g, "orders"); err != nil {
		t.Fatalf("gRPC with remoting off: %v", err)
	}
}

// rawExchange writes frame bytes on a plain TCP connection and returns the
// answer's frame (after its length) and its decoded header as JSON.
func rawExchange(t *testing.T, addr string, header string) (map[string]json.RawMessage, []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(header))) // serType 0: JSON
	frame = append(frame, header...)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	resp, err := remoting.ReadFrame(nc, remoting.DefaultMaxFrame, nil)
	if err != nil {
		t.Fatalf("no answer to %s: %v", header, err)
	}
	word := binary.BigEndian.Uint32(resp)
	if word>>24 != 0 {
		t.Fatalf("answer header serialisation %d, want 0 (JSON)", word>>24)
	}
	hl := int(word & 0xFFFFFF)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(resp[4:4+hl], &h); err != nil {
		t.Fatalf("answer header: %v\n%s", err, resp[4:4+hl])
	}
	return h, resp[4+hl:]
}

// The exact frames the Go client and the Java client write (the reference's
// capture and Java's header shape) get answers both can read: flag bit 0
// set, the request's opaque, extFields as strings, the route in the body.
func TestRemotingAnswersClientFramesAsWritten(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	rmqCluster(t, s)
	for name, header := range map[string]string{
		"go":   `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"orders"}}`,
		"java": `{"code":105,"extFields":{"topic":"orders"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":505}`,
	} {
		h, body := rawExchange(t, s.Addr(), header)
		var code, flag, opaque int
		_ = json.Unmarshal(h["code"], &code)
		_ = json.Unmarshal(h["flag"], &flag)
		_ = json.Unmarshal(h["opaque"], &opaque)
		wantOpaque := map[string]int{"go": 1, "java": 42}[name]
		if code != 0 || flag&1 != 1 || opaque != wantOpaque {
			t.Fatalf("%s: header %s", name, h)
		}
		var ext map[string]string // the Go client drops a frame whose values are not strings
		if raw, ok := h["extFields"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &ext); err != nil {
				t.Fatalf("%s: extFields %s: %v", name, raw, err)
			}
		}
		if rt := decodeLikeGoClient(t, body); len(rt.Brokers) != 1 || rt.Brokers[0].Addrs[0] != "127.0.0.1:10911" {
			t.Fatalf("%s: route %s", name, body)
		}
	}

	// A connection speaking none of the port's protocols is closed.
	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatalf("an HTTP/1 connection got %d bytes; want it closed", n)
	}
}
