// Package broker is the core of Bolide's broker, and the wiring of its
// features: topics, send, pull with long polling, client sessions and
// consumer groups, offsets, orderly locks, lookups, registration with the
// NameServers and gossip membership. Each feature with state of its own
// lives in a package named for it — the store (broker/store), offsets
// (broker/offsets), replication (broker/replication), transactions
// (broker/txn), delayed delivery (broker/delay), retries and dead letters
// (broker/retry) — behind a small host interface this package implements.
//
// The core speaks no protocol: its API takes and returns domain types and
// coded errors (internal/errcode). Front ends (broker/frontend/...) adapt a
// protocol to it, and package broker/server assembles a core with its front
// ends and listener. docs/ARCHITECTURE.md draws the layers.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker/dedup"
	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/pop"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/rolegate"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// Broker is one broker daemon.
type Broker struct {
	opts Options
	log  *zap.Logger
	// guard is the access control every front end consults (package auth).
	guard *auth.Guard
	// certs is the port's certificate source (WithTLSSource); nil: the HA
	// link opens its own.
	certs   *tlsconf.Source
	store   *store.Store
	topics  *topicTable
	offsets *offsets.Table
	clients *clientRegistry // clients.go
	locks   *queueLocks
	repl    *replication.Replicator
	delay   delayRef       // delay_host.go
	txn     *txn.Service   // txn_host.go
	metrics brokerMetrics  // metrics.go
	retry   *retry.Service // retry_host.go
	pop     *pop.Service   // pop_host.go

	subs *subgroup.Table // subscription groups (subgroups.go)

	// dedup remembers recent sends by unique id (dedup_host.go); nil when
	// off.
	dedup       *dedup.Window
	dedupBefore atomic.Int64 // the log's end when the window was last reset

	sqls     sqlCache // compiled SQL92 subscriptions (msgfilter.go)
	tagExprs tagCache // parsed tag subscriptions (msgfilter.go)

	// The configuration that may change at runtime (runtimeconfig.go):
	// cfg is the options in effect, cfgSaved what config/runtime.json
	// holds; brokerPerm and maxMessageSize are read on the send path.
	cfgMu          sync.Mutex
	cfg            Options
	cfgSaved       map[string]string
	brokerPerm     atomic.Int32
	maxMessageSize atomic.Int64
	traffic        traffic // runtime.go

	addr    string
	started time.Time

	// arrivals holds what waits for messages on each queue (Queue →
	// *queueWaiters), from the first wait until the topic is deleted;
	// parkedWG the goroutines an arrival answers some of the parked pulls
	// on.
	arrivals sync.Map
	parkedWG sync.WaitGroup

	// gate runs the master-only services while the broker is the master
	// (rolegate_wire.go).
	gate *rolegate.Gate

	reg    *registrar
	gossip *gossip

	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	startOnce   sync.Once
	quiesceOnce sync.Once
	quiesceErr  error
	closeOnce   sync.Once
	closeErr    error
}

// New validates the options, opens and recovers the store and loads the
// metadata. The core listens nowhere: the address clients reach it at comes
// from WithAddr (package broker/server binds the listener and passes it),
// else AdvertiseAddr or ListenAddr. Work starts with Start.
func New(opts Options, log *zap.Logger, with ...Option) (*Broker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("broker", opts.BrokerName), zap.Int64("id", opts.BrokerID))
	if err := os.MkdirAll(filepath.Join(opts.StoreDir, "config"), 0o755); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	saved, err := loadRuntimeConfig(&opts, log)
	if err != nil {
		return nil, err
	}
	var deps dependencies
	for _, o := range with {
		o(&deps)
	}
	guard, err := auth.New(opts.Auth, log.Named("auth"))
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b := &Broker{
		opts:     opts,
		log:      log,
		guard:    guard,
		clients:  newClientRegistry(),
		locks:    newQueueLocks(opts.LockExpiry),
		addr:     opts.ListenAddr,
		started:  time.Now(),
		cfg:      opts,
		cfgSaved: saved,
	}
	b.brokerPerm.Store(opts.effectivePermission())
	b.maxMessageSize.Store(int64(opts.MaxMessageSize))
	b.traffic.init(b.started)
	if deps.addr != "" {
		b.addr = deps.addr
	}
	b.certs = deps.certs
	if opts.AdvertiseAddr != "" {
		b.addr = opts.AdvertiseAddr
	}
	fail := func(err error) (*Broker, error) {
		if b.repl != nil {
			_ = b.stopReplication()
		}
		if b.store != nil {
			_ = b.store.Close()
		}
		return nil, err
	}
	host, err := storeHost(b.addr)
	if err != nil {
		return nil, err
	}
	if b.topics, err = loadTopics(filepath.Join(opts.StoreDir, "config", "topics.json")); err != nil {
		return fail(err)
	}
	if b.offsets, err = offsets.Load(filepath.Join(opts.StoreDir, "config", "consumerOffset.json")); err != nil {
		return fail(err)
	}
	if b.subs, err = subgroup.Load(filepath.Join(opts.StoreDir, "config", "subscriptionGroup.json")); err != nil {
		return fail(err)
	}
	so := opts.storeOptions(host)
	if next := so.CommitLog.OnFlush; next != nil {
		so.CommitLog.OnFlush = func(took time.Duration, n int64) { b.metrics.observeFlush(took, n); next(took, n) }
	} else {
		so.CommitLog.OnFlush = b.metrics.observeFlush
	}
	b.pop = newPopService(b) // before the store: its dispatch wakes POP receives
	if b.store, err = store.Open(so, log.Named("store")); err != nil {
		return fail(err)
	}
	b.store.SetArrivalListener(b.onArrival)
	if b.repl, err = newReplicator(b, deps.master, deps.controllers); err != nil {
		return fail(err)
	}
	b.retry = retry.New(retryHost{b}, opts.Retry, opts.BrokerName, log)
	b.gate = newRoleGate(b)
	b.txn = newTxnService(b)
	b.newDedup()
	b.gate.Subscribe("pop", b.pop)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.reg = newRegistrar(b, deps.nameServers)
	if err := b.startGossip(); err != nil {
		return fail(err)
	}
	return b, nil
}

// storeHost is the address stored in records and message ids: the
// broker's address, or, for a host name, the unspecified address with its
// port (the store host only labels records).
func storeHost(addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap, nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("broker: address %q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("broker: address %q: bad port: %w", addr, err)
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
}

// Addr is the address clients use (the bound or advertised address).
func (b *Broker) Addr() string { return b.addr }

// Stopping is closed when the broker begins to stop: front ends end their
// long-lived calls (streams, sessions) then.
func (b *Broker) Stopping() <-chan struct{} { return b.ctx.Done() }

// Store exposes the message store (tests, tools).
func (b *Broker) Store() *store.Store { return b.store }

// Options returns the broker's options.
func (b *Broker) Options() Options { return b.opts }

// Ready reports nil when the broker serves: started (the store recovered),
// registered with at least one NameServer, and its role settled (a slave
// knows its master; a fenced master is not ready). Otherwise the reason.
func (b *Broker) Ready() error {
	if b.reg.ctx.Err() != nil {
		return errors.New("stopping")
	}
	if err := b.reg.registeredAny(); err != nil {
		return err
	}
	switch b.Role() {
	case RoleFenced:
		return errors.New("fenced: a newer master of the group registered")
	case RoleSlave:
		if b.repl.MasterHAAddr() == "" {
			return errors.New("slave: master not known yet")
		}
	}
	return nil
}

// Start starts the periodic work and the services, then registers with the
// NameServers. Front ends serve before it is called, so routes never point
// at a broker that does not answer.
func (b *Broker) Start() error {
	var err error
	b.startOnce.Do(func() {
		b.wg.Add(1)
		go b.housekeeping()
		// The master-only services (transactions, delay) have subscribed
		// to the role gate by now; it starts them if this is the master.
		for _, start := range []func() error{b.startReplication, b.startDelay, b.startPop, b.startRoleGate} {
			if err = start(); err != nil {
				return
			}
		}
		b.ensureReplyTopic()      // reply.go
		b.ensureAutoCreateTopic() // topics.go
		err = b.reg.start()
		b.log.Info("broker started", zap.String("addr", b.addr), zap.String("cluster", b.opts.Cluster),
			zap.Strings("nameServers", b.opts.NameServers))
	})
	return err
}

// housekeeping persists offsets, expires silent clients and samples the
// traffic counters.
func (b *Broker) housekeeping() {
	defer b.wg.Done()
	persist := time.NewTicker(b.opts.OffsetPersistInterval)
	defer persist.Stop()
	expire := time.NewTicker(min(b.opts.ClientExpiry/4, 10*time.Second))
	defer expire.Stop()
	sample := time.NewTicker(trafficSampleEvery)
	defer sample.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-persist.C:
			if err := b.offsets.Persist(); err != nil {
				b.log.Error("persist offsets", zap.Error(err))
			}
		case now := <-sample.C:
			b.traffic.sample(now)
		case now := <-expire.C:
			for _, c := range b.clients.expire(now, b.opts.ClientExpiry) {
				b.log.Info("client expired", zap.String("client", c.id))
			}
		}
	}
}

// onArrival is the store's dispatch hook: wake pulls parked on the queue.
func (b *Broker) onArrival(topic string, queueID int32, _ int64) {
	b.pop.Notify(topic)
	if v, ok := b.arrivals.Load(Queue{topic, queueID}); ok {
		w := v.(*queueWaiters)
		w.sig.Notify()
		b.wakeParked(w)
	}
}

// queueWaiters is what waits for messages on one queue: goroutines on its
// signal (held pulls, the delay and transaction services), and parked
// pulls (park.go).
type queueWaiters struct {
	sig notify.Signal
	// gone is set when the queue's topic is deleted (forgetWaiters).
	gone atomic.Bool

	mu     sync.Mutex
	parked map[*ParkedPull]struct{} // made by the first pull parked
}

// waiters returns the waiters of a queue, creating them.
func (b *Broker) waiters(q Queue) *queueWaiters {
	if v, ok := b.arrivals.Load(q); ok {
		return v.(*queueWaiters)
	}
	v, _ := b.arrivals.LoadOrStore(q, &queueWaiters{})
	return v.(*queueWaiters)
}

// forgetWaiters drops the registries of a deleted topic's queues, so that
// a broker whose topics come and go does not keep one for every queue it
// ever held. The pulls waiting there are woken and answered that the topic
// does not exist (waiters.gone); the delay and transaction services take a
// queue's signal anew for each wait.
func (b *Broker) forgetWaiters(topic string) {
	b.arrivals.Range(func(k, v any) bool {
		if k.(Queue).Topic != topic {
			return true
		}
		b.arrivals.Delete(k)
		w := v.(*queueWaiters)
		w.gone.Store(true)
		w.sig.Notify()
		b.wakeParked(w)
		return true
	})
}

// gone is the answer to a pull whose topic was deleted while it waited.
func (b *Broker) gone(topic string) error {
	return errcode.Errorf(errcode.TopicNotExist, "topic %s was deleted from broker %s", topic, b.opts.BrokerName)
}

// arrivalSignal returns the signal of a queue, creating it.
func (b *Broker) arrivalSignal(topic string, queueID int32) *notify.Signal {
	return &b.waiters(Queue{topic, queueID}).sig
}

// Quiesce begins a stop: it unregisters from the NameServers, stops the
// services (master-only ones first) and gossip, and ends parked pulls and
// client sessions (Stopping closes). Calls in flight may still finish; the
// caller drains its front ends, then calls Close. It is idempotent.
func (b *Broker) Quiesce() error {
	b.quiesceOnce.Do(func() {
		var errs []error
		b.reg.stop()
		for _, stop := range []func() error{b.stopRoleGate, b.stopDelay, b.stopTransactions, b.stopReplication, b.stopGossip} {
			if err := stop(); err != nil {
				errs = append(errs, err)
			}
		}
		b.cancel()
		b.endParked()
		b.quiesceErr = errors.Join(errs...)
	})
	return b.quiesceErr
}

// Close quiesces the broker if that was not done, waits for its
// goroutines, persists the offsets and closes the store. It is idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		errs := []error{b.Quiesce()}
		b.wg.Wait()
		b.parkedWG.Wait()
		if err := b.pop.Close(); err != nil { // its last snapshot and watermarks
			errs = append(errs, err)
		}
		if err := b.offsets.Persist(); err != nil {
			errs = append(errs, err)
		}
		if err := b.store.Close(); err != nil {
			errs = append(errs, err)
		}
		b.closeErr = errors.Join(errs...)
		b.log.Info("broker stopped")
	})
	return b.closeErr
}

// Guard is the broker's access control: front ends authenticate and
// authorize their requests with it (package auth). Never nil.
func (b *Broker) Guard() *auth.Guard { return b.guard }

// Credentials sign the broker's own calls to other daemons.
func (b *Broker) Credentials() auth.Credentials { return b.opts.Credentials }
