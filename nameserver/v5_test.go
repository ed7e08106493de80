package nameserver

import (
	"context"
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// dialV5 returns an apache.rocketmq.v2 client of addr: over TLS without
// verification (the Go client's default) or in the clear (Node.js's).
func dialV5(t *testing.T, addr string, useTLS bool) v2.MessagingServiceClient {
	t.Helper()
	creds := insecure.NewCredentials()
	if useTLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return v2.NewMessagingServiceClient(cc)
}

func topicConfig(name string, read, write, perm int32, msgType string) *pb.TopicConfig {
	tc := &pb.TopicConfig{Name: name, ReadQueueNums: read, WriteQueueNums: write, Perm: perm}
	if msgType != "" {
		tc.Attributes = map[string]string{"message.type": msgType}
	}
	return tc
}

func registerTopics(t *testing.T, c pb.NameServerClient, name string, id int64, addr string, fifo []string, topics ...*pb.TopicConfig) {
	t.Helper()
	req := registerReq(name, id, addr)
	req.Topics = topics
	req.FifoGroups = fifo
	register(t, c, req)
}

func res(name string) *v2.Resource { return &v2.Resource{Name: name} }

func queryRoute(t *testing.T, c v2.MessagingServiceClient, r *v2.Resource) *v2.QueryRouteResponse {
	t.Helper()
	resp, err := c.QueryRoute(ctx(t), &v2.QueryRouteRequest{Topic: r})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func queryAssignment(t *testing.T, c v2.MessagingServiceClient, topic, group string) *v2.QueryAssignmentResponse {
	t.Helper()
	resp, err := c.QueryAssignment(ctx(t), &v2.QueryAssignmentRequest{Topic: res(topic), Group: res(group)})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func ep(scheme v2.AddressScheme, host string, port int32) *v2.Endpoints {
	return &v2.Endpoints{Scheme: scheme, Addresses: []*v2.Address{{Host: host, Port: port}}}
}

var allTypes = []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}

// v5Cluster registers three broker groups: broker-a (a host name, FIFO
// topic, a slave), broker-b (IPv4, more read than write queues, no type),
// broker-c (IPv6, only a slave alive: left out of v5 routes).
func v5Cluster(t *testing.T, fifoGroups ...string) *Server {
	t.Helper()
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	c := dial(t, s.Addr())
	registerTopics(t, c, "broker-b", 0, "127.0.0.1:20911", nil,
		topicConfig("orders", 4, 2, 6, ""), topicConfig("events", 2, 2, 6, "transaction"))
	registerTopics(t, c, "broker-a", 0, "broker-a.example:10911", fifoGroups,
		topicConfig("orders", 2, 2, 6, "FIFO"), topicConfig("shop%orders", 1, 1, 6, "NORMAL"),
		topicConfig("writeonly", 2, 2, 2, "DELAY"))
	registerTopics(t, c, "broker-a", 1, "broker-a-slave.example:10911", nil, topicConfig("orders", 2, 2, 6, "FIFO"))
	registerTopics(t, c, "broker-c", 0, "[::1]:30911", nil, topicConfig("v6", 1, 1, 6, ""))
	registerTopics(t, c, "broker-d", 0, "127.0.0.1:40911", nil, topicConfig("slaveonly", 1, 1, 6, ""))
	registerTopics(t, c, "broker-d", 1, "127.0.0.1:40921", nil)
	if _, err := c.UnregisterBroker(ctx(t), &pb.UnregisterBrokerRequest{
		Cluster: "DefaultCluster", BrokerName: "broker-d", BrokerAddr: "127.0.0.1:40911", BrokerId: 0}); err != nil {
		t.Fatal(err)
	}
	// The slave keeps the group, and so its queue data, without a master.
	registerTopics(t, c, "broker-d", 1, "127.0.0.1:40921", nil)
	return s
}

func TestV5QueryRoute(t *testing.T) {
	s := v5Cluster(t)
	brokerA := &v2.Broker{Name: "broker-a", Id: 0, Endpoints: ep(v2.AddressScheme_DOMAIN_NAME, "broker-a.example", 10911)}
	brokerB := &v2.Broker{Name: "broker-b", Id: 0, Endpoints: ep(v2.AddressScheme_IPv4, "127.0.0.1", 20911)}
	mq := func(r *v2.Resource, b *v2.Broker, id int32, perm v2.Permission, types ...v2.MessageType) *v2.MessageQueue {
		return &v2.MessageQueue{Topic: r, Id: id, Permission: perm, Broker: b, AcceptMessageTypes: types}
	}
	orders := res("orders")
	want := []*v2.MessageQueue{
		// Masters only, by broker name; queues from 0 per broker.
		mq(orders, brokerA, 0, v2.Permission_READ_WRITE, v2.MessageType_FIFO),
		mq(orders, brokerA, 1, v2.Permission_READ_WRITE, v2.MessageType_FIFO),
		mq(orders, brokerB, 0, v2.Permission_READ_WRITE, allTypes...),
		mq(orders, brokerB, 1, v2.Permission_READ_WRITE, allTypes...),
		mq(orders, brokerB, 2, v2.Permission_READ, allTypes...),
		mq(orders, brokerB, 3, v2.Permission_READ, allTypes...),
	}
	for _, useTLS := range []bool{false, true} {
		c := dialV5(t, s.Addr(), useTLS)
		resp := queryRoute(t, c, orders)
		if resp.Status.GetCode() != v2.Code_OK || len(resp.MessageQueues) != len(want) {
			t.Fatalf("tls %v: %v, %d queues: %v", useTLS, resp.Status, len(resp.MessageQueues), resp.MessageQueues)
		}
		for i := range want {
			if !proto.Equal(resp.MessageQueues[i], want[i]) {
				t.Errorf("tls %v: queue %d = %v, want %v", useTLS, i, resp.MessageQueues[i], want[i])
			}
		}
		// Stable: the clients replace their cache only when a route differs.
		if again := queryRoute(t, c, orders); !proto.Equal(again, resp) {
			t.Errorf("tls %v: a second answer differs: %v", useTLS, again)
		}
	}
	c := dialV5(t, s.Addr(), true)

	// Transaction type, IPv6, a write-only topic.
	if r := queryRoute(t, c, res("events")); len(r.MessageQueues) != 2 ||
		!proto.Equal(r.MessageQueues[1], mq(res("events"), brokerB, 1, v2.Permission_READ_WRITE, v2.MessageType_TRANSACTION)) {
		t.Errorf("events: %v", r)
	}
	brokerC := &v2.Broker{Name: "broker-c", Id: 0, Endpoints: ep(v2.AddressScheme_IPv6, "::1", 30911)}
	if r := queryRoute(t, c, res("v6")); len(r.MessageQueues) != 1 ||
		!proto.Equal(r.MessageQueues[0], mq(res("v6"), brokerC, 0, v2.Permission_READ_WRITE, allTypes...)) {
		t.Errorf("v6: %v", r)
	}
	if r := queryRoute(t, c, res("writeonly")); len(r.MessageQueues) != 2 ||
		r.MessageQueues[0].Permission != v2.Permission_WRITE || r.MessageQueues[0].AcceptMessageTypes[0] != v2.MessageType_DELAY {
		t.Errorf("writeonly: %v", r)
	}

	// A namespace folds into the topic name, from the Resource or the header.
	shop := &v2.Resource{ResourceNamespace: "shop", Name: "orders"}
	if r := queryRoute(t, c, shop); r.Status.GetCode() != v2.Code_OK || len(r.MessageQueues) != 1 ||
		!proto.Equal(r.MessageQueues[0].Topic, shop) || r.MessageQueues[0].AcceptMessageTypes[0] != v2.MessageType_NORMAL {
		t.Errorf("namespaced: %v", r)
	}
	hctx := metadata.AppendToOutgoingContext(ctx(t), "x-mq-namespace", "shop")
	if r, err := c.QueryRoute(hctx, &v2.QueryRouteRequest{Topic: orders}); err != nil || len(r.MessageQueues) != 1 {
		t.Errorf("namespace header: %v %v", r, err)
	}

	for _, tc := range []struct {
		topic *v2.Resource
		code  v2.Code
	}{
		{res("nosuch"), v2.Code_TOPIC_NOT_FOUND},
		{res(""), v2.Code_ILLEGAL_TOPIC},
		{res("bad topic!"), v2.Code_ILLEGAL_TOPIC},
		{res("RMQ_SYS_TRANS_HALF_TOPIC"), v2.Code_ILLEGAL_TOPIC},
		{&v2.Resource{ResourceNamespace: "a%b", Name: "orders"}, v2.Code_ILLEGAL_TOPIC},
		{nil, v2.Code_ILLEGAL_TOPIC},
		// Only a slave is left: no endpoint to send or receive through.
		{res("slaveonly"), v2.Code_NOT_FOUND},
	} {
		if r := queryRoute(t, c, tc.topic); r.Status.GetCode() != tc.code || len(r.MessageQueues) != 0 {
			t.Errorf("topic %v: %v, %d queues; want %v", tc.topic, r.Status, len(r.MessageQueues), tc.code)
		}
	}
}

func TestV5QueryAssignment(t *testing.T) {
	s := v5Cluster(t, "ordered")
	c := dialV5(t, s.Addr(), false)
	brokerA := &v2.Broker{Name: "broker-a", Id: 0, Endpoints: ep(v2.AddressScheme_DOMAIN_NAME, "broker-a.example", 10911)}
	brokerB := &v2.Broker{Name: "broker-b", Id: 0, Endpoints: ep(v2.AddressScheme_IPv4, "127.0.0.1", 20911)}
	assign := func(b *v2.Broker, id int32) *v2.Assignment {
		return &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: res("orders"), Id: id, Permission: v2.Permission_READ_WRITE, Broker: b}}
	}
	check := func(group string, want ...*v2.Assignment) {
		t.Helper()
		r := queryAssignment(t, c, "orders", group)
		if r.Status.GetCode() != v2.Code_OK || len(r.Assignments) != len(want) {
			t.Fatalf("%s: %v %v", group, r.Status, r.Assignments)
		}
		for i := range want {
			if !proto.Equal(r.Assignments[i], want[i]) {
				t.Errorf("%s: assignment %d = %v, want %v", group, i, r.Assignments[i], want[i])
			}
		}
	}
	// Concurrent group: one per master, any queue (-1).
	check("plain", assign(brokerA, -1), assign(brokerB, -1))
	// FIFO group: one per readable queue.
	check("ordered", assign(brokerA, 0), assign(brokerA, 1),
		assign(brokerB, 0), assign(brokerB, 1), assign(brokerB, 2), assign(brokerB, 3))

	// The master's next registration replaces its FIFO groups.
	registerTopics(t, dial(t, s.Addr()), "broker-a", 0, "broker-a.example:10911", nil, topicConfig("orders", 2, 2, 6, "FIFO"))
	check("ordered", assign(brokerA, -1), assign(brokerB, -1))

	for _, tc := range []struct {
		topic, group string
		code         v2.Code
	}{
		{"writeonly", "plain", v2.Code_FORBIDDEN},
		{"nosuch", "plain", v2.Code_TOPIC_NOT_FOUND},
		{"orders", "", v2.Code_ILLEGAL_CONSUMER_GROUP},
		{"orders", "bad group!", v2.Code_ILLEGAL_CONSUMER_GROUP},
		{"slaveonly", "plain", v2.Code_NOT_FOUND},
	} {
		if r := queryAssignment(t, c, tc.topic, tc.group); r.Status.GetCode() != tc.code || len(r.Assignments) != 0 {
			t.Errorf("%s/%s: %v %v; want %v", tc.topic, tc.group, r.Status, r.Assignments, tc.code)
		}
	}
}

func TestV5OtherRPCsAreNotServedAtTheAccessPoint(t *testing.T) {
	s := startServer(t, func(o *Options) { o.GossipAddr = GossipOff })
	c := dialV5(t, s.Addr(), true)
	_, err := c.Heartbeat(ctx(t), &v2.HeartbeatRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Heartbeat: %v, want Unimplemented", err)
	}
	_, err = c.SendMessage(context.Background(), &v2.SendMessageRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("SendMessage: %v, want Unimplemented", err)
	}
}
