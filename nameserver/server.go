package nameserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/aclrpc"
	"github.com/bolide-mq/bolide/internal/membership"
	"github.com/bolide-mq/bolide/internal/portmux"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// closeTimeout bounds Close's graceful drain of in-flight RPCs.
const closeTimeout = 5 * time.Second

// maxRecvMsgSize lets a broker register a large topic table in one call.
const maxRecvMsgSize = 16 << 20

// Server is a NameServer: the route table, its front ends (gRPC and
// RocketMQ's remoting, sharing one port), the sweep that evicts silent
// brokers and the gossip node that reports dead ones.
type Server struct {
	opts   Options
	lg     *zap.Logger
	routes *Routes
	lis    net.Listener
	mux    *portmux.Mux // sorts the port's connections: gRPC, frames, remoting
	grpc   *grpc.Server
	// members is the gossip node, nil when membership is off. Atomic:
	// membership callbacks may run before New has stored it.
	members atomic.Pointer[membership.Node]
	// metrics are the RPC histograms (metrics.go).
	metrics serverMetrics
	// kv is the remoting protocol's key-value configuration (kv.go), nil
	// when remoting is off.
	kv *kvConfig
	// ctl is the embedded failover controller, nil when off (controller.go).
	ctl *controller.Controller
	// ident probes the holders of broker identities (identity.go).
	ident *identityGuard
	// guard is the access control of every protocol the NameServer (and
	// its controller) serves (package auth).
	guard *auth.Guard
	// certs is the port's certificate source, shared with the controller's
	// Raft transport and the identity probes.
	certs *tlsconf.Source

	quit  chan struct{} // closed by Close: stops the loops
	joinc chan string   // gossip addresses of registered brokers missing from the pool
	wg    sync.WaitGroup

	mu      sync.Mutex // mu protects started and closed
	started bool
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// New validates opts, binds the gRPC listener and the gossip port (port 0
// works for both) and builds the server. Nothing is served until Start.
func New(opts Options, lg *zap.Logger) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	s := &Server{
		opts:   opts,
		lg:     lg,
		routes: NewRoutes(opts.BrokerTimeout),
		ident:  newIdentityGuard(),
		quit:   make(chan struct{}),
		joinc:  make(chan string, 64),
	}
	guard, err := auth.New(opts.Auth, lg.Named("auth"))
	if err != nil {
		return nil, fmt.Errorf("nameserver: %w", err)
	}
	s.guard = guard
	tc := opts.TLS
	tc.CertFile, tc.KeyFile = opts.TLSCertFile, opts.TLSKeyFile
	certs, err := tlsconf.Open(tc, lg.Named("tls"))
	if err != nil {
		return nil, fmt.Errorf("nameserver: %w", err)
	}
	s.certs = certs
	lis, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("nameserver: listen %s: %w", opts.ListenAddr, err)
	}
	s.lis = lis
	if addr := opts.gossipBindAddr(); addr != "" {
		mo := membership.DefaultOptions()
		mo.BindAddr = addr
		mo.Role = membership.RoleNameServer
		mo.Meta = map[string]string{membership.MetaAddr: s.Addr()}
		mo.Profile = opts.GossipProfile
		mo.SecretKey = opts.GossipKey
		mo.OnJoin = s.memberJoined
		mo.OnLeave = s.memberLeft
		node, err := membership.New(mo, lg.Named("gossip"))
		if err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("nameserver: gossip: %w", err)
		}
		s.members.Store(node)
	} else if len(opts.GossipSeeds) > 0 {
		lg.Warn("gossip is off: seeds ignored", zap.Strings("seeds", opts.GossipSeeds))
	}
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.ChainUnaryInterceptor(s.observeRPC),
		// Clients and brokers may keep idle connections alive with pings,
		// as often as every second (RocketMQ 5's clients set their own
		// keepalive; a stricter policy would close their connections).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	)
	pb.RegisterNameServerServer(s.grpc, &service{s: s})
	pb.RegisterAclServer(s.grpc, aclrpc.New(s.guard, s.authorizeRPC))
	s.registerV5(s.grpc) // RocketMQ 5's access point (v5.go)
	if err := s.newController(); err != nil {
		_ = lis.Close()
		if n := s.members.Load(); n != nil {
			_ = n.Close()
		}
		return nil, err
	}
	protos := []portmux.Protocol{grpcProtocol{s.grpc}}
	if !opts.NoFrames {
		protos = append(protos, s.newFrames())
	}
	if opts.Remoting {
		protos = append(protos, s.newRemoting())
	}
	s.mux = portmux.NewMux(lis, lg.Named("port"), protos...)
	s.mux.SetTLS(certs.PortTLS(opts.TLS.Mode))
	return s, nil
}

// Addr is the bound address (gRPC and remoting).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// GossipAddr is the NameServer's gossip address, "" when membership is off.
// Brokers learn it from RegisterBroker and join the pool through it.
func (s *Server) GossipAddr() string {
	if n := s.members.Load(); n != nil {
		return n.GossipAddr()
	}
	return ""
}

// Routes is the server's route table.
func (s *Server) Routes() *Routes { return s.routes }

// Start serves the port and starts the sweep and the gossip joins (of the
// seeds, and of registered brokers missing from the pool).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("nameserver: start after close")
	case s.started:
		return errors.New("nameserver: already started")
	}
	if s.ctl != nil {
		if err := s.ctl.Start(); err != nil {
			return fmt.Errorf("nameserver: %w", err)
		}
	}
	s.started = true
	s.mux.Serve()
	s.goFunc(s.sweepLoop)
	if s.members.Load() != nil {
		s.goFunc(s.joinBrokers)
		if len(s.opts.GossipSeeds) > 0 {
			s.goFunc(s.joinLoop)
		}
	}
	s.lg.Info("nameserver started", zap.String("addr", s.Addr()), zap.String("gossip_addr", s.GossipAddr()))
	return nil
}

func (s *Server) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// sweepLoop evicts brokers silent longer than their heartbeat timeout.
func (s *Server) sweepLoop() {
	t := time.NewTicker(s.opts.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			for _, lb := range s.routes.Sweep(now) {
				s.lg.Warn("broker expired: no registration within its timeout",
					brokerFields(lb, zap.Duration("silent", now.Sub(lb.LastUpdate)), zap.Duration("timeout", lb.Timeout))...)
			}
		}
	}
}

// joinLoop joins the gossip seeds, and joins them again whenever this node
// finds itself alone (seeds that were not up yet, or a healed partition).
func (s *Server) joinLoop() {
	node := s.members.Load()
	t := time.NewTicker(s.opts.ScanInterval)
	defer t.Stop()
	for {
		if len(node.Members()) <= 1 {
			if k, err := node.Join(s.opts.GossipSeeds...); err != nil {
				s.lg.Info("gossip: seeds not reachable yet", zap.Strings("seeds", s.opts.GossipSeeds), zap.Error(err))
			} else {
				s.lg.Info("gossip: joined", zap.Strings("seeds", s.opts.GossipSeeds), zap.Int("reached", k))
			}
		}
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// inPool reports whether a gossip address is an alive member.
func inPool(node *membership.Node, addr string) bool {
	for _, m := range node.Members() {
		if m.GossipAddr == addr {
			return true
		}
	}
	return false
}

// ensureMember asks joinBrokers to join a registered broker's gossip node
// when it is not in the pool: a broker the failure detector once declared
// dead by mistake, or one cut off by a partition that has healed, comes
// back under watch within one heartbeat. It never blocks a registration.
func (s *Server) ensureMember(addr string) {
	node := s.members.Load()
	if node == nil || addr == "" || inPool(node, addr) {
		return
	}
	select {
	case s.joinc <- addr:
	default: // a burst: the next heartbeat asks again
	}
}

// joinBrokers joins the gossip addresses ensureMember queues.
func (s *Server) joinBrokers() {
	node := s.members.Load()
	for {
		select {
		case <-s.quit:
			return
		case addr := <-s.joinc:
			if inPool(node, addr) {
				continue
			}
			if _, err := node.Join(addr); err != nil {
				s.lg.Debug("gossip: could not join a registered broker", zap.String("gossip_addr", addr), zap.Error(err))
			} else {
				s.lg.Info("gossip: joined a registered broker missing from the pool", zap.String("gossip_addr", addr))
			}
		}
	}
}

func (s *Server) memberJoined(m membership.Member) {
	s.lg.Debug("gossip: member joined", zap.String("name", m.Name), zap.String("role", string(m.Role)),
		zap.String("gossip_addr", m.GossipAddr))
}

// memberLeft drops every broker registered from a gossip node that left or
// died. A node seen alive again at that address (a restart that rejoined
// before the event arrived) is left alone.
func (s *Server) memberLeft(m membership.Member) {
	if m.Role != membership.RoleBroker {
		s.lg.Info("gossip: member left", zap.String("name", m.Name), zap.String("role", string(m.Role)),
			zap.String("gossip_addr", m.GossipAddr))
		return
	}
	if node := s.members.Load(); node != nil && inPool(node, m.GossipAddr) {
		s.lg.Info("gossip: broker left but is back", zap.String("name", m.Name), zap.String("gossip_addr", m.GossipAddr))
		return
	}
	gone := s.routes.RemoveByGossipAddr(m.GossipAddr, m.Meta[membership.MetaAddr])
	if len(gone) == 0 {
		s.lg.Info("gossip: broker left; it was not registered", zap.String("name", m.Name), zap.String("gossip_addr", m.GossipAddr))
	}
	for _, lb := range gone {
		s.lg.Warn("broker removed: its gossip node left or died", brokerFields(lb, zap.String("node", m.Name))...)
	}
}

func brokerFields(lb LiveBroker, extra ...zap.Field) []zap.Field {
	return append([]zap.Field{
		zap.String("cluster", lb.Cluster),
		zap.String("broker_name", lb.BrokerName),
		zap.Int64("broker_id", lb.ID),
		zap.String("broker_addr", lb.Addr),
		zap.String("gossip_addr", lb.GossipAddr),
	}, extra...)
}

// Close stops the server: it stops accepting, drains in-flight calls for up
// to 5 s, stops the loops and leaves the gossip pool. A gossip join in
// flight to an unreachable address can hold it up to memberlist's TCP
// timeout (10 s with the lan profile). It is idempotent.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown is Close with the drain bounded by ctx instead: when ctx ends,
// in-flight calls are cut off.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(ctx) })
	return s.closeErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	started := s.started
	s.mu.Unlock()

	var errs []error
	if s.ctl != nil {
		errs = append(errs, s.ctl.Close())
	}
	// Before Start this only closes the listener.
	if err := s.mux.Shutdown(ctx); err != nil && started {
		s.lg.Warn("nameserver: drain deadline passed; cut off in-flight calls", zap.Error(err))
	}
	close(s.quit)
	if n := s.members.Load(); n != nil {
		errs = append(errs, n.Close())
	}
	s.wg.Wait()
	s.lg.Info("nameserver stopped", zap.String("addr", s.Addr()))
	return errors.Join(errs...)
}

// Guard is the NameServer's access control (package auth). Never nil.
func (s *Server) Guard() *auth.Guard { return s.guard }
