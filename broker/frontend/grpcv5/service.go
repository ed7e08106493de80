package grpcv5

import (
	"go.uber.org/zap"
	"google.golang.org/grpc"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
)

// Service is apache.rocketmq.v2.MessagingService over one broker core. Its
// RPCs live in files named for them; an RPC it does not serve answers
// gRPC's Unimplemented through the embedded default.
type Service struct {
	v2.UnimplementedMessagingServiceServer

	b   *broker.Broker
	log *zap.Logger
}

// New returns the service of core b.
func New(b *broker.Broker, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	return &Service{b: b, log: log}
}

// Register adds the service to a gRPC server (the broker's port serves
// bolide.v1 and apache.rocketmq.v2 from one grpc.Server).
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	v2.RegisterMessagingServiceServer(srv, s)
}
