// Package broker is Bolide's broker: topics, send, pull with long polling,
// consumer groups, offsets, orderly locks, lookups, registration with the
// NameServers, and the gRPC front end over them. Storage lives in
// broker/store; this package keeps wire types at its edge (grpc.go).
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/rolegate"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/notify"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Broker is one broker daemon.
type Broker struct {
	opts      Options
	log       *zap.Logger
	store     *store.Store
	topics    *topicTable
	offsets   *offsets.Table
	consumers *consumerRegistry
	locks     *queueLocks
	repl      *replication.Replicator
	delay     delayRef       // delay_host.go
	txn       *txn.Service   // txn_host.go
	metrics   brokerMetrics  // metrics.go
	retry     *retry.Service // retry_host.go

	lis     net.Listener
	grpcSrv *grpc.Server
	port    *portMux // frame.go: hands each connection to gRPC or the frame front end
	addr    string
	started time.Time

	arrivals sync.Map // queueKey → *notify.Signal

	// gate runs the master-only services while the broker is the master
	// (rolegate_wire.go).
	gate *rolegate.Gate

	reg    *registrar
	gossip *gossip

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
}

// maxFrame bounds one gRPC message: a 4 MiB body batch plus headroom.
const maxFrame = 64 << 20

// New validates the options, opens and recovers the store, loads metadata
// and binds the listener (":0" picks a free port). Serving starts with Start.
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
	lis, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen %s: %w", opts.ListenAddr, err)
	}
	b := &Broker{
		opts:      opts,
		log:       log,
		consumers: newConsumerRegistry(),
		locks:     newQueueLocks(opts.LockExpiry),
		lis:       lis,
		addr:      lis.Addr().String(),
		started:   time.Now(),
	}
	if opts.AdvertiseAddr != "" {
		b.addr = opts.AdvertiseAddr
	}
	fail := func(err error) (*Broker, error) {
		_ = lis.Close()
		if b.repl != nil {
			_ = b.stopReplication()
		}
		if b.store != nil {
			_ = b.store.Close()
		}
		return nil, err
	}
	host, err := netip.ParseAddrPort(b.addr)
	if err != nil {
		// A host name: the store host only labels records and message ids.
		host = netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(lis.Addr().(*net.TCPAddr).Port))
	}
	if b.topics, err = loadTopics(filepath.Join(opts.StoreDir, "config", "topics.json")); err != nil {
		return fail(err)
	}
	if b.offsets, err = offsets.Load(filepath.Join(opts.StoreDir, "config", "consumerOffset.json")); err != nil {
		return fail(err)
	}
	so := opts.storeOptions(host)
	if next := so.CommitLog.OnFlush; next != nil {
		so.CommitLog.OnFlush = func(took time.Duration, n int64) { b.metrics.observeFlush(took, n); next(took, n) }
	} else {
		so.CommitLog.OnFlush = b.metrics.observeFlush
	}
	if b.store, err = store.Open(so, log.Named("store")); err != nil {
		return fail(err)
	}
	b.store.SetArrivalListener(b.onArrival)
	if b.repl, err = newReplicator(b, with...); err != nil {
		return fail(err)
	}
	b.retry = retry.New(retryHost{b}, opts.Retry, opts.BrokerName, log)
	b.gate = newRoleGate(b)
	b.txn = newTxnService(b)
	b.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(maxFrame), grpc.MaxSendMsgSize(maxFrame))
	pb.RegisterBrokerServer(b.grpcSrv, &grpcServer{b: b})
	pb.RegisterDelayServer(b.grpcSrv, &delayServer{b: b})
	pb.RegisterBrokerHAServer(b.grpcSrv, &haGRPC{b: b})
	pb.RegisterTransactionServer(b.grpcSrv, newTransactionServer(b))
	pb.RegisterDeadLetterServer(b.grpcSrv, &deadLetterServer{b: b})
	b.port = newPortMux(lis, newFrameServer(b), log)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.reg = newRegistrar(b)
	if err := b.startGossip(); err != nil {
		return fail(err)
	}
	return b, nil
}

// Addr is the address clients use (the bound or advertised address).
func (b *Broker) Addr() string { return b.addr }

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

// Start serves gRPC, registers with the NameServers and starts the periodic
// work. It returns once serving has begun.
func (b *Broker) Start() error {
	var err error
	b.startOnce.Do(func() {
		b.wg.Add(3)
		go func() {
			defer b.wg.Done()
			if serr := b.grpcSrv.Serve(b.port.grpcLis); serr != nil && !errors.Is(serr, grpc.ErrServerStopped) {
				b.log.Error("grpc server stopped", zap.Error(serr))
			}
		}()
		go func() {
			defer b.wg.Done()
			b.port.serve()
		}()
		go b.housekeeping()
		// The master-only services (transactions, delay) have subscribed
		// to the role gate by now; it starts them if this is the master.
		for _, start := range []func() error{b.startReplication, b.startDelay, b.startRoleGate} {
			if err = start(); err != nil {
				return
			}
		}
		err = b.reg.start()
		b.log.Info("broker started", zap.String("addr", b.addr), zap.String("cluster", b.opts.Cluster),
			zap.Strings("nameServers", b.opts.NameServers))
	})
	return err
}

// housekeeping persists offsets and expires silent clients.
func (b *Broker) housekeeping() {
	defer b.wg.Done()
	persist := time.NewTicker(b.opts.OffsetPersistInterval)
	defer persist.Stop()
	expire := time.NewTicker(min(b.opts.ClientExpiry/4, 10*time.Second))
	defer expire.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-persist.C:
			if err := b.offsets.Persist(); err != nil {
				b.log.Error("persist offsets", zap.Error(err))
			}
		case now := <-expire.C:
			for _, c := range b.consumers.expire(now, b.opts.ClientExpiry) {
				b.log.Info("client expired", zap.String("client", c.id))
			}
		}
	}
}

// onArrival is the store's dispatch hook: wake pulls parked on the queue.
func (b *Broker) onArrival(topic string, queueID int32, _ int64) {
	if v, ok := b.arrivals.Load(queueKey{topic, queueID}); ok {
		v.(*notify.Signal).Notify()
	}
}

// arrivalSignal returns the signal of a queue, creating it.
func (b *Broker) arrivalSignal(topic string, queueID int32) *notify.Signal {
	k := queueKey{topic, queueID}
	if v, ok := b.arrivals.Load(k); ok {
		return v.(*notify.Signal)
	}
	v, _ := b.arrivals.LoadOrStore(k, &notify.Signal{})
	return v.(*notify.Signal)
}

// closeDrain bounds how long Close waits for in-flight calls.
const closeDrain = 5 * time.Second

// Close stops accepting, unregisters from the NameServers, ends streams and
// parked pulls, waits up to 5 s for in-flight calls, persists offsets and
// closes the store. It is idempotent.
func (b *Broker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeDrain)
	defer cancel()
	return b.Shutdown(ctx)
}

// Shutdown is Close with the wait for in-flight calls bounded by ctx
// instead (a daemon's --drain-timeout): when ctx ends, calls still running
// are cut off; offsets are persisted and the store is closed either way.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.closeOnce.Do(func() {
		var errs []error
		b.reg.stop()
		for _, stop := range []func() error{b.stopRoleGate, b.stopDelay, b.stopTransactions, b.stopReplication} {
			if err := stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := b.stopGossip(); err != nil {
			errs = append(errs, err)
		}
		b.cancel() // ends Connect streams and parked pulls
		b.port.stopAccepting()
		stopped := make(chan struct{})
		go func() { b.grpcSrv.GracefulStop(); close(stopped) }()
		if err := b.port.frames.Shutdown(ctx); err != nil {
			b.log.Warn("frame connections did not drain in time", zap.Error(err))
		}
		select {
		case <-stopped:
		case <-ctx.Done():
			b.grpcSrv.Stop()
			<-stopped
		}
		_ = b.lis.Close() // never served if Start was not called
		b.wg.Wait()
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
