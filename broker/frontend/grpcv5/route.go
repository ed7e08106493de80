package grpcv5

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/v5wire"
)

// QueryRoute and QueryAssignment belong to the access point, the
// NameServer (nameserver/v5.go), which knows every broker group of a topic
// and every group's FIFO setting. Some clients send them to a broker all
// the same: the Node.js (1.0.8) and Java (5.x) push consumers ask a broker
// of the topic's route for their assignments, and a client may be given a
// broker as its access point. A broker answers them by relaying the call,
// with the client's headers, to its NameServers' v5 service (the first that
// answers), so the answer is the access point's, whole. The relay dials as
// the broker's other links to its NameServers do (TLS with --tls-dial) and
// signs with the broker's own credentials (--access-key), not the client's:
// the broker has authenticated and authorized the client itself (auth.go).
// A NameServer that refuses the broker's credentials counts as one that did
// not answer (logged). A broker with no
// NameServer, or none reachable, answers from its own topic table (Apache's
// "Local" mode: this broker's queues only).

// relayTimeout bounds a relayed call when the client's call has no
// earlier deadline.
const relayTimeout = 3 * time.Second

// relayedHeaders are the headers a relayed call carries on (not the
// client's credentials: the relay signs with the broker's).
var relayedHeaders = []string{headerClientID, headerNamespace, headerLanguage, headerVersion, headerRequestID,
	"x-mq-protocol"}

// routeRelay holds the connections to the broker's NameServers.
type routeRelay struct {
	b     *broker.Broker
	log   *zap.Logger
	addrs []string
	// dial are the connections' options (transport and per-call
	// credentials); dialErr, when set, is why none can be opened.
	dial    []grpc.DialOption
	dialErr error

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newRouteRelay(b *broker.Broker, addrs []string, log *zap.Logger) *routeRelay {
	r := &routeRelay{b: b, log: log, addrs: addrs, conns: make(map[string]*grpc.ClientConn)}
	d, err := remote.NewDialOptions(b.Options().TLS, nil, b.Credentials())
	if err != nil {
		r.dialErr = err
		if len(addrs) > 0 {
			log.Error("v5 access point: NameServers cannot be dialled; routes are answered from this broker's topics", zap.Error(err))
		}
	} else {
		r.dial = d.GRPCOptions()
	}
	return r
}

// conn returns the connection to a NameServer, opening it. The first one
// opened starts the goroutine that closes them all when the broker stops.
func (r *routeRelay) conn(addr string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errorf(v2.Code_INTERNAL_SERVER_ERROR, "the broker is stopping")
	}
	if c := r.conns[addr]; c != nil {
		return c, nil
	}
	if r.dialErr != nil {
		return nil, r.dialErr
	}
	c, err := grpc.NewClient(addr, r.dial...)
	if err != nil {
		return nil, err
	}
	if len(r.conns) == 0 {
		go r.closeOnStop()
	}
	r.conns[addr] = c
	return c, nil
}

func (r *routeRelay) closeOnStop() {
	<-r.b.Stopping()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for addr, c := range r.conns {
		_ = c.Close()
		delete(r.conns, addr)
	}
}

// relay calls the NameServers in turn with the client's headers until one
// answers; ok is false when none did.
func relay[Resp any](ctx context.Context, r *routeRelay, call func(context.Context, v2.MessagingServiceClient) (Resp, error)) (resp Resp, ok bool) {
	if len(r.addrs) == 0 {
		return resp, false
	}
	out := metadata.MD{}
	if in, ok := metadata.FromIncomingContext(ctx); ok {
		for _, k := range relayedHeaders {
			if v := in.Get(k); len(v) > 0 {
				out.Set(k, v...)
			}
		}
	}
	for _, addr := range r.addrs {
		c, err := r.conn(addr)
		if err != nil {
			r.log.Debug("v5 access point: NameServer not dialled", zap.String("nameServer", addr), zap.Error(err))
			continue
		}
		cctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, out), relayTimeout)
		resp, err = call(cctx, v2.NewMessagingServiceClient(c))
		cancel()
		if err == nil {
			if st, ok := any(resp).(interface{ GetStatus() *v2.Status }); ok && st.GetStatus().GetCode() == v2.Code_UNAUTHORIZED {
				r.log.Warn("v5 access point: the NameServer refused the broker's credentials (set --access-key and --secret-key of an admin user of its ACL)",
					zap.String("nameServer", addr), zap.String("reason", st.GetStatus().GetMessage()))
				continue
			}
			return resp, true
		}
		r.log.Debug("v5 access point: NameServer did not answer", zap.String("nameServer", addr), zap.Error(err))
	}
	return resp, false
}

// QueryRoute answers with the NameServers' route of the topic, else with
// this broker's queues of it.
func (s *Service) QueryRoute(ctx context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	if resp, ok := relay(ctx, s.routes, func(ctx context.Context, c v2.MessagingServiceClient) (*v2.QueryRouteResponse, error) {
		return c.QueryRoute(ctx, req)
	}); ok {
		return resp, nil
	}
	mqs, err := s.localQueues(readMeta(ctx), req.GetTopic())
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	return &v2.QueryRouteResponse{Status: okStatus(), MessageQueues: mqs}, nil
}

// QueryAssignment answers with the NameServers' assignments, else with
// this broker's: one assignment with queue id -1 (any queue: POP shares the
// work), or for a FIFO group one per readable queue.
func (s *Service) QueryAssignment(ctx context.Context, req *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	if resp, ok := relay(ctx, s.routes, func(ctx context.Context, c v2.MessagingServiceClient) (*v2.QueryAssignmentResponse, error) {
		return c.QueryAssignment(ctx, req)
	}); ok {
		return resp, nil
	}
	m := readMeta(ctx)
	group, err := m.groupName(req.GetGroup())
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	mqs, err := s.localQueues(m, req.GetTopic())
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	cfg := s.groupConfig(group)
	fifo := cfg.Fifo()
	var out []*v2.Assignment
	for _, mq := range mqs {
		if mq.Permission != v2.Permission_READ && mq.Permission != v2.Permission_READ_WRITE {
			continue
		}
		if !fifo {
			mq.Id, mq.AcceptMessageTypes = -1, nil
			out = append(out, &v2.Assignment{MessageQueue: mq})
			break
		}
		mq.AcceptMessageTypes = nil
		out = append(out, &v2.Assignment{MessageQueue: mq})
	}
	if len(out) == 0 {
		return &v2.QueryAssignmentResponse{Status: statusOf(errorf(v2.Code_FORBIDDEN, "no readable queue"))}, nil
	}
	return &v2.QueryAssignmentResponse{Status: okStatus(), Assignments: out}, nil
}

// localQueues lists this broker's queues of a topic as a route does:
// numbered from 0, each with its permission and the types the topic
// accepts.
func (s *Service) localQueues(m callMeta, r *v2.Resource) ([]*v2.MessageQueue, error) {
	t, err := m.topicName(r)
	if err != nil {
		return nil, err
	}
	tc, ok := s.topics.get(t)
	if !ok {
		return nil, errorf(v2.Code_TOPIC_NOT_FOUND, "topic %s does not exist on broker %s", t, s.limits.brokerName)
	}
	ep, ok := v5wire.Endpoints(s.b.Addr())
	if !ok {
		return nil, errorf(v2.Code_INTERNAL_SERVER_ERROR, "broker address %q is not host:port", s.b.Addr())
	}
	var id int32
	if !s.b.IsMaster() {
		id = int32(s.b.Info().BrokerID)
	}
	b := &v2.Broker{Name: s.limits.brokerName, Id: id, Endpoints: ep}
	types := v5wire.AcceptTypes(tc.Attributes[topic.AttrMessageType])
	perms := v5wire.QueuePermissions(tc.Readable(), tc.Writable(), tc.ReadQueueNums, tc.WriteQueueNums)
	out := make([]*v2.MessageQueue, 0, len(perms))
	for i, perm := range perms {
		out = append(out, &v2.MessageQueue{Topic: r, Id: int32(i), Broker: b, AcceptMessageTypes: types, Permission: perm})
	}
	return out, nil
}
