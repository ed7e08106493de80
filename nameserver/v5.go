package nameserver

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/v5wire"
	"github.com/bolide-mq/bolide/internal/wire"
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

// registerV5 adds the access point to the NameServer's gRPC server: as
// generated with ACL off, else guarded (guardedV5).
func (s *Server) registerV5(srv grpc.ServiceRegistrar) {
	a := &accessPoint{s: s}
	if !s.guard.Enabled() {
		v2.RegisterMessagingServiceServer(srv, a)
		return
	}
	srv.RegisterService(a.guardedDesc(), a)
}

// Access control (the NameServer's --acl). With ACL on, the access
// point's two RPCs are authenticated by their authorization and
// x-mq-date-time headers (auth.Guard.Header: signature, clock skew,
// replay from another connection) and authorized by what they name, as
// on the brokers: QueryRoute needs PUB or SUB on the topic,
// QueryAssignment SUB on the group and the topic (names folded into the
// call's namespace). A refusal is the response's Status: UNAUTHORIZED
// (40100) or FORBIDDEN (40300) with the guard's message. Every other RPC
// of the service is not served here and answers gRPC's Unimplemented
// without reading its request.

// guardedDesc is the service's description with QueryRoute and
// QueryAssignment guarded and every other RPC refused.
func (a *accessPoint) guardedDesc() *grpc.ServiceDesc {
	d := v2.MessagingService_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	d.Streams = append([]grpc.StreamDesc(nil), d.Streams...)
	for i := range d.Methods {
		name, orig := d.Methods[i].MethodName, d.Methods[i].Handler
		switch name {
		case "QueryRoute", "QueryAssignment":
			d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, outer grpc.UnaryServerInterceptor) (any, error) {
				return orig(srv, ctx, dec, a.guardUnary(outer))
			}
		default:
			d.Methods[i].Handler = func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
				return nil, status.Errorf(codes.Unimplemented, "method %s is not served by the access point", name)
			}
		}
	}
	for i := range d.Streams {
		name := d.Streams[i].StreamName
		d.Streams[i].Handler = func(any, grpc.ServerStream) error {
			return status.Errorf(codes.Unimplemented, "method %s is not served by the access point", name)
		}
	}
	return &d
}

// guardUnary is the interceptor QueryRoute and QueryAssignment run with:
// the server's own (outer) around the check, which answers a refusal
// without calling the handler.
func (a *accessPoint) guardUnary(outer grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		inner := func(ctx context.Context, req any) (any, error) {
			if st := a.check(ctx, req); st != nil {
				switch req.(type) {
				case *v2.QueryRouteRequest:
					return &v2.QueryRouteResponse{Status: st}, nil
				case *v2.QueryAssignmentRequest:
					return &v2.QueryAssignmentResponse{Status: st}, nil
				}
				return nil, status.Error(codes.PermissionDenied, st.GetMessage())
			}
			return handler(ctx, req)
		}
		if outer == nil {
			return inner(ctx, req)
		}
		return outer(ctx, req, info, inner)
	}
}

// check authenticates and authorizes a QueryRoute or QueryAssignment: a
// non-nil status is the refusal.
func (a *accessPoint) check(ctx context.Context, req any) *v2.Status {
	g := a.s.guard
	p, from, err := wire.Authenticate(ctx, g)
	if err != nil {
		return v5AuthStatus(err)
	}
	var needs []auth.Need
	switch r := req.(type) {
	case *v2.QueryRouteRequest:
		topic, st := v5Topic(ctx, r.GetTopic())
		if st != nil {
			return st
		}
		needs = append(needs, auth.TopicNeed(topic, auth.Any))
	case *v2.QueryAssignmentRequest:
		group, st := v5Group(ctx, r.GetGroup())
		if st != nil {
			return st
		}
		topic, st := v5Topic(ctx, r.GetTopic())
		if st != nil {
			return st
		}
		needs = append(needs, auth.GroupNeed(group, auth.Sub), auth.TopicNeed(topic, auth.Sub))
	default:
		return v5Status(v2.Code_FORBIDDEN, fmt.Sprintf("%T is not served by the access point", req))
	}
	if err := g.Authorize(p, from, needs...); err != nil {
		return v5AuthStatus(err)
	}
	return nil
}

// v5AuthStatus is the status of a guard's refusal: UNAUTHORIZED (40100)
// when the caller is not authenticated, FORBIDDEN (40300) otherwise.
func v5AuthStatus(err error) *v2.Status {
	if errcode.Of(err) == errcode.Unauthenticated {
		return v5Status(v2.Code_UNAUTHORIZED, err.Error())
	}
	return v5Status(v2.Code_FORBIDDEN, err.Error())
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
		types := v5wire.AcceptTypes(g.queues.MessageType)
		for id, perm := range v5wire.QueuePermissions(g.queues.Perm&permRead != 0, g.queues.Perm&permWrite != 0, g.queues.ReadQueues, g.queues.WriteQueues) {
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
		perm := v5wire.Permission(q.Perm&permRead != 0, q.Perm&permWrite != 0)
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
		ep, ok := v5wire.Endpoints(addr)
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

// Permission bits of a topic (RocketMQ's PermName).
const (
	permRead  = 4
	permWrite = 2
)

// Namespaces fold as the brokers' v5 front end folds them (package
// internal/v5wire): the Resource's namespace, else the x-mq-namespace
// header.

func v5Namespace(ctx context.Context, r *v2.Resource) string {
	if ns := strings.TrimSpace(r.GetResourceNamespace()); ns != "" {
		return ns
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if vs := md.Get(v5wire.NamespaceHeader); len(vs) > 0 {
			return strings.TrimSpace(vs[0])
		}
	}
	return ""
}

// v5Topic is the (folded) topic a Resource names: ILLEGAL_TOPIC when it is
// not a legal name or a system topic.
func v5Topic(ctx context.Context, r *v2.Resource) (string, *v2.Status) {
	name, code, msg := v5wire.TopicName(v5Namespace(ctx, r), r.GetName())
	if code != v2.Code_OK {
		return "", v5Status(code, msg)
	}
	return name, nil
}

// v5Group is the (folded) consumer group a Resource names:
// ILLEGAL_CONSUMER_GROUP when it is not a legal name.
func v5Group(ctx context.Context, r *v2.Resource) (string, *v2.Status) {
	name, code, msg := v5wire.GroupName(v5Namespace(ctx, r), r.GetName())
	if code != v2.Code_OK {
		return "", v5Status(code, msg)
	}
	return name, nil
}
