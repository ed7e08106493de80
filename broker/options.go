package broker

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/message"
)

// Options configure a Broker.
type Options struct {
	Cluster    string
	BrokerName string
	// BrokerID 0 is the master of its group; > 0 a slave. In controller
	// mode (Replication.ControllerAddrs) it is the broker's permanent
	// replica id (>= 1) and the controller decides the role.
	BrokerID int64
	// ListenAddr is where the daemon listens (package broker/server binds
	// it; ":0" picks a free port); the HA and gossip ports derive from it.
	ListenAddr string
	// AdvertiseAddr is the address registered with NameServers (default:
	// the bound listen address).
	AdvertiseAddr string
	// NameServers are registered with at start and every RegisterInterval.
	NameServers      []string
	RegisterInterval time.Duration
	// RegisterTimeout bounds one registration call.
	RegisterTimeout time.Duration
	// BrokerTimeout is the heartbeat timeout the NameServers apply (0 =
	// theirs, 120 s).
	BrokerTimeout time.Duration
	// GossipAddr is the memberlist address ("" = derived from ListenAddr,
	// "off" = no membership); GossipProfile "lan" or "fast" (tests).
	GossipAddr    string
	GossipProfile string
	// GossipKey encrypts and authenticates gossip (memberlist's AES key:
	// 16, 24 or 32 bytes); empty: gossip in the clear.
	GossipKey []byte
	// Auth is the broker's access control (package auth): the ACL file and
	// whether it is enforced on every protocol.
	Auth auth.Config
	// Credentials sign the broker's own calls to other daemons
	// (NameServers, controllers, its master and slaves): an admin user of
	// theirs when their ACL is on.
	Credentials auth.Credentials
	// TLS is the broker's TLS: its listeners and its connections to other
	// daemons.
	TLS tlsconf.Config
	// StoreDir holds the message store and config/ metadata.
	StoreDir string
	// Store configures the message store; Dir and StoreHost are filled in.
	Store store.Options
	// AutoCreateTopic creates unknown topics on first send (off).
	AutoCreateTopic  bool
	DefaultQueueNums int
	// MaxMessageSize bounds a body (4 MiB); MaxPropertiesSize the encoded
	// properties (32 KiB).
	MaxMessageSize    int
	MaxPropertiesSize int
	// MaxBatchMessages bounds one send request.
	MaxBatchMessages int
	// LongPollMax caps a pull's suspend timeout (30 s); PullMaxMessages and
	// PullMaxBytes cap one pull (1024 and 1 MiB: the client's pull batch
	// size, 32 by default, usually asks for less; at most 1024 and 4 MiB).
	LongPollMax     time.Duration
	PullMaxMessages int
	PullMaxBytes    int
	// OffsetPersistInterval is how often consumer offsets are written (5 s).
	OffsetPersistInterval time.Duration
	// ClientExpiry drops a client whose connection sent nothing for this long
	// (120 s); LockExpiry is the orderly-queue lock lifetime (60 s).
	ClientExpiry time.Duration
	LockExpiry   time.Duration
	// DedupWindow is how long a send with a unique id (UNIQ_KEY) is
	// remembered so that a retry of it is answered with the first copy's
	// result instead of being stored again (2 min; 0 turns it off; a topic's
	// dedup.window.minutes attribute overrides it). DedupMaxEntries bounds
	// the ids remembered (1 Mi, about 48 MB); 0 turns deduplication off.
	DedupWindow     time.Duration
	DedupMaxEntries int
	// BrokerPermission is the broker's permission as a whole (RocketMQ's
	// brokerPermission): 6 read and write (0 means it too), 4 read only —
	// its topics are registered without their write bit and sends are
	// refused, for draining a broker. It may change at runtime
	// (UpdateConfig).
	BrokerPermission int32
	// EnablePropertyFilter lets consumers subscribe with SQL92 conditions
	// over message properties, evaluated on the broker (RocketMQ's
	// enablePropertyFilter; on).
	EnablePropertyFilter bool
	// Version is reported to NameServers and tools.
	Version string
	// Delay, Transaction, Replication and Retry configure those features.
	Delay       DelayOptions
	Transaction TransactionOptions
	Replication ReplicationOptions
	Retry       RetryOptions
}

// Option gives New what Options cannot hold: the address the broker is
// reached at and implementations of the interfaces the core declares for
// its calls to other daemons, which its assembler chooses (package
// broker/server passes the bolide.v1 ones of package broker/remote).
type Option func(*dependencies)

// dependencies are what the Options of New set.
type dependencies struct {
	addr        string
	nameServers NameServers
	master      replication.MasterClient
	controllers replication.ControllerClient
	certs       *tlsconf.Source
}

// WithTLSSource shares the certificate source of the broker's port with
// its other listeners and links (HA), so that the files are loaded and
// watched once. Without it the broker opens its own from Options.TLS.
func WithTLSSource(s *tlsconf.Source) Option {
	return func(d *dependencies) { d.certs = s }
}

// WithAddr sets the address clients reach the broker at: the bound
// listener's (AdvertiseAddr still wins).
func WithAddr(addr string) Option {
	return func(d *dependencies) { d.addr = addr }
}

// WithNameServers sets how the broker registers with its NameServers
// (without it, it registers nowhere).
func WithNameServers(ns NameServers) Option {
	return func(d *dependencies) { d.nameServers = ns }
}

// WithMasterClient sets how a slave fetches its master's metadata
// (without it, a slave replicates the log only).
func WithMasterClient(c replication.MasterClient) Option {
	return func(d *dependencies) { d.master = c }
}

// WithControllers sets how the broker reaches its controllers; required
// in controller mode (Replication.ControllerAddrs).
func WithControllers(c replication.ControllerClient) Option {
	return func(d *dependencies) { d.controllers = c }
}

// DefaultOptions returns the defaults for a broker storing under dir.
func DefaultOptions(dir string) Options {
	return Options{
		Cluster:               "DefaultCluster",
		BrokerName:            "broker-a",
		BrokerID:              0,
		ListenAddr:            "127.0.0.1:10911",
		NameServers:           []string{"127.0.0.1:9876"},
		RegisterInterval:      30 * time.Second,
		RegisterTimeout:       5 * time.Second,
		GossipProfile:         "lan",
		StoreDir:              dir,
		Store:                 store.DefaultOptions(filepath.Join(dir, "store")),
		DefaultQueueNums:      8,
		MaxMessageSize:        message.DefaultMaxBodySize,
		MaxPropertiesSize:     32 << 10,
		MaxBatchMessages:      1024,
		LongPollMax:           30 * time.Second,
		PullMaxMessages:       1024,
		PullMaxBytes:          1 << 20,
		OffsetPersistInterval: 5 * time.Second,
		ClientExpiry:          120 * time.Second,
		LockExpiry:            60 * time.Second,
		DedupWindow:           2 * time.Minute,
		DedupMaxEntries:       1 << 20,
		EnablePropertyFilter:  true,
		BrokerPermission:      PermRead | PermWrite,
		Version:               "dev",
		Delay:                 delay.DefaultBrokerOptions(),
		Transaction:           txn.DefaultOptions(),
		Replication:           replication.DefaultOptions(),
		Retry:                 retry.DefaultOptions(),
	}
}

// Validate checks the options and names the offending field.
func (o *Options) Validate() error {
	var errs []error
	if o.Cluster == "" || o.BrokerName == "" {
		errs = append(errs, errors.New("broker: cluster and broker name must be set"))
	}
	if err := message.ValidateGroup(o.BrokerName); err != nil {
		errs = append(errs, fmt.Errorf("broker: broker name: %w", err))
	}
	if o.BrokerID < 0 {
		errs = append(errs, fmt.Errorf("broker: broker id %d must not be negative", o.BrokerID))
	}
	if o.Replication.ControllerMode() && o.BrokerID < 1 {
		errs = append(errs, fmt.Errorf("broker: in controller mode the broker id is the broker's permanent replica id and must be >= 1 (distinct within the group), not %d", o.BrokerID))
	}
	if o.ListenAddr == "" {
		errs = append(errs, errors.New("broker: listen address is empty"))
	}
	if o.StoreDir == "" {
		errs = append(errs, errors.New("broker: store dir is empty"))
	}
	if o.RegisterInterval <= 0 || o.RegisterTimeout <= 0 {
		errs = append(errs, errors.New("broker: register interval and timeout must be positive"))
	}
	if o.DefaultQueueNums <= 0 || o.DefaultQueueNums > 1024 {
		errs = append(errs, fmt.Errorf("broker: default queue nums %d not in 1..1024", o.DefaultQueueNums))
	}
	if o.MaxMessageSize <= 0 || o.MaxPropertiesSize <= 0 || o.MaxBatchMessages <= 0 {
		errs = append(errs, errors.New("broker: message, properties and batch limits must be positive"))
	}
	if o.LongPollMax <= 0 || o.PullMaxMessages <= 0 || o.PullMaxBytes <= 0 {
		errs = append(errs, errors.New("broker: pull limits must be positive"))
	}
	if o.OffsetPersistInterval <= 0 || o.ClientExpiry <= 0 || o.LockExpiry <= 0 {
		errs = append(errs, errors.New("broker: offset persist interval, client expiry and lock expiry must be positive"))
	}
	if p := o.BrokerPermission; p != 0 && p != PermRead|PermWrite && p != PermRead {
		errs = append(errs, fmt.Errorf("broker: broker permission %d must be 6 (read and write) or 4 (read only)", p))
	}
	if o.DedupWindow < 0 || o.DedupMaxEntries < 0 {
		errs = append(errs, errors.New("broker: dedup window and entries must not be negative"))
	}
	for _, err := range []error{o.Delay.Validate(), o.Transaction.Validate(), o.Replication.Validate(), o.Retry.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// storeOptions fills in what the store needs from the broker's options.
func (o *Options) storeOptions(host netip.AddrPort) store.Options {
	so := o.Store
	if so.Dir == "" {
		so.Dir = filepath.Join(o.StoreDir, "store")
	}
	if so.CommitLog.Dir == "" {
		so.CommitLog.Dir = filepath.Join(so.Dir, "commitlog")
	}
	so.StoreHost = host
	so.TagCode = o.Delay.TagCode(so.TagCode)
	if o.MaxMessageSize > 0 {
		// The store's bound is what a segment holds: the broker checks
		// MaxMessageSize itself (checkMessage), so that it may change at
		// runtime.
		so.MaxMessageSize = max(o.MaxMessageSize, int(o.maxMessageSizeCap()))
	}
	return so
}
