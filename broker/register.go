package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// Registration is what a broker tells the NameServers about itself.
type Registration struct {
	Cluster, BrokerName string
	// Addr is the client-facing address; HAAddr the replication one;
	// GossipAddr the memberlist one ("" when membership is off).
	Addr, HAAddr, GossipAddr string
	BrokerID, Epoch          int64
	Version                  string
	// HeartbeatTimeout overrides the NameServer's expiry (0 = theirs).
	HeartbeatTimeout time.Duration
	Topics           []TopicConfig
	DataVersion      topic.DataVersion
	// FifoGroups are the declared subscription groups that consume in
	// order, sorted: the NameServers answer RocketMQ 5 push consumers'
	// QueryAssignment with them.
	FifoGroups []string
}

// RegistrationAnswer is what a NameServer answers: where the group's
// master is, and its own gossip address.
type RegistrationAnswer struct {
	MasterAddr, MasterHAAddr string
	GossipAddr               string
}

// NameServers is how the broker reaches its NameServers. The broker calls
// it from its registration loop; package broker/remote implements it over
// bolide.v1 gRPC. A refusal is a coded error (NOT_MASTER for a fenced
// master).
type NameServers interface {
	Register(ctx context.Context, nameServer string, r Registration) (RegistrationAnswer, error)
	Unregister(ctx context.Context, nameServer string, r Registration) error
	Close() error
}

// registrar registers the broker with every NameServer at start, every
// RegisterInterval and whenever its topics change, and unregisters it on a
// clean stop.
type registrar struct {
	b       *Broker
	ns      NameServers // nil: no registration (a broker without NameServers)
	started bool        // start ran (set before the loop, read after it stopped)
	now     chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	lastErr map[string]error
	// refusals counts registrations a NameServer refused (a coded
	// INVALID_PARAMETER: the broker's identity is held by another live
	// broker, or its configuration conflicts with the table), and
	// refusalLogged the refusal messages already logged.
	refusals      atomic.Int64
	refusalLogged map[string]bool
	// onRegistered is called with each NameServer's answer (membership
	// joins the gossip pool through it).
	onRegistered func(ns string, ans RegistrationAnswer)
}

func newRegistrar(b *Broker, ns NameServers) *registrar {
	ctx, cancel := context.WithCancel(context.Background())
	return &registrar{b: b, ns: ns, now: make(chan struct{}, 1), ctx: ctx, cancel: cancel, lastErr: make(map[string]error),
		refusalLogged: make(map[string]bool)}
}

func (r *registrar) start() error {
	if r.ns == nil {
		return nil
	}
	r.started = true
	r.registerAll() // before Start returns: routes exist as soon as we serve
	r.wg.Add(1)
	go r.loop()
	return nil
}

// trigger asks for a registration now (topics changed).
func (r *registrar) trigger() {
	select {
	case r.now <- struct{}{}:
	default:
	}
}

func (r *registrar) loop() {
	defer r.wg.Done()
	t := time.NewTicker(r.b.opts.RegisterInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.now:
		}
		r.registerAll()
	}
}

func (r *registrar) registration() Registration {
	b := r.b
	topics, version := b.registeredTopics()
	return Registration{
		Cluster:          b.opts.Cluster,
		BrokerName:       b.opts.BrokerName,
		Addr:             b.addr,
		BrokerID:         b.brokerID(),
		HAAddr:           b.HAAddr(),
		Epoch:            b.Epoch(),
		Version:          b.opts.Version,
		HeartbeatTimeout: b.opts.BrokerTimeout,
		GossipAddr:       b.gossipAddr(),
		Topics:           topics,
		DataVersion:      version,
		FifoGroups:       b.fifoGroups(),
	}
}

// registeredTopics returns the topics as the NameServers see them (masked
// by the broker's permission) with the data version that counts them. A
// change of the broker's permission is stored before the version is
// bumped, so a version unchanged across the read means the mask matches it.
func (b *Broker) registeredTopics() ([]TopicConfig, dataVersion) {
	for {
		topics, v := b.topics.snapshot()
		topics = b.maskTopics(topics)
		if b.topics.dataVersion() == v {
			return topics, v
		}
	}
}

// fifoGroups lists the declared groups that consume in order, sorted.
func (b *Broker) fifoGroups() []string {
	groups, _ := b.SubscriptionGroups()
	var out []string
	for i := range groups {
		if groups[i].Fifo() {
			out = append(out, groups[i].GroupName)
		}
	}
	slices.Sort(out)
	return out
}

// registerAll registers with every NameServer in parallel.
func (r *registrar) registerAll() {
	reg := r.registration()
	var wg sync.WaitGroup
	for _, ns := range r.b.opts.NameServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.ctx, r.b.opts.RegisterTimeout)
			defer cancel()
			ans, err := r.ns.Register(ctx, ns, reg)
			r.b.repl.OnRegistered(ns, reg.BrokerID, replication.NameServerAnswer{MasterAddr: ans.MasterAddr, MasterHAAddr: ans.MasterHAAddr}, err)
			refused := err != nil && errcode.Of(err) == errcode.InvalidParameter
			r.mu.Lock()
			prev := r.lastErr[ns]
			r.lastErr[ns] = err
			logRefusal := refused && !r.refusalLogged[err.Error()]
			if logRefusal {
				r.refusalLogged[err.Error()] = true
			}
			r.mu.Unlock()
			if refused {
				r.refusals.Add(1)
			}
			switch {
			case logRefusal:
				r.b.log.Error("name server refused the registration", zap.String("nameServer", ns),
					zap.String("brokerName", reg.BrokerName), zap.Int64("brokerId", reg.BrokerID), zap.Error(err))
			case refused:
			case err != nil && prev == nil:
				r.b.log.Warn("register with name server failed", zap.String("nameServer", ns), zap.Error(err))
			case err == nil && prev != nil:
				r.b.log.Info("registered with name server again", zap.String("nameServer", ns))
			}
			if err == nil && r.onRegistered != nil {
				r.onRegistered(ns, ans)
			}
		}()
	}
	wg.Wait()
}

// registeredAny reports nil once the last registration with at least one
// NameServer succeeded, else the errors of the last attempts.
func (r *registrar) registeredAny() error {
	nss := r.b.opts.NameServers
	if len(nss) == 0 || r.ns == nil {
		return errors.New("no name server configured")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, ns := range nss {
		err, ok := r.lastErr[ns]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: not registered yet", ns))
		case err == nil:
			return nil
		default:
			errs = append(errs, fmt.Errorf("%s: %w", ns, err))
		}
	}
	return fmt.Errorf("not registered with a name server: %w", errors.Join(errs...))
}

// registered reports whether the last registration with every NameServer
// succeeded.
func (r *registrar) registered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ns := range r.b.opts.NameServers {
		if err, ok := r.lastErr[ns]; !ok || err != nil {
			return false
		}
	}
	return len(r.b.opts.NameServers) > 0 && r.ns != nil
}

// stop ends the loop and unregisters from every NameServer.
func (r *registrar) stop() {
	r.cancel()
	r.wg.Wait()
	if r.ns == nil {
		return
	}
	if !r.started { // never registered: nothing to undo
		_ = r.ns.Close()
		return
	}
	reg := r.registration()
	var wg sync.WaitGroup
	for _, ns := range r.b.opts.NameServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), r.b.opts.RegisterTimeout)
			defer cancel()
			if err := r.ns.Unregister(ctx, ns, reg); err != nil {
				r.b.log.Warn("unregister from name server failed", zap.String("nameServer", ns), zap.Error(err))
			}
		}()
	}
	wg.Wait()
	if err := r.ns.Close(); err != nil {
		r.b.log.Warn("close name server connections", zap.Error(err))
	}
}
