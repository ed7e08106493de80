package nameserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/membership"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// GossipOff as Options.GossipAddr disables membership.
const GossipOff = "off"

// Options configure a Server.
type Options struct {
	// ListenAddr is the address of the gRPC API and, with Remoting, of
	// RocketMQ's remoting protocol; port 0 picks a free port.
	ListenAddr string
	// Remoting serves RocketMQ's remoting protocol on ListenAddr too, for
	// RocketMQ clients and mqadmin. When false, remoting connections are
	// closed. DefaultOptions turns it on.
	Remoting bool
	// NoFrames leaves Bolide's frame protocol off ListenAddr: clients then
	// ask for routes over gRPC (as of a NameServer before it).
	NoFrames bool
	// GossipAddr is the memberlist address: "" derives it from ListenAddr
	// (same host, port + 1; port 0 stays 0), GossipOff disables membership.
	GossipAddr string
	// GossipSeeds are gossip addresses of other NameServers or brokers to
	// join. Optional: brokers join a NameServer through the gossip address
	// it returns from RegisterBroker.
	GossipSeeds []string
	// GossipProfile is "lan" (default) or "fast" (tests).
	GossipProfile string
	// ScanInterval is how often brokers silent longer than their heartbeat
	// timeout are evicted.
	ScanInterval time.Duration
	// BrokerTimeout is the heartbeat timeout of a broker that does not ask
	// for its own.
	BrokerTimeout time.Duration
	// TLSCertFile and TLSKeyFile are the PEM certificate and key served to
	// TLS clients on ListenAddr (reloaded when they change on disk). Both
	// empty: a self-signed certificate. Plaintext is served alongside.
	TLSCertFile string
	TLSKeyFile  string
	// TLS is the rest of the NameServer's TLS (mode, client certificates,
	// how it dials); its CertFile and KeyFile are TLSCertFile and
	// TLSKeyFile above.
	TLS tlsconf.Config
	// GossipKey encrypts and authenticates gossip (memberlist's AES key:
	// 16, 24 or 32 bytes); empty: gossip in the clear.
	GossipKey []byte
	// Auth is the NameServer's access control (package auth), which its
	// controller applies too.
	Auth auth.Config
	// Credentials sign the NameServer's own calls to other daemons.
	Credentials auth.Credentials
	// Controller embeds a failover controller (package controller) served
	// on ListenAddr; nil leaves it off. Its empty RaftListen is derived
	// from ListenAddr (same host, port + 3: + 1 is gossip, + 2 the admin
	// listener; port 0 stays 0).
	Controller *controller.Options
}

// DefaultOptions returns RocketMQ's defaults on loopback.
func DefaultOptions() Options {
	return Options{
		ListenAddr:    "127.0.0.1:9876",
		Remoting:      true,
		GossipProfile: membership.ProfileLAN,
		ScanInterval:  10 * time.Second,
		BrokerTimeout: 120 * time.Second,
	}
}

// Validate checks every field and reports all problems at once.
func (o *Options) Validate() error {
	var errs []error
	if err := checkHostPort(o.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("nameserver: listen_addr: %w", err))
	}
	switch o.GossipAddr {
	case GossipOff:
	case "":
		if err := checkHostPort(o.ListenAddr); err == nil && membership.DeriveGossipAddr(o.ListenAddr, 1) == "" {
			errs = append(errs, fmt.Errorf("nameserver: gossip_addr: cannot derive from %q; set it", o.ListenAddr))
		}
	default:
		if err := checkHostPort(o.GossipAddr); err != nil {
			errs = append(errs, fmt.Errorf("nameserver: gossip_addr: %w", err))
		}
	}
	for _, s := range o.GossipSeeds {
		if err := checkHostPort(s); err != nil {
			errs = append(errs, fmt.Errorf("nameserver: gossip_seeds: %w", err))
		}
	}
	switch o.GossipProfile {
	case "", membership.ProfileLAN, membership.ProfileFast:
	default:
		errs = append(errs, fmt.Errorf("nameserver: gossip_profile must be %q or %q, not %q",
			membership.ProfileLAN, membership.ProfileFast, o.GossipProfile))
	}
	if o.ScanInterval <= 0 {
		errs = append(errs, fmt.Errorf("nameserver: scan_interval must be > 0, not %v", o.ScanInterval))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("nameserver: tls_cert and tls_key go together: set both or neither"))
	}
	if o.BrokerTimeout <= 0 {
		errs = append(errs, fmt.Errorf("nameserver: broker_timeout must be > 0, not %v", o.BrokerTimeout))
	}
	if o.Controller != nil {
		co := o.controllerOptions()
		if co.RaftListen == "" {
			errs = append(errs, fmt.Errorf("nameserver: controller raft_listen: cannot derive from %q; set it", o.ListenAddr))
		} else if err := co.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("nameserver: %w", err))
		}
	}
	return errors.Join(errs...)
}

// controllerOptions are the controller's options with the Raft address
// derived when empty.
func (o *Options) controllerOptions() controller.Options {
	co := *o.Controller
	if co.RaftListen == "" {
		co.RaftListen = membership.DeriveGossipAddr(o.ListenAddr, raftPortOffset)
	}
	return co
}

// gossipBindAddr is the address membership binds, or "" when it is off.
func (o *Options) gossipBindAddr() string {
	switch o.GossipAddr {
	case GossipOff:
		return ""
	case "":
		return membership.DeriveGossipAddr(o.ListenAddr, 1)
	}
	return o.GossipAddr
}

func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: bad port", addr)
	}
	return nil
}

// raftPortOffset derives the controller's Raft port from the listen port:
// + 1 is gossip and + 2 the daemons' admin listener ("auto").
const raftPortOffset = 3
