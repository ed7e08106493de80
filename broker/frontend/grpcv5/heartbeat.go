package grpcv5

import (
	"context"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// Heartbeat keeps a client alive (every 10 s from the clients). It is
// answered OK even before the client's Settings arrived on Telemetry (the
// first heartbeat races them; Apache answers UNRECOGNIZED_CLIENT_TYPE,
// which the clients only log). A named group must be legal.
//
// A heartbeat without x-mq-client-id is answered OK too, with nothing to
// record: the Go client (v5.1.4) probes a broker with an unsigned, empty
// heartbeat when its Telemetry stream recovers from an error, and drops the
// stream unless the answer is OK.
func (s *Service) Heartbeat(ctx context.Context, req *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	m := readMeta(ctx)
	if req.GetGroup().GetName() != "" {
		if _, err := m.groupName(req.GetGroup()); err != nil {
			return &v2.HeartbeatResponse{Status: statusOf(err)}, nil
		}
	}
	if m.clientID != "" {
		// The beat keeps the client's core session, and so the POP
		// renewal of its auto-renewed messages, alive.
		s.clients.touch(m).beat()
	}
	return &v2.HeartbeatResponse{Status: okStatus()}, nil
}

// NotifyClientTermination forgets a client that stops: its session closes
// (the core forgets its producer topics and group membership), its
// Telemetry streams end, and the POP messages it had auto-renewed become
// visible again after about 1 s (the core's ReleaseClient). A client the
// broker does not know is answered OK too.
func (s *Service) NotifyClientTermination(ctx context.Context, _ *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	m := readMeta(ctx)
	if err := m.requireClient(); err != nil {
		return &v2.NotifyClientTerminationResponse{Status: statusOf(err)}, nil
	}
	if c := s.clients.get(m.clientID); c != nil {
		s.clients.drop(c, "terminated")
	} else {
		s.releaseClient(m.clientID)
	}
	return &v2.NotifyClientTerminationResponse{Status: okStatus()}, nil
}
