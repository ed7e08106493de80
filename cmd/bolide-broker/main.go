// Command bolide-broker runs a Bolide broker: it stores messages, serves
// producers and consumers over gRPC and registers with the NameServers.
// Its port also speaks RocketMQ's remoting protocol (--remoting) and
// RocketMQ 5's gRPC protocol (--v5), each in the clear or over TLS
// (--tls-cert and --tls-key; a self-signed certificate without them).
//
//	bolide-broker --namesrv 127.0.0.1:9876 --listen 127.0.0.1:10911 \
//	    --store-dir ./data/broker-a --broker-name broker-a --broker-id 0 --cluster DefaultCluster
//
// Every flag can also come from a BOLIDE_BROKER_* environment variable
// (BOLIDE_BROKER_NAMESRV, BOLIDE_BROKER_STORE_DIR, ...) or a YAML file given
// with --config whose keys are the flag names; flags win over the environment, which wins
// over the file. SIGTERM or SIGINT drains and exits 0; a second one forces.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/cmd/internal/daemon"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/console"
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

type flags struct {
	security         daemon.Security
	config           string
	namesrv          string
	listen           string
	advertise        string
	storeDir         string
	brokerName       string
	brokerID         int64
	cluster          string
	flush            string
	segmentSize      int64
	commitLogCache   int64
	registerInterval time.Duration
	brokerTimeout    time.Duration
	gossip           string
	gossipProfile    string
	autoCreateTopic  bool
	remoting         bool
	v5               bool
	tlsCert          string
	tlsKey           string
	defaultQueues    int
	maxMessageSize   int
	dedupWindow      time.Duration
	dedupMaxIDs      int
	propertyFilter   bool
	retentionHours   int
	delayLevels      string
	maxDelay         time.Duration
	txnTimeout       time.Duration
	txnInterval      time.Duration
	txnCheckMax      int
	drainTimeout     time.Duration
	replication      string
	inSyncReplicas   int
	slaveTimeout     time.Duration
	haMaxLagBytes    int64
	haListen         string
	haAdvertise      string
	masterHAAddr     string
	haHeartbeat      time.Duration
	haTimeout        time.Duration
	metadataSync     time.Duration
	controllerAddrs  string
	controllerBeat   time.Duration
	electionPrio     int32
	logLevel         string
	logFormat        string
	addrFile         string
	registerTimeout  time.Duration
	adminListen      string
	adminAddrFile    string
	console          bool
	maxReconsume     int
	pullMaxMessages  int
	pullMaxBytes     int
}

func run(args []string, stdout, stderr io.Writer) int {
	code := exitOK
	cmd, _ := newCommand(&code)
	return daemon.Execute("bolide-broker", cmd, &code, args, stdout, stderr)
}

func newCommand(code *int) (*cobra.Command, *flags) {
	f := &flags{}
	cmd := daemon.Command[broker.Options]{
		Name:      "bolide-broker",
		Short:     "Run a Bolide broker",
		LogLevel:  &f.logLevel,
		LogFormat: &f.logFormat,
		Load:      func(cmd *cobra.Command) (broker.Options, *daemon.Config, error) { return loadOptions(cmd, f) },
		Applied: func(o broker.Options) daemon.Applied {
			return daemon.Applied{Auth: o.Auth, Credentials: o.Credentials, TLS: o.TLS, GossipKey: o.GossipKey}
		},
		Serve: func(o broker.Options, lg *zap.Logger) int { return serve(o, f, lg) },
	}.New(code)
	d := broker.DefaultOptions("./data/broker-a")
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.config, "config", "", "YAML config file; keys are flag names")
	fs.StringVar(&f.namesrv, "namesrv", strings.Join(d.NameServers, ";"), `NameServer addresses, separated by ";" or ","`)
	daemon.CheckedStringVar(fs, &f.listen, "listen", d.ListenAddr, "gRPC listen address (port 0 picks one; see --addr-file)", daemon.CheckHostPort)
	fs.StringVar(&f.advertise, "advertise", "", "address registered with the NameServers (default: the bound address)")
	fs.StringVar(&f.storeDir, "store-dir", d.StoreDir, "data directory (store and metadata)")
	fs.StringVar(&f.brokerName, "broker-name", d.BrokerName, "broker group name")
	fs.Int64Var(&f.brokerID, "broker-id", d.BrokerID, "0 for the master, > 0 for a slave; with --controller-addr the permanent replica id (>= 1)")
	fs.StringVar(&f.cluster, "cluster", d.Cluster, "cluster name")
	daemon.CheckedStringVar(fs, &f.flush, "flush", d.Store.CommitLog.FlushMode.String(), "sync (acknowledge once durable) or async (flush every 500 ms)", checkFlush)
	fs.Int64Var(&f.segmentSize, "segment-size", d.Store.CommitLog.SegmentSize, "CommitLog segment size in bytes")
	fs.Int64Var(&f.commitLogCache, "commitlog-cache", d.Store.CommitLog.CacheWindow,
		"bytes of CommitLog kept in the page cache behind its flushed end; older pages are dropped from it (0: leave the page cache to the kernel)")
	fs.DurationVar(&f.registerInterval, "register-interval", d.RegisterInterval, "how often to register with the NameServers")
	fs.DurationVar(&f.registerTimeout, "register-timeout", d.RegisterTimeout, "bound of one registration or unregistration call")
	fs.DurationVar(&f.brokerTimeout, "broker-timeout", 0, "heartbeat timeout the NameServers apply to this broker (0: theirs)")
	fs.StringVar(&f.gossip, "gossip", "", `gossip (memberlist) address: "" derives listen port + 3, "off" disables`)
	fs.StringVar(&f.gossipProfile, "gossip-profile", d.GossipProfile, `failure detection timings: "lan" or "fast" (tests)`)
	fs.BoolVar(&f.remoting, "remoting", true, "serve RocketMQ's remoting protocol (its clients and mqadmin) on the listen port")
	fs.BoolVar(&f.v5, "v5", true, "serve RocketMQ 5's gRPC protocol (apache.rocketmq.v2, the official v5 clients) on the listen port")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate for TLS on the listen port, reloaded when it changes (default: a self-signed one)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.BoolVar(&f.autoCreateTopic, "auto-create-topic", d.AutoCreateTopic, "create unknown topics on first send")
	fs.IntVar(&f.defaultQueues, "default-queues", d.DefaultQueueNums, "queues of an auto-created topic")
	fs.IntVar(&f.maxMessageSize, "max-message-size", d.MaxMessageSize, "largest message body in bytes")
	fs.DurationVar(&f.dedupWindow, "dedup-window", d.DedupWindow, "a send repeating a unique id stored this recently is answered with the first copy, not stored again (0: off; topic attribute dedup.window.minutes overrides)")
	fs.BoolVar(&f.propertyFilter, "enable-property-filter", d.EnablePropertyFilter, "let consumers subscribe with SQL92 conditions over message properties, evaluated on the broker")
	fs.IntVar(&f.dedupMaxIDs, "dedup-max-ids", d.DedupMaxEntries, "unique ids the deduplication window holds at most (about 48 bytes each; 0 turns deduplication off)")
	fs.IntVar(&f.retentionHours, "retention-hours", int(d.Store.Retention.MaxAge/time.Hour), "delete CommitLog segments older than this")
	fs.StringVar(&f.delayLevels, "delay-levels", d.Delay.Levels, "delays of the delay levels 1, 2, ... (RocketMQ's messageDelayLevel)")
	fs.DurationVar(&f.maxDelay, "max-delay", d.Delay.MaxDelay, "latest delivery time a timer message may ask for, from now")
	fs.DurationVar(&f.txnTimeout, "transaction-timeout", d.Transaction.Timeout, "how long a half message waits for its outcome before the first check-back")
	fs.DurationVar(&f.txnInterval, "transaction-check-interval", d.Transaction.CheckInterval, "time between two check-backs of an undecided half message")
	fs.IntVar(&f.txnCheckMax, "transaction-check-max", d.Transaction.CheckMax, "check-backs before an undecided half message is discarded")
	fs.IntVar(&f.maxReconsume, "max-reconsume-times", d.Retry.MaxReconsumeTimes, "retries of a failed message before it goes to %DLQ%<group>, unless the consumer says")
	fs.IntVar(&f.pullMaxMessages, "pull-max-messages", d.PullMaxMessages, "most messages one pull returns")
	fs.IntVar(&f.pullMaxBytes, "pull-max-bytes", d.PullMaxBytes, "most bytes one pull returns (at least one message is always returned)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", daemon.DefaultDrainTimeout, "how long SIGTERM waits for in-flight calls")
	r := d.Replication
	fs.StringVar(&f.replication, "replication", r.Mode, "master: async (acknowledge after the own flush) or sync (acknowledge once in-sync slaves have it)")
	fs.IntVar(&f.inSyncReplicas, "in-sync-replicas", r.InSyncReplicas, "sync replication: in-sync slaves that must hold a message before it is acknowledged")
	fs.DurationVar(&f.slaveTimeout, "slave-timeout", r.SlaveTimeout, "sync replication: how long a send waits for its slaves (then FLUSH_SLAVE_TIMEOUT)")
	fs.Int64Var(&f.haMaxLagBytes, "ha-max-lag-bytes", r.MaxLagBytes, "a slave further behind leaves the in-sync set")
	fs.StringVar(&f.haListen, "ha-listen", r.HAListenAddr, `replication (HA) listen address: "" derives listen port + 1`)
	fs.StringVar(&f.haAdvertise, "ha-advertise", r.HAAdvertiseAddr, "HA address registered with the NameServers (default: the bound one)")
	fs.StringVar(&f.masterHAAddr, "master-ha-addr", r.MasterHAAddr, "slave: the master's HA address (default: learned from the NameServers)")
	fs.DurationVar(&f.haHeartbeat, "ha-heartbeat", r.HeartbeatInterval, "replication heartbeat interval")
	fs.DurationVar(&f.haTimeout, "ha-timeout", r.Timeout, "drop a replication connection silent this long")
	fs.DurationVar(&f.metadataSync, "metadata-sync-interval", r.MetadataSyncInterval, "slave: how often topics and consumer offsets are fetched from the master")
	fs.StringVar(&f.controllerAddrs, "controller-addr", "", `controller mode (automatic failover): NameServer addresses running a controller, separated by "," or ";"; --broker-id is then the broker's permanent replica id (>= 1) and the controller elects the master`)
	fs.DurationVar(&f.controllerBeat, "controller-heartbeat", r.ControllerHeartbeat, "controller mode: how often the broker heartbeats to every controller")
	fs.Int32Var(&f.electionPrio, "election-priority", r.ElectionPriority, "controller mode: among equally up-to-date replicas, a lower value is preferred at election")
	daemon.CheckedStringVar(fs, &f.logLevel, "log-level", "info", "debug, info, warn or error", daemon.CheckLogLevel)
	daemon.CheckedStringVar(fs, &f.logFormat, "log-format", "console", "console or json", daemon.CheckLogFormat)
	fs.StringVar(&f.addrFile, "addr-file", "", "write the bound gRPC address to this file once serving")
	daemon.CheckedStringVar(fs, &f.adminListen, "admin-listen", daemon.AdminAuto, daemon.AdminFlagHelp, daemon.CheckAdminListen)
	fs.StringVar(&f.adminAddrFile, "admin-addr-file", "", "write the bound admin address to this file once serving")
	fs.BoolVar(&f.console, "console", true, daemon.ConsoleFlagHelp)
	f.security.Register(fs, "")
	return cmd, f
}

// splitList splits a ";"- or ","-separated list, dropping empties.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkFlush accepts the flush modes; as a flag check it runs wherever the
// value comes from, so the error names the flag, variable or file key.
func checkFlush(s string) error {
	_, err := commitlog.ParseFlushMode(s)
	return err
}

// positiveSettings must be above zero; a bad value is refused naming the
// setting and its source before the broker's own validation runs.
var positiveSettings = []string{
	"segment-size", "register-interval", "register-timeout", "default-queues", "max-message-size",
	"retention-hours", "max-delay", "transaction-timeout", "transaction-check-interval", "drain-timeout",
	"in-sync-replicas", "slave-timeout", "ha-max-lag-bytes", "ha-heartbeat", "ha-timeout", "metadata-sync-interval",
	"controller-heartbeat", "pull-max-messages", "pull-max-bytes",
}

// loadOptions resolves the flags (flag > env > file > default) and turns
// them into validated broker options.
func loadOptions(cmd *cobra.Command, f *flags) (broker.Options, *daemon.Config, error) {
	cfg := daemon.BindCommand(cmd, daemon.BrokerEnvPrefix)
	if err := cfg.Load(f.config); err != nil {
		return broker.Options{}, nil, err
	}
	if err := cfg.RequirePositive(positiveSettings...); err != nil {
		return broker.Options{}, nil, err
	}
	if _, _, err := daemon.ResolveAdminAddr(f.adminListen, f.listen); err != nil {
		return broker.Options{}, nil, err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return broker.Options{}, nil, fmt.Errorf("tls-cert and tls-key go together: set both or neither")
	}
	opts := broker.DefaultOptions(f.storeDir)
	opts.NameServers = splitList(f.namesrv)
	opts.ListenAddr = f.listen
	opts.AdvertiseAddr = f.advertise
	opts.BrokerName = f.brokerName
	opts.BrokerID = f.brokerID
	opts.Cluster = f.cluster
	opts.RegisterInterval = f.registerInterval
	opts.RegisterTimeout = f.registerTimeout
	opts.BrokerTimeout = f.brokerTimeout
	opts.GossipAddr = f.gossip
	opts.GossipProfile = f.gossipProfile
	opts.AutoCreateTopic = f.autoCreateTopic
	opts.DefaultQueueNums = f.defaultQueues
	opts.MaxMessageSize = f.maxMessageSize
	opts.DedupWindow = f.dedupWindow
	opts.DedupMaxEntries = f.dedupMaxIDs
	opts.EnablePropertyFilter = f.propertyFilter
	opts.Version = daemon.Version
	opts.Replication.Mode = f.replication
	opts.Replication.InSyncReplicas = f.inSyncReplicas
	opts.Replication.SlaveTimeout = f.slaveTimeout
	opts.Replication.MaxLagBytes = f.haMaxLagBytes
	opts.Replication.HAListenAddr = f.haListen
	opts.Replication.HAAdvertiseAddr = f.haAdvertise
	opts.Replication.MasterHAAddr = f.masterHAAddr
	opts.Replication.HeartbeatInterval = f.haHeartbeat
	opts.Replication.Timeout = f.haTimeout
	opts.Replication.MetadataSyncInterval = f.metadataSync
	opts.Replication.ControllerAddrs = splitList(f.controllerAddrs)
	opts.Replication.ControllerHeartbeat = f.controllerBeat
	opts.Replication.ElectionPriority = f.electionPrio
	opts.Transaction.Timeout = f.txnTimeout
	opts.Transaction.CheckInterval = f.txnInterval
	opts.Transaction.CheckMax = f.txnCheckMax
	opts.Retry.MaxReconsumeTimes = f.maxReconsume
	opts.PullMaxMessages = f.pullMaxMessages
	opts.PullMaxBytes = f.pullMaxBytes
	mode, err := commitlog.ParseFlushMode(f.flush) // checked by the flag
	if err != nil {
		return broker.Options{}, nil, fmt.Errorf("flush: %w", err)
	}
	opts.Store.CommitLog.FlushMode = mode
	opts.Store.CommitLog.SegmentSize = f.segmentSize
	opts.Store.CommitLog.CacheWindow = f.commitLogCache
	opts.Store.Retention.MaxAge = time.Duration(f.retentionHours) * time.Hour
	sec, err := f.security.Apply()
	if err != nil {
		return broker.Options{}, nil, err
	}
	if sec.Auth.File == "" {
		sec.Auth.File = filepath.Join(f.storeDir, "config", "plain_acl.yml")
	}
	opts.Auth, opts.Credentials, opts.GossipKey = sec.Auth, sec.Credentials, sec.GossipKey
	opts.TLS = sec.TLS
	opts.TLS.CertFile, opts.TLS.KeyFile = f.tlsCert, f.tlsKey
	opts.Delay.Levels = f.delayLevels
	opts.Delay.MaxDelay = f.maxDelay
	if err := opts.Validate(); err != nil {
		return broker.Options{}, nil, err
	}
	if err := opts.Store.CommitLog.Validate(); err != nil {
		return broker.Options{}, nil, fmt.Errorf("segment-size, commitlog-cache: %w", err)
	}
	// The store's rule: the largest body plus 64 KiB of headroom fits a
	// segment. Checked here to name the two settings.
	if room := opts.Store.CommitLog.MaxRecordSize() - 64<<10; f.maxMessageSize > room {
		return broker.Options{}, nil, fmt.Errorf("max-message-size %d does not fit segment-size %d (at most %d for that segment size)",
			f.maxMessageSize, f.segmentSize, max(room, 0))
	}
	return opts, cfg, nil
}

// serve runs the broker until a signal and returns the exit status.
func serve(opts broker.Options, f *flags, lg *zap.Logger) int {
	newBroker := func() (daemon.Server, error) {
		return server.New(opts, lg, server.WithRemoting(f.remoting), server.WithV5(f.v5))
	}
	return daemon.Serve(context.Background(), newBroker, daemon.ServeOptions{
		Name:          "broker",
		ListenAddr:    opts.ListenAddr,
		AddrFile:      f.addrFile,
		AdminListen:   f.adminListen,
		AdminAddrFile: f.adminAddrFile,
		DrainTimeout:  f.drainTimeout,
		TLS:           opts.TLS,
		Auth:          opts.Auth,
		Console:       daemon.Console{Enabled: f.console, Daemon: console.Broker, Name: opts.BrokerName, NameServers: opts.NameServers},
	}, lg)
}
