// Package server assembles a broker as the daemon runs it: the listener,
// the broker core (package broker) with its links to the NameServers and
// to its master (package broker/remote), and the front ends that serve the
// port, in the clear and over TLS as opts.TLS.Mode says (gRPC — bolide.v1 and, unless WithV5(false), RocketMQ 5's
// apache.rocketmq.v2 — frames and remoting, package broker/frontend/...). cmd/bolide-broker and
// the in-process test clusters build brokers with New.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/frontend"
	"github.com/bolide-mq/bolide/broker/frontend/framed"
	"github.com/bolide-mq/bolide/broker/frontend/grpcapi"
	"github.com/bolide-mq/bolide/broker/frontend/grpcv5"
	"github.com/bolide-mq/bolide/broker/frontend/remoting"
	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// Server is a broker core serving its front ends on one port. The core's
// methods are promoted; Start, Shutdown and Close cover the port too.
type Server struct {
	*broker.Broker
	mux *frontend.Mux
	log *zap.Logger

	closeOnce sync.Once
	closeErr  error
}

// Option changes what New assembles.
type Option func(*config)

type config struct {
	remoting bool
	v5       bool
}

// WithRemoting turns RocketMQ's remoting protocol on the port on or off
// (on by default).
func WithRemoting(on bool) Option { return func(c *config) { c.remoting = on } }

// WithV5 turns RocketMQ 5's gRPC protocol (apache.rocketmq.v2.MessagingService,
// the official v5 clients' protocol) on the port on or off (on by default).
func WithV5(on bool) Option { return func(c *config) { c.v5 = on } }

// New binds opts.ListenAddr (":0" picks a free port), then opens the core
// (validating the options, recovering the store) and the front ends.
// Serving starts with Start.
func New(opts broker.Options, log *zap.Logger, options ...Option) (*Server, error) {
	cfg := config{remoting: true, v5: true}
	for _, o := range options {
		o(&cfg)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// opts.TLS: the port's mode, its certificate (CertFile and KeyFile,
	// reloaded when they change; both empty: a self-signed one) and client
	// certificates.
	certs, err := tlsconf.Open(opts.TLS, log.Named("tls"))
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	lis, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen %s: %w", opts.ListenAddr, err)
	}
	// The links to the NameServers, the controllers, the master and the
	// slaves: TLS when opts.TLS.Dial, every call signed with
	// opts.Credentials.
	links, err := remote.NewDialOptions(opts.TLS, certs, opts.Credentials)
	if err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("broker: %w", err)
	}
	with := []broker.Option{broker.WithAddr(lis.Addr().String()),
		broker.WithNameServers(remote.NewNameServers(links)), broker.WithMasterClient(remote.NewMasterClient(links)),
		broker.WithTLSSource(certs)}
	if opts.Replication.ControllerMode() {
		with = append(with, broker.WithControllers(remote.NewControllers(links)))
	}
	core, err := broker.New(opts, log, with...)
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	var services []func(grpc.ServiceRegistrar)
	if cfg.v5 {
		services = append(services, grpcv5.New(core, log.Named("v5")).Register)
	}
	fes := []frontend.Frontend{
		grpcapi.New(core, services...),
		framed.New(core, grpcapi.MaxMessage, log.Named("frame")),
	}
	if cfg.remoting {
		fes = append(fes, remoting.New(core, log.Named("remoting")))
	}
	mux := frontend.NewMux(lis, log.Named("port"), fes...)
	mux.SetTLS(certs.PortTLS(opts.TLS.Mode))
	return &Server{Broker: core, mux: mux, log: log}, nil
}

// ListenAddr is the address the port is bound to; Addr, the core's, is
// the one the broker advertises (AdvertiseAddr when set).
func (s *Server) ListenAddr() string { return s.mux.Addr().String() }

// Start serves the port, then starts the core (services, registration).
func (s *Server) Start() error {
	s.mux.Serve()
	return s.Broker.Start()
}

// CloseDrain bounds how long Close waits for in-flight calls.
const CloseDrain = 5 * time.Second

// Close is Shutdown with CloseDrain (5 s) for in-flight calls. It is idempotent.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), CloseDrain)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown unregisters and stops the core's services (ending parked pulls
// and client sessions), drains the front ends until ctx ends, then persists
// offsets and closes the store. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var errs []error
		errs = append(errs, s.Broker.Quiesce())
		if err := s.mux.Shutdown(ctx); err != nil {
			s.log.Warn("front ends did not drain in time: calls still running were cut off", zap.Error(err))
		}
		errs = append(errs, s.Broker.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
