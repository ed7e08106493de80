package nameserver

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// The NameServer can embed a failover controller (Options.Controller): a
// member of the controller Raft group, whose gRPC service shares the
// NameServer's port. It starts with the NameServer and stops first when
// it closes (its heartbeat streams would hold the gRPC drain otherwise).

// newController builds the embedded controller and registers its service,
// or does nothing when it is off.
func (s *Server) newController() error {
	if s.opts.Controller == nil {
		s.lg.Info("controller: off")
		return nil
	}
	co := s.opts.controllerOptions()
	co.Guard = s.guard // the controller's gRPC service and Raft transport share the NameServer's access control
	// The Raft transport follows the NameServer's TLS (mode, certificate,
	// client certificates, dialing) and signs its handshakes with the
	// NameServer's credentials.
	tc := s.opts.TLS
	tc.CertFile, tc.KeyFile = s.opts.TLSCertFile, s.opts.TLSKeyFile
	co.Raft = controller.RaftSecurity{TLS: tc, Certs: s.certs, Credentials: s.opts.Credentials}
	ctl, err := controller.New(co, s.lg.Named("controller"))
	if err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	ctl.Register(s.grpc)
	s.ctl = ctl
	s.lg.Info("controller: on", zap.String("id", co.ID), zap.String("raft_addr", ctl.RaftAddr()),
		zap.String("peers", controller.FormatPeers(co.Peers)), zap.String("dir", co.Dir),
		zap.Duration("broker_timeout", co.BrokerTimeout), zap.Duration("lease", co.Lease),
		zap.Bool("unclean_election", co.UncleanElection), zap.Stringer("raft_tls_mode", tc.Mode),
		zap.Bool("raft_tls_dial", tc.Dial || tc.Mode == tlsconf.Enforcing), zap.Bool("raft_auth", s.guard.Enabled()))
	return nil
}

// Controller is the embedded controller, nil when it is off.
func (s *Server) Controller() *controller.Controller { return s.ctl }
