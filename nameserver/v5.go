package nameserver

import (
	"context"
	"net"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/message"
)

// attrMessageType is the topic attribute holding RocketMQ 5's topic message
// type (broker/topic.AttrMessageType).
const attrMessageType = "message.type"

// accessPoint is apache.rocketmq.v2.MessagingService as RocketMQ 5's
// clients find it at their access point: QueryRoute and QueryAssignment
// from the route table. Every other RPC goes to the brokers a route names
// (the clients send nothing else to the access point) and answers gRPC's
// Unimplemented here.
type accessPoint struct {
	v2.UnimplementedMessagingServiceServer
	s *Server
}

// registerV5 adds the access point to the NameServer's gRPC server.
func (s *Server) registerV5(srv grpc.ServiceRegistrar) {
	v2.RegisterMessagingServiceServer(srv, &accessPoint{s: s})
}

// v5Status is a response status.
func v5Status(code v2.Code, msg string) *v2.Status {
	if msg == "" {
		msg = code.String()
	}
	return &v2.Status{Code: code, Message: msg}
}

var v5OK = v5Status(v2.Code_OK, "")

// QueryRoute lists, for each broker group serving the topic whose master is
// registered (sorted by broker name), the master and its queues. The
// master's endpoints are its registered address, the port that serves v5.
func (a *accessPoint) QueryRoute(ctx context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	topic, st := v5Topic(ctx, req.GetTopic())
	if st != nil {
		return &v2.QueryRouteResponse{Status: st}, nil
	}
	groups, st := a.masters(topic)
	if st != nil {
		return &v2.QueryRouteResponse{Status: st}, nil
	}
	var mqs []*v2.MessageQueue
	for _, g := range groups {
		types := acceptTypes(g.queues.MessageType)
		for id, perm := range queuePermissions(g.queues) {
			mqs = append(mqs, &v2.MessageQueue{
				Topic: req.GetTopic(), Id: int32(id), Permission: perm, Broker: g.broker,
				AcceptMessageTypes: types,
			})
		}
	}
	return &v2.QueryRouteResponse{Status: v5OK, MessageQueues: mqs}, nil
}

// QueryAssignment tells a push consumer which queues to receive from: for
// each broker group with readable queues, one assignment whose queue id is
// -1 ("any queue of this broker": POP spreads the group's consumers), or
// for a group that consumes in order one per readable queue, so each
// queue's order is kept. Every consumer of the group gets them all, as from
// Apache's proxy.
func (a *accessPoint) QueryAssignment(ctx context.Context, req *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	topic, st := v5Topic(ctx, req.GetTopic())
	if st != nil {
		return &v2.QueryAssignmentResponse{Status: st}, nil
	}
	group, st := v5Group(ctx, req.GetGroup())
	if st != nil {
		return &v2.QueryAssignmentResponse{Status: st}, nil
	}
	groups, st := a.masters(topic)
	if st != nil {
		return &v2.QueryAssignmentResponse{Status: st}, nil
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.queues.BrokerName
	}
	fifo := a.s.routes.FifoGroup(group, names...)
	var out []*v2.Assignment
	for _, g := range groups {
		q := g.queues
		if q.Perm&permRead == 0 || q.ReadQueues <= 0 {
			continue
		}
		perm := permission(q.Perm&permRead != 0, q.Perm&permWrite != 0)
		if !fifo {
			out = append(out, &v2.Assignment{MessageQueue: &v2.MessageQueue{
				Topic: req.GetTopic(), Id: -1, Permission: perm, Broker: g.broker}})
			continue
		}
		for id := int32(0); id < q.ReadQueues; id++ {
			out = append(out, &v2.Assignment{MessageQueue: &v2.MessageQueue{
				Topic: req.GetTopic(), Id: id, Permission: perm, Broker: g.broker}})
		}
	}
	if len(out) == 0 {
		return &v2.QueryAssignmentResponse{Status: v5Status(v2.Code_FORBIDDEN, "no readable queue")}, nil
	}
	return &v2.QueryAssignmentResponse{Status: v5OK, Assignments: out}, nil
}

// routedGroup is one broker group of a topic's route with a registered
// master.
type routedGroup struct {
	queues QueueData
	broker *v2.Broker // the master
}

// masters returns the topic's broker groups that have a master, sorted by
// broker name: TOPIC_NOT_FOUND when no group serves the topic, NOT_FOUND
// when none of those has a registered master (only slaves are left).
func (a *accessPoint) masters(topic string) ([]routedGroup, *v2.Status) {
	rt, err := a.s.routes.Route(topic)
	if err != nil {
		return nil, v5Status(v2.Code_TOPIC_NOT_FOUND, "topic "+topic+" not found")
	}
	addrs := make(map[string]string, len(rt.Brokers))
	for _, b := range rt.Brokers {
		addrs[b.BrokerName] = b.Addrs[MasterID]
	}
	var out []routedGroup
	for _, q := range rt.Queues { // sorted by broker name
		addr := addrs[q.BrokerName]
		if addr == "" {
			continue
		}
		ep, ok := endpoints(addr)
		if !ok {
			a.s.lg.Warn("v5 route: broker address is not host:port; broker left out",
				zap.String("broker_name", q.BrokerName), zap.String("broker_addr", addr))
			continue
		}
		out = append(out, routedGroup{queues: q, broker: &v2.Broker{Name: q.BrokerName, Id: MasterID, Endpoints: ep}})
	}
	if len(out) == 0 {
		return nil, v5Status(v2.Code_NOT_FOUND, "no master broker of topic "+topic+" is registered")
	}
	return out, nil
}

// endpoints turns a registered host:port into one address: scheme IPv4 or
// IPv6 for an IP literal, DOMAIN_NAME otherwise. The clients need exactly
// one address (Go panics on none; Java refuses several with DOMAIN_NAME).
func endpoints(addr string) (*v2.Endpoints, bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return nil, false
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return nil, false
	}
	scheme := v2.AddressScheme_DOMAIN_NAME
	if ip := net.ParseIP(host); ip != nil {
		scheme = v2.AddressScheme_IPv6
		if ip.To4() != nil {
			scheme = v2.AddressScheme_IPv4
		}
	}
	return &v2.Endpoints{Scheme: scheme, Addresses: []*v2.Address{{Host: host, Port: int32(port)}}}, true
}

// Permission bits of a topic (RocketMQ's PermName).
const (
	permRead  = 4
	permWrite = 2
)

// queuePermissions numbers a group's queues from 0 and gives each its
// permission: queue i is readable when the topic is and i < the read queue
// count, writable likewise. A topic neither readable nor writable has
// max(1, read, write) queues with permission NONE, as Apache lists them.
func queuePermissions(q QueueData) []v2.Permission {
	n := max(q.ReadQueues, q.WriteQueues)
	if q.Perm&(permRead|permWrite) == 0 {
		n = max(n, 1)
	}
	out := make([]v2.Permission, n)
	for i := range n {
		out[i] = permission(q.Perm&permRead != 0 && i < q.ReadQueues, q.Perm&permWrite != 0 && i < q.WriteQueues)
	}
	return out
}

func permission(read, write bool) v2.Permission {
	switch {
	case read && write:
		return v2.Permission_READ_WRITE
	case read:
		return v2.Permission_READ
	case write:
		return v2.Permission_WRITE
	}
	return v2.Permission_NONE
}

// acceptTypes maps a topic's message.type attribute to the types its queues
// accept. No attribute, MIXED or an unknown value accept all four, as
// Bolide's brokers do (topic.Config.MessageType).
func acceptTypes(attr string) []v2.MessageType {
	switch strings.ToUpper(strings.TrimSpace(attr)) {
	case "NORMAL":
		return []v2.MessageType{v2.MessageType_NORMAL}
	case "FIFO":
		return []v2.MessageType{v2.MessageType_FIFO}
	case "DELAY":
		return []v2.MessageType{v2.MessageType_DELAY}
	case "TRANSACTION":
		return []v2.MessageType{v2.MessageType_TRANSACTION}
	}
	return []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}
}

// Namespaces, as the brokers' v5 front end folds them (Apache's
// NamespaceUtil): the Resource's namespace, else the x-mq-namespace header;
// a non-empty namespace makes name "<namespace>%<name>" unless it already
// starts so; retry and dead-letter prefixes stay outside.

const nsHeader = "x-mq-namespace"

func v5Namespace(ctx context.Context, r *v2.Resource) (string, bool) {
	ns := strings.TrimSpace(r.GetResourceNamespace())
	if ns == "" {
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if vs := md.Get(nsHeader); len(vs) > 0 {
				ns = strings.TrimSpace(vs[0])
			}
		}
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return ns, true
}

func foldName(ns, name string) string {
	if ns == "" || name == "" {
		return name
	}
	for _, p := range []string{message.RetryTopicPrefix, message.DLQTopicPrefix} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return p + foldName(ns, rest)
		}
	}
	if strings.HasPrefix(name, ns+"%") {
		return name
	}
	return ns + "%" + name
}

// v5Topic is the (folded) topic a Resource names: ILLEGAL_TOPIC when it is
// not a legal name or a system topic.
func v5Topic(ctx context.Context, r *v2.Resource) (string, *v2.Status) {
	ns, ok := v5Namespace(ctx, r)
	if !ok {
		return "", v5Status(v2.Code_ILLEGAL_TOPIC, "namespace may hold only letters, digits, '_' and '-'")
	}
	name := foldName(ns, r.GetName())
	if err := message.ValidateTopic(name); err != nil {
		return "", v5Status(v2.Code_ILLEGAL_TOPIC, "topic "+strconv.Quote(r.GetName())+": "+err.Error())
	}
	if message.IsSystemTopic(name) {
		return "", v5Status(v2.Code_ILLEGAL_TOPIC, "topic "+name+" is reserved for the broker")
	}
	return name, nil
}

// v5Group is the (folded) consumer group a Resource names:
// ILLEGAL_CONSUMER_GROUP when it is not a legal name.
func v5Group(ctx context.Context, r *v2.Resource) (string, *v2.Status) {
	ns, ok := v5Namespace(ctx, r)
	if !ok {
		return "", v5Status(v2.Code_ILLEGAL_CONSUMER_GROUP, "namespace may hold only letters, digits, '_' and '-'")
	}
	name := foldName(ns, r.GetName())
	if err := message.ValidateGroup(name); err != nil {
		return "", v5Status(v2.Code_ILLEGAL_CONSUMER_GROUP, "consumer group "+strconv.Quote(r.GetName())+": "+err.Error())
	}
	return name, nil
}
