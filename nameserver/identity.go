package nameserver

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// Broker identity: a broker name and id belong to one address at a time.
// A registration for a name and id that a live broker at another address
// holds is refused (INVALID_PARAMETER, naming both addresses) so that a
// second broker started with the same --broker-name and --broker-id cannot
// take the first one's routes. The holder counts as gone, and the new
// address takes the id over, when it unregistered, was evicted by the
// sweep or reported dead by gossip (it is no longer in the table), or when
// a TCP dial of its registered address fails (a restart on a new port).
// A master registering with an epoch higher than the holder's is a promoted
// slave and replaces it, as before (epoch fencing).
//
// With --tls-dial (on with --tls-mode enforcing) the probe completes a TLS
// handshake after the TCP connection, presenting the NameServer's
// certificate, so that a holder whose port accepts TLS only sees a proper
// client (not a plaintext connection it refuses, logs and counts). The
// probe asks for reachability only: the holder counts as alive once the
// TCP connection is accepted, whatever the handshake's outcome (a
// certificate this NameServer does not trust does not hand the identity
// to another address). It makes no call, so it carries no credentials.

const (
	// probeTimeout bounds the reachability dial of a holder's address.
	probeTimeout = 500 * time.Millisecond
	// probeTTL is how long a probe's answer is reused.
	probeTTL = 2 * time.Second
	// refusalLogEvery rate-limits the WARN line per identity and address.
	refusalLogEvery = time.Minute
)

type probeResult struct {
	alive bool
	at    time.Time
}

// identityGuard probes holders and rate-limits refusal logs.
type identityGuard struct {
	mu      sync.Mutex
	probes  map[string]probeResult // holder address -> last probe
	logged  map[string]time.Time   // identity and refused address -> last WARN
	dial    func(ctx context.Context, addr string) error
	timeout time.Duration
	ttl     time.Duration

	tlsOnce sync.Once
	tls     atomic.Pointer[tls.Config] // nil: plain TCP probes
}

func newIdentityGuard() *identityGuard {
	g := &identityGuard{
		probes:  make(map[string]probeResult),
		logged:  make(map[string]time.Time),
		timeout: probeTimeout,
		ttl:     probeTTL,
	}
	g.dial = g.probe
	return g
}

// useTLS makes the probes complete a TLS handshake when the NameServer
// dials other daemons with TLS (c.Dial), presenting the certificate of
// certs (the NameServer's port's; nil: none). The first call decides.
func (g *identityGuard) useTLS(c tlsconf.Config, certs *tlsconf.Source, lg *zap.Logger) {
	g.tlsOnce.Do(func() {
		if !c.Dial {
			return
		}
		cfg, err := tlsconf.ClientConfig(c, certs)
		if err != nil {
			lg.Warn("identity probes stay plain TCP", zap.Error(err))
			return
		}
		g.tls.Store(cfg)
	})
}

// probe dials addr and, when probes use TLS, shakes hands; only the TCP
// connection decides reachability.
func (g *identityGuard) probe(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg := g.tls.Load()
	if cfg == nil {
		return nil
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(c, cfg)
	_ = tc.HandshakeContext(ctx) // accepted is alive, whatever the handshake says
	_ = tc.Close()
	return nil
}

// reachable reports whether addr accepts a TCP connection, from a cached
// answer younger than probeTTL or a fresh dial. Called without the routes
// lock.
func (g *identityGuard) reachable(addr string, now time.Time) bool {
	g.mu.Lock()
	if p, ok := g.probes[addr]; ok && now.Sub(p.at) < g.ttl {
		g.mu.Unlock()
		return p.alive
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	alive := g.dial(ctx, addr) == nil
	cancel()
	g.mu.Lock()
	defer g.mu.Unlock()
	for a, p := range g.probes { // keep the cache small
		if now.Sub(p.at) >= g.ttl {
			delete(g.probes, a)
		}
	}
	g.probes[addr] = probeResult{alive: alive, at: now}
	return alive
}

// shouldLog reports whether a refusal for key is logged now.
func (g *identityGuard) shouldLog(key string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if last, ok := g.logged[key]; ok && now.Sub(last) < refusalLogEvery {
		return false
	}
	for k, t := range g.logged {
		if now.Sub(t) >= refusalLogEvery {
			delete(g.logged, k)
		}
	}
	g.logged[key] = now
	return true
}

// guardIdentity prepares reg for Routes.Register: the table refuses it if
// another live address holds its name and id, unless that holder did not
// answer a probe just now.
func (s *Server) guardIdentity(reg *Registration, now time.Time) {
	reg.guard = true
	s.ident.useTLS(s.opts.TLS, s.certs, s.lg)
	lb, ok := s.routes.Holder(reg.BrokerName, reg.ID)
	if !ok || lb.Addr == reg.Addr || (reg.ID == MasterID && reg.Epoch > lb.Epoch) {
		return
	}
	if !s.ident.reachable(lb.Addr, now) {
		s.lg.Info("broker id held by an unreachable address: taken over",
			zap.String("broker_name", reg.BrokerName), zap.Int64("broker_id", reg.ID),
			zap.String("holder", lb.Addr), zap.String("broker_addr", reg.Addr))
		reg.takeover = lb.Addr
	}
}
