// Command bolide-nameserver runs a Bolide NameServer: the route table that
// brokers register with and clients ask for routes. One port serves Bolide's
// gRPC API and RocketMQ's remoting protocol (RocketMQ clients, mqadmin);
// --remoting=false turns the latter off. It is also the access point of
// RocketMQ 5's clients (their routes and assignments). Each protocol is
// served in the clear or over TLS (--tls-cert and --tls-key; a self-signed
// certificate without them).
//
//	bolide-nameserver --listen 127.0.0.1:9876
//
// Every flag can also come from a BOLIDE_NAMESRV_* environment variable
// (BOLIDE_NAMESRV_LISTEN, BOLIDE_NAMESRV_BROKER_TIMEOUT, ...) or a YAML file
// given with --config whose keys are the flag names; flags win over the environment,
// which wins over the file. SIGTERM or SIGINT drains and exits 0.
//
// --controller embeds a failover controller (automatic master election for
// brokers started with --controller-addr): one NameServer alone, or three
// with the same --controller-peers (n0=host:port,n1=...,n2=..., their Raft
// addresses) and each its own --controller-id:
//
//	bolide-nameserver --listen 10.0.0.1:9876 --controller --controller-id n0 \
//	  --controller-peers n0=10.0.0.1:9879,n1=10.0.0.2:9879,n2=10.0.0.3:9879
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/cmd/internal/daemon"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/console"
	"github.com/bolide-mq/bolide/nameserver"
)

// Exit statuses.
const (
	exitOK     = daemon.ExitOK
	exitFailed = daemon.ExitFailed
	exitConfig = daemon.ExitConfig
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line; Config fills the ones not given from the
// environment and the file.
type flags struct {
	security      daemon.Security
	config        string
	listen        string
	remoting      bool
	tlsCert       string
	tlsKey        string
	gossip        string
	gossipSeeds   []string
	gossipProfile string
	scanInterval  time.Duration
	brokerTimeout time.Duration
	drainTimeout  time.Duration
	logLevel      string
	logFormat     string
	addrFile      string
	adminListen   string
	adminAddrFile string
	console       bool

	controller          bool
	controllerID        string
	controllerPeers     string
	controllerRaft      string
	controllerDir       string
	controllerTimeout   time.Duration
	lease               time.Duration
	uncleanElection     bool
	raftHeartbeat       time.Duration
	raftElectionTimeout time.Duration
}

func run(args []string, stdout, stderr io.Writer) int {
	code := exitOK
	cmd, _ := newCommand(&code)
	return daemon.Execute("bolide-nameserver", cmd, &code, args, stdout, stderr)
}

// newCommand builds the root command; RunE stores the exit status in
// *code. The flags are returned for tests.
func newCommand(code *int) (*cobra.Command, *flags) {
	f := &flags{}
	cmd := daemon.Command[nameserver.Options]{
		Name:      "bolide-nameserver",
		Short:     "Run a Bolide NameServer",
		LogLevel:  &f.logLevel,
		LogFormat: &f.logFormat,
		Load:      func(cmd *cobra.Command) (nameserver.Options, *daemon.Config, error) { return loadOptions(cmd, f) },
		Applied: func(o nameserver.Options) daemon.Applied {
			return daemon.Applied{Auth: o.Auth, Credentials: o.Credentials, TLS: o.TLS, GossipKey: o.GossipKey}
		},
		Serve: func(o nameserver.Options, lg *zap.Logger) int { return serve(o, f, lg) },
	}.New(code)
	d := nameserver.DefaultOptions()
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.config, "config", "", "YAML config file; keys are flag names")
	daemon.CheckedStringVar(fs, &f.listen, "listen", d.ListenAddr, "listen address of gRPC and remoting (port 0 picks one; see --addr-file)", daemon.CheckHostPort)
	fs.BoolVar(&f.remoting, "remoting", d.Remoting, "serve RocketMQ's remoting protocol (its clients and mqadmin) on the listen port")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate for TLS on the listen port, reloaded when it changes (default: a self-signed one)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.gossip, "gossip", "", `gossip (memberlist) address: "" derives listen port + 1, "off" disables`)
	fs.StringSliceVar(&f.gossipSeeds, "gossip-seeds", nil, "gossip addresses of other NameServers or brokers to join")
	fs.StringVar(&f.gossipProfile, "gossip-profile", d.GossipProfile, `failure detection timings: "lan" or "fast" (tests)`)
	fs.DurationVar(&f.scanInterval, "scan-interval", d.ScanInterval, "how often silent brokers are evicted")
	fs.DurationVar(&f.brokerTimeout, "broker-timeout", d.BrokerTimeout, "a broker silent this long is evicted (unless it asks for its own)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", daemon.DefaultDrainTimeout, "how long SIGTERM waits for in-flight calls")
	daemon.CheckedStringVar(fs, &f.logLevel, "log-level", "info", "debug, info, warn or error", daemon.CheckLogLevel)
	daemon.CheckedStringVar(fs, &f.logFormat, "log-format", "console", "console or json", daemon.CheckLogFormat)
	fs.StringVar(&f.addrFile, "addr-file", "", "write the bound address to this file once serving")
	daemon.CheckedStringVar(fs, &f.adminListen, "admin-listen", daemon.AdminAuto, daemon.AdminFlagHelp, daemon.CheckAdminListen)
	fs.StringVar(&f.adminAddrFile, "admin-addr-file", "", "write the bound admin address to this file once serving")
	fs.BoolVar(&f.console, "console", true, daemon.ConsoleFlagHelp)
	cd := controller.DefaultOptions()
	fs.BoolVar(&f.controller, "controller", false, "embed a failover controller (Raft) serving brokers in controller mode")
	fs.StringVar(&f.controllerID, "controller-id", cd.ID, "this controller's Raft id")
	fs.StringVar(&f.controllerPeers, "controller-peers", "", "every controller's Raft address, id=host:port,... (empty: this one alone)")
	fs.StringVar(&f.controllerRaft, "controller-raft-listen", "", "Raft listen address (default: listen port + 3)")
	fs.StringVar(&f.controllerDir, "controller-dir", "", "Raft data directory (default: $HOME/bolide/controller/<controller-id>)")
	fs.DurationVar(&f.controllerTimeout, "controller-broker-timeout", cd.BrokerTimeout, "a broker in controller mode silent this long is dead (its group elects a new master)")
	fs.DurationVar(&f.lease, "lease", cd.Lease, "write lease granted to masters; shorter than --controller-broker-timeout")
	fs.BoolVar(&f.uncleanElection, "unclean-election", false, "elect a replica outside the sync state set when none in it is alive (loses acknowledged messages)")
	fs.DurationVar(&f.raftHeartbeat, "raft-heartbeat", cd.RaftHeartbeat, "controller Raft heartbeat timeout")
	fs.DurationVar(&f.raftElectionTimeout, "raft-election-timeout", cd.RaftElectionTimeout, "controller Raft election timeout")
	f.security.Register(fs, "")
	return cmd, f
}

// loadOptions resolves the flags (flag > env > file > default) and turns
// them into validated NameServer options.
func loadOptions(cmd *cobra.Command, f *flags) (nameserver.Options, *daemon.Config, error) {
	cfg := daemon.BindCommand(cmd, daemon.NameServerEnvPrefix)
	if err := cfg.Load(f.config); err != nil {
		return nameserver.Options{}, nil, err
	}
	if err := cfg.RequirePositive("scan-interval", "broker-timeout", "drain-timeout",
		"controller-broker-timeout", "lease", "raft-heartbeat", "raft-election-timeout"); err != nil {
		return nameserver.Options{}, nil, err
	}
	if _, _, err := daemon.ResolveAdminAddr(f.adminListen, f.listen); err != nil {
		return nameserver.Options{}, nil, err
	}
	opts := nameserver.Options{
		ListenAddr:    f.listen,
		Remoting:      f.remoting,
		GossipAddr:    f.gossip,
		GossipSeeds:   f.gossipSeeds,
		GossipProfile: f.gossipProfile,
		ScanInterval:  f.scanInterval,
		BrokerTimeout: f.brokerTimeout,
		TLSCertFile:   f.tlsCert,
		TLSKeyFile:    f.tlsKey,
	}
	sec, err := f.security.Apply()
	if err != nil {
		return nameserver.Options{}, nil, err
	}
	opts.Auth, opts.Credentials, opts.GossipKey = sec.Auth, sec.Credentials, sec.GossipKey
	opts.TLS = sec.TLS
	opts.TLS.CertFile, opts.TLS.KeyFile = f.tlsCert, f.tlsKey
	if f.controller {
		co, err := controllerOptions(f)
		if err != nil {
			return nameserver.Options{}, nil, err
		}
		opts.Controller = co
	}
	if err := opts.Validate(); err != nil {
		return nameserver.Options{}, nil, err
	}
	return opts, cfg, nil
}

// serve runs the NameServer until a signal and returns the exit status.
func serve(opts nameserver.Options, f *flags, lg *zap.Logger) int {
	newServer := func() (daemon.Server, error) { return nameserver.New(opts, lg.Named("nameserver")) }
	return daemon.Serve(context.Background(), newServer, daemon.ServeOptions{
		Name:          "nameserver",
		ListenAddr:    opts.ListenAddr,
		AddrFile:      f.addrFile,
		AdminListen:   f.adminListen,
		AdminAddrFile: f.adminAddrFile,
		DrainTimeout:  f.drainTimeout,
		TLS:           opts.TLS,
		Auth:          opts.Auth,
		Console:       daemon.Console{Enabled: f.console, Daemon: console.NameServer},
	}, lg)
}

// controllerOptions are the embedded controller's options from the flags.
func controllerOptions(f *flags) (*controller.Options, error) {
	peers, err := controller.ParsePeers(f.controllerPeers)
	if err != nil {
		return nil, err
	}
	co := controller.DefaultOptions()
	co.ID = f.controllerID
	co.Peers = peers
	co.RaftListen = f.controllerRaft
	co.Dir = f.controllerDir
	if co.Dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("controller-dir: no default: %w", err)
		}
		co.Dir = filepath.Join(home, "bolide", "controller", co.ID)
	}
	co.BrokerTimeout = f.controllerTimeout
	co.Lease = f.lease
	co.UncleanElection = f.uncleanElection
	co.RaftHeartbeat = f.raftHeartbeat
	co.RaftElectionTimeout = f.raftElectionTimeout
	return &co, nil
}
