package grpcv5

import (
	"go.uber.org/zap"
	"google.golang.org/grpc"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
)

// Service is apache.rocketmq.v2.MessagingService over one broker core. Its
// RPCs live in files named for them; an RPC it does not serve answers
// gRPC's Unimplemented through the embedded default.
type Service struct {
	v2.UnimplementedMessagingServiceServer

	b     *broker.Broker
	log   *zap.Logger
	guard *auth.Guard // the broker's access control (auth.go)

	// limits are the broker settings the RPCs need, read once.
	limits limits
	// clients are the connected clients by x-mq-client-id (clients.go).
	clients *clientTable
	// topics caches the broker's topic table for sends (send.go).
	topics *topicCache
	// routes relays QueryRoute and QueryAssignment to the NameServers (route.go).
	routes *routeRelay
}

// limits are the broker's options the service reads on every call (the
// options are large to copy per call and these do not change while it
// runs). The body limit is not among them: maxMessageSize may change at
// runtime, so it is read from the core per call (Broker.MaxMessageSize).
type limits struct {
	brokerName  string
	maxProps    int
	longPollMax int64 // ms
}

// New returns the service of core b.
func New(b *broker.Broker, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	o := b.Options()
	s := &Service{b: b, log: log, guard: b.Guard(), limits: limits{
		brokerName: o.BrokerName, maxProps: o.MaxPropertiesSize,
		longPollMax: o.LongPollMax.Milliseconds(),
	}}
	s.clients = newClientTable(s, o.ClientExpiry)
	s.topics = newTopicCache(b)
	s.routes = newRouteRelay(b, o.NameServers, log)
	return s
}

// Register adds the service to a gRPC server (the broker's port serves
// bolide.v1 and apache.rocketmq.v2 from one grpc.Server). With the
// broker's ACL on, every RPC is authenticated and authorized first
// (auth.go).
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	s.register(srv)
}
