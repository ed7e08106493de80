package client

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// MessageModel says how the consumers of a group share messages.
type MessageModel int

const (
	// Clustering: each message goes to one consumer of the group; queues
	// are allocated among the group's members; offsets live on the brokers.
	Clustering MessageModel = iota
	// Broadcasting: each consumer of the group gets every message; offsets
	// live in a file on the client.
	Broadcasting
)

// String names the model.
func (m MessageModel) String() string {
	if m == Broadcasting {
		return "broadcasting"
	}
	return "clustering"
}

func (m MessageModel) proto() pb.MessageModel {
	if m == Broadcasting {
		return pb.MessageModel_BROADCASTING
	}
	return pb.MessageModel_CLUSTERING
}

type consumeFromKind int

const (
	fromLast consumeFromKind = iota
	fromFirst
	fromTimestamp
)

// ConsumeFrom says where a consumer starts on a queue its group has never
// committed an offset for.
type ConsumeFrom struct {
	kind consumeFromKind
	at   time.Time
}

var (
	// ConsumeFromLast starts after the newest message (the default, as in
	// RocketMQ: a new group does not replay history).
	ConsumeFromLast = ConsumeFrom{kind: fromLast}
	// ConsumeFromFirst starts at the oldest message still stored.
	ConsumeFromFirst = ConsumeFrom{kind: fromFirst}
)

// ConsumeFromTimestamp starts at the first message stored at or after t.
func ConsumeFromTimestamp(t time.Time) ConsumeFrom {
	return ConsumeFrom{kind: fromTimestamp, at: t}
}

// String describes the start position.
func (c ConsumeFrom) String() string {
	switch c.kind {
	case fromFirst:
		return "first"
	case fromTimestamp:
		return "timestamp " + c.at.Format(time.RFC3339Nano)
	}
	return "last"
}

// options hold every client setting. Each client reads the settings that
// concern it; the option types (Option, ProducerOption, ConsumerOption)
// keep the others from being given to it.
type options struct {
	nameServers  []string
	log          *zap.Logger
	instanceName string
	dialOptions  []grpc.DialOption
	credentials  auth.Credentials // empty: nothing is signed
	tls          *tls.Config      // nil: plain text
	transport    Transport
	rpcTimeout   time.Duration
	routeRefresh time.Duration

	// Producer.
	sendTimeout     time.Duration
	sendRetries     int
	maxBodySize     int
	faultTolerance  bool
	faultIsolation  time.Duration
	asyncSendsLimit int
	// asyncBatchMsgs and asyncBatchBytes bound one request of
	// coalesced SendAsync messages (async.go).
	asyncBatchMsgs  int
	asyncBatchBytes int

	// Consumers.
	model             MessageModel
	consumeFrom       ConsumeFrom
	heartbeatInterval time.Duration
	rebalanceInterval time.Duration
	allocate          AllocateStrategy
	offsetStoreDir    string
	commitInterval    time.Duration
	autoCommit        bool
	consumeGoroutines int
	consumeBatchSize  int
	pullBatchSize     int
	pullMaxBytes      int
	longPollTimeout   time.Duration
	queueMaxMessages  int
	queueMaxBytes     int64
	retryDelay        time.Duration
	suspendDelay      time.Duration
	maxReconsumeTimes int           // retry.go; < 0 = the broker's setting, 0 = no retries
	consumeTimeout    time.Duration // retry.go
	lockInterval      time.Duration
	lockRetryInterval time.Duration
	pullBackoff       time.Duration
	pollBatchSize     int
	masterRetry       time.Duration
	refusalHandler    func(error)
}

func defaultOptions() options {
	return options{
		nameServers:       []string{"127.0.0.1:9876"},
		log:               zap.NewNop(),
		rpcTimeout:        3 * time.Second,
		routeRefresh:      30 * time.Second,
		sendTimeout:       3 * time.Second,
		sendRetries:       2,
		maxBodySize:       message.DefaultMaxBodySize,
		faultTolerance:    true,
		faultIsolation:    30 * time.Second,
		asyncSendsLimit:   10000,
		asyncBatchMsgs:    256,
		asyncBatchBytes:   1 << 20,
		model:             Clustering,
		consumeFrom:       ConsumeFromLast,
		heartbeatInterval: 30 * time.Second,
		rebalanceInterval: 20 * time.Second,
		allocate:          AllocateAverage{},
		commitInterval:    5 * time.Second,
		autoCommit:        true,
		consumeGoroutines: 20,
		consumeBatchSize:  1,
		pullBatchSize:     32,
		pullMaxBytes:      4 << 20,
		longPollTimeout:   15 * time.Second,
		queueMaxMessages:  1000,
		queueMaxBytes:     100 << 20,
		retryDelay:        time.Second,
		suspendDelay:      time.Second,
		maxReconsumeTimes: -1,
		consumeTimeout:    15 * time.Minute,
		lockInterval:      20 * time.Second,
		lockRetryInterval: 500 * time.Millisecond,
		pullBackoff:       time.Second,
		pollBatchSize:     32,
		masterRetry:       3 * time.Second,
	}
}

func (o *options) validate() error {
	if len(o.nameServers) == 0 {
		return codeErr(pb.Code_INVALID_PARAMETER, "no NameServer address")
	}
	for _, a := range o.nameServers {
		if a == "" {
			return codeErr(pb.Code_INVALID_PARAMETER, "empty NameServer address")
		}
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"rpc timeout", int64(o.rpcTimeout)},
		{"route refresh interval", int64(o.routeRefresh)},
		{"send timeout", int64(o.sendTimeout)},
		{"max body size", int64(o.maxBodySize)},
		{"fault isolation", int64(o.faultIsolation)},
		{"async send limit", int64(o.asyncSendsLimit)},
		{"async batch messages", int64(o.asyncBatchMsgs)},
		{"async batch bytes", int64(o.asyncBatchBytes)},
		{"heartbeat interval", int64(o.heartbeatInterval)},
		{"rebalance interval", int64(o.rebalanceInterval)},
		{"commit interval", int64(o.commitInterval)},
		{"consume goroutines", int64(o.consumeGoroutines)},
		{"consume batch size", int64(o.consumeBatchSize)},
		{"pull batch size", int64(o.pullBatchSize)},
		{"pull max bytes", int64(o.pullMaxBytes)},
		{"long poll timeout", int64(o.longPollTimeout)},
		{"queue max messages", int64(o.queueMaxMessages)},
		{"queue max bytes", o.queueMaxBytes},
		{"retry delay", int64(o.retryDelay)},
		{"suspend delay", int64(o.suspendDelay)},
		{"consume timeout", int64(o.consumeTimeout)},
		{"lock interval", int64(o.lockInterval)},
		{"lock retry interval", int64(o.lockRetryInterval)},
		{"pull backoff", int64(o.pullBackoff)},
		{"poll batch size", int64(o.pollBatchSize)},
		{"master retry interval", int64(o.masterRetry)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return codeErr(pb.Code_INVALID_PARAMETER, "%s must be positive, got %d", p.name, p.v)
		}
	}
	if o.sendRetries < 0 {
		return codeErr(pb.Code_INVALID_PARAMETER, "send retries must not be negative, got %d", o.sendRetries)
	}
	if o.allocate == nil {
		return codeErr(pb.Code_INVALID_PARAMETER, "nil allocate strategy")
	}
	if (o.credentials.AccessKey == "") != (o.credentials.SecretKey == "") {
		return codeErr(pb.Code_INVALID_PARAMETER, "credentials need both an access key and a secret key")
	}
	if o.transport != TransportFrame && o.transport != TransportGRPC {
		return codeErr(pb.Code_INVALID_PARAMETER, "unknown %s", o.transport)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	return nil
}

// offsetFile is the broadcasting offset file of a group.
func (o *options) offsetFile(clientID, group string) (string, error) {
	dir := o.offsetStoreDir
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("offset store directory: %w", err)
		}
		dir = filepath.Join(home, ".bolide", "offsets", sanitizePath(clientID))
	}
	return filepath.Join(dir, sanitizePath(group)+".json"), nil
}

// sanitizePath keeps a client id or group usable as one path element.
func sanitizePath(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '/' || c == '\\' || c == 0 {
			b[i] = '_'
		}
	}
	return string(b)
}

// Option is a setting every client accepts: NewProducer,
// NewTransactionProducer, NewPushConsumer, NewPullConsumer and NewAdmin.
// The settings of one kind of client only are a ProducerOption or a
// ConsumerOption, so that giving one to another kind of client does not
// compile.
type Option interface {
	ProducerOption
	ConsumerOption
}

// ProducerOption configures a Producer or TransactionProducer.
type ProducerOption interface{ applyProducer(*options) }

// ConsumerOption configures a PushConsumer or PullConsumer.
type ConsumerOption interface{ applyConsumer(*options) }

// sharedOption is an Option.
type sharedOption func(*options)

func (f sharedOption) applyProducer(o *options) { f.apply(o) }
func (f sharedOption) applyConsumer(o *options) { f.apply(o) }
func (f sharedOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

// producerOption is a ProducerOption only.
type producerOption func(*options)

func (f producerOption) applyProducer(o *options) {
	if f != nil {
		f(o)
	}
}

// consumerOption is a ConsumerOption only.
type consumerOption func(*options)

func (f consumerOption) applyConsumer(o *options) {
	if f != nil {
		f(o)
	}
}

// WithOptions bundles options into one, applied in order: settings shared
// by several clients, given to each as one argument.
//
//	common := client.WithOptions(client.WithNameServers(addrs...), client.WithLogger(log))
//	p, err := client.NewProducer("billing-producer", common, client.WithSendRetries(3))
//	c, err := client.NewPushConsumer("billing", common, client.WithConsumeFrom(client.ConsumeFromFirst))
func WithOptions(opts ...Option) Option {
	opts = append([]Option(nil), opts...)
	return sharedOption(func(o *options) {
		for _, opt := range opts {
			if opt != nil {
				opt.applyProducer(o) // the same as applyConsumer for an Option
			}
		}
	})
}

// WithNameServers sets the NameServer addresses ("host:port"); a call that
// fails on one is tried on the next. Default 127.0.0.1:9876.
func WithNameServers(addrs ...string) Option {
	return sharedOption(func(o *options) { o.nameServers = append([]string(nil), addrs...) })
}

// WithLogger sets the logger (default: no-op).
func WithLogger(l *zap.Logger) Option { return sharedOption(func(o *options) { o.log = l }) }

// WithInstanceName sets the instance part of the client id ("ip@instance").
// The default is the process id (plus a sequence number for a second
// client of the same group in one process); broadcasting consumers default
// to "DEFAULT" so that their offset file survives restarts.
func WithInstanceName(name string) Option {
	return sharedOption(func(o *options) { o.instanceName = name })
}

// WithDialOptions adds gRPC dial options to every connection (the
// transport credentials — TLS with WithTLS, else plain text — and the
// signing of WithCredentials are set first).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return sharedOption(func(o *options) { o.dialOptions = append(o.dialOptions, opts...) })
}

// WithCredentials signs every call with an access key and its secret key,
// for NameServers and brokers that run with ACL on (--acl). Each gRPC call
// carries a signed date (authorization and x-mq-date-time metadata, signed
// afresh at most once a second); each frame connection sends it once, in
// its Auth request. The secret itself never leaves the client. Without
// this option nothing is signed, which a daemon with ACL off accepts.
//
// A daemon that refuses the credentials, or a call they do not permit,
// answers UNAUTHENTICATED or NO_PERMISSION: the call fails at once with an
// error matching ErrUnauthenticated or ErrNoPermission whose text begins
// with the code ("UNAUTHENTICATED: signature check failed for access key
// …"); it is never retried. Credentials travel in clear without WithTLS.
func WithCredentials(accessKey, secretKey string) Option {
	return sharedOption(func(o *options) {
		o.credentials = auth.Credentials{AccessKey: accessKey, SecretKey: secretKey}
	})
}

// WithTLS makes every connection — gRPC to NameServers and brokers, and
// the frame transport — use TLS under cfg (nil: plain text, the default).
// An empty ServerName is each address's host. To trust a private CA set
// RootCAs; InsecureSkipVerify encrypts without checking the server, as
// RocketMQ's clients do. Daemons serve TLS in their default permissive
// mode and require it with --tls-mode enforcing.
func WithTLS(cfg *tls.Config) Option {
	return sharedOption(func(o *options) {
		if cfg != nil {
			cfg = cfg.Clone()
		}
		o.tls = cfg
	})
}

// Transport is how a client sends and pulls messages (the data path). Every
// other call (routes, heartbeats, offsets, locks, admin) uses gRPC.
type Transport int

const (
	// TransportFrame sends and pulls over Bolide's framed TCP protocol on
	// the broker's port: far less CPU per call than gRPC. A broker that
	// refuses its handshake (an older one) is sent to and pulled from over
	// gRPC instead. The default.
	TransportFrame Transport = iota
	// TransportGRPC sends and pulls over gRPC, like every other call.
	TransportGRPC
)

// String names the transport as the CLI does ("frame", "grpc").
func (t Transport) String() string {
	switch t {
	case TransportFrame:
		return "frame"
	case TransportGRPC:
		return "grpc"
	}
	return fmt.Sprintf("transport(%d)", int(t))
}

// ParseTransport parses "frame" or "grpc".
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "frame":
		return TransportFrame, nil
	case "grpc":
		return TransportGRPC, nil
	}
	return 0, codeErr(pb.Code_INVALID_PARAMETER, "unknown transport %q (want frame or grpc)", s)
}

// WithTransport chooses the transport of sends and pulls. Default
// TransportFrame.
func WithTransport(t Transport) Option { return sharedOption(func(o *options) { o.transport = t }) }

// WithRPCTimeout bounds metadata calls (routes, offsets, locks, admin) that
// have no deadline of their own. Default 3 s.
func WithRPCTimeout(d time.Duration) Option {
	return sharedOption(func(o *options) { o.rpcTimeout = d })
}

// WithRouteRefreshInterval sets how often cached topic routes are
// refreshed. Default 30 s.
func WithRouteRefreshInterval(d time.Duration) Option {
	return sharedOption(func(o *options) { o.routeRefresh = d })
}

// WithSendTimeout bounds one send attempt (each retry gets its own).
// Default 3 s.
func WithSendTimeout(d time.Duration) ProducerOption {
	return producerOption(func(o *options) { o.sendTimeout = d })
}

// WithSendRetries sets how many times a failed send is retried on another
// broker. Default 2.
func WithSendRetries(n int) ProducerOption {
	return producerOption(func(o *options) { o.sendRetries = n })
}

// WithMaxBodySize sets the largest body the producer accepts (and the
// largest batch total). Default 4 MiB, the broker's default.
func WithMaxBodySize(n int) ProducerOption {
	return producerOption(func(o *options) { o.maxBodySize = n })
}

// WithLatencyFaultTolerance turns avoiding recently failed or slow brokers
// on or off. Default on.
func WithLatencyFaultTolerance(on bool) ProducerOption {
	return producerOption(func(o *options) { o.faultTolerance = on })
}

// WithFaultIsolation sets how long a broker that failed a send is avoided
// (slow brokers are avoided for shorter times, never longer). Default 30 s.
func WithFaultIsolation(d time.Duration) ProducerOption {
	return producerOption(func(o *options) { o.faultIsolation = d })
}

// WithAsyncSendLimit bounds the SendAsync calls in flight; beyond it
// SendAsync blocks until one completes. A send stops counting when its
// outcome is known, before its callback runs (so a callback may send
// again). Default 10 000.
func WithAsyncSendLimit(n int) ProducerOption {
	return producerOption(func(o *options) { o.asyncSendsLimit = n })
}

// WithAsyncBatch bounds the requests in which SendAsync coalesces the
// messages that wait while a request of the same kind is in flight: at
// most messages messages and about bytes bytes (bodies and properties; a
// larger message still goes, alone), and never more body bytes than
// WithMaxBodySize, as SendBatch. Default 256 messages and 1 MiB, within a
// broker's default limit of 1 024 messages per request (a broker that
// refuses a batch as too large has its messages sent again one by one).
// WithAsyncBatch(1, …) turns coalescing off: each SendAsync is a request
// of its own.
func WithAsyncBatch(messages, bytes int) ProducerOption {
	return producerOption(func(o *options) {
		o.asyncBatchMsgs, o.asyncBatchBytes = messages, bytes
	})
}

// WithMessageModel sets Clustering (default) or Broadcasting.
func WithMessageModel(m MessageModel) ConsumerOption {
	return consumerOption(func(o *options) { o.model = m })
}

// WithConsumeFrom sets where to start on a queue without a committed offset.
// Default ConsumeFromLast.
func WithConsumeFrom(c ConsumeFrom) ConsumerOption {
	return consumerOption(func(o *options) { o.consumeFrom = c })
}

// WithHeartbeatInterval sets how often consumers and transaction
// producers heartbeat to brokers. Default 30 s.
func WithHeartbeatInterval(d time.Duration) Option {
	return sharedOption(func(o *options) { o.heartbeatInterval = d })
}

// WithRebalanceInterval sets how often queues are re-allocated besides the
// re-allocation on membership change. Default 20 s.
func WithRebalanceInterval(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.rebalanceInterval = d })
}

// WithAllocateStrategy sets how queues are allocated among a group's
// consumers. Default AllocateAverage.
func WithAllocateStrategy(s AllocateStrategy) ConsumerOption {
	return consumerOption(func(o *options) { o.allocate = s })
}

// WithOffsetStoreDir sets the directory of broadcasting offset files
// (<dir>/<group>.json). Default ~/.bolide/offsets/<client id>.
func WithOffsetStoreDir(dir string) ConsumerOption {
	return consumerOption(func(o *options) { o.offsetStoreDir = dir })
}

// WithCommitInterval sets how often consumed offsets are committed.
// Default 5 s.
func WithCommitInterval(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.commitInterval = d })
}

// WithAutoCommit turns the PullConsumer's periodic commit on or off.
// Default on.
func WithAutoCommit(on bool) ConsumerOption {
	return consumerOption(func(o *options) { o.autoCommit = on })
}

// WithConsumeGoroutines sets the size of the concurrent listener's worker
// pool. Default 20.
func WithConsumeGoroutines(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.consumeGoroutines = n })
}

// WithConsumeBatchSize sets the most messages given to one listener call.
// Default 1.
func WithConsumeBatchSize(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.consumeBatchSize = n })
}

// WithPullBatchSize sets the most messages one pull asks for. Default 32.
func WithPullBatchSize(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.pullBatchSize = n })
}

// WithPullMaxBytes sets the most bytes one pull asks for. Default 4 MiB
// (the broker may cap it lower).
func WithPullMaxBytes(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.pullMaxBytes = n })
}

// WithLongPollTimeout sets how long the broker holds a pull on a queue with
// nothing new. Default 15 s.
func WithLongPollTimeout(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.longPollTimeout = d })
}

// WithPullThreshold sets the flow control of one queue: pulling pauses
// while more than msgs messages or bytes bytes are fetched and not yet
// consumed. Default 1000 and 100 MiB.
func WithPullThreshold(msgs int, bytes int64) ConsumerOption {
	return consumerOption(func(o *options) { o.queueMaxMessages, o.queueMaxBytes = msgs, bytes })
}

// WithRetryDelay sets how long a failed message that could not be sent
// back to the broker (or any failed message of a broadcasting consumer)
// waits before it is delivered again locally. Sent-back messages come back
// through the group's retry topic after their delay level (retry.go).
// Default 1 s.
func WithRetryDelay(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.retryDelay = d })
}

// WithSuspendDelay sets how long an orderly queue waits after
// OrderlySuspend before the same batch is delivered again. Default 1 s.
func WithSuspendDelay(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.suspendDelay = d })
}

// WithLockInterval sets how often held orderly queue locks are renewed
// (the broker expires them after 60 s, the client trusts one for 30 s).
// Default 20 s.
func WithLockInterval(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.lockInterval = d })
}

// WithPollBatchSize sets the most messages one PullConsumer.Poll returns.
// Default 32.
func WithPollBatchSize(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.pollBatchSize = n })
}

// WithMasterRetryInterval sets how often a consumer reading from a slave
// (its master unavailable) fetches the route again and tries to return to
// the master; pulls from a slave are held at most this long. Default 3 s.
func WithMasterRetryInterval(d time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.masterRetry = d })
}

// WithRefusalHandler is told of each refusal a consumer meets in the
// background — heartbeats, rebalancing, offsets, pulls answered
// UNAUTHENTICATED or NO_PERMISSION (ErrUnauthenticated, ErrNoPermission),
// or by a broker that accepts TLS only — on the goroutine that met it:
// it must not block. Such calls are retried only every few seconds, as
// nothing changes until the daemons' configuration does. A PullConsumer
// also returns them from Poll.
func WithRefusalHandler(f func(err error)) ConsumerOption {
	return consumerOption(func(o *options) { o.refusalHandler = f })
}

// buildOptions applies opts to the defaults with apply (a method
// expression: ProducerOption.applyProducer, ...) and validates the result.
func buildOptions[T any](opts []T, apply func(T, *options)) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if any(opt) != nil {
			apply(opt, &o)
		}
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	return o, nil
}
