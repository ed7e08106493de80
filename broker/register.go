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
	// Delta: Topics are only the topics changed since BaseVersion and
	// Removed those deleted since; TopicCount is how many the broker has.
	// Sent only to a NameServer that answered DeltaAccepted.
	Delta       bool
	BaseVersion topic.DataVersion
	Removed     []string
	TopicCount  int
}

// RegistrationAnswer is what a NameServer answers: where the group's
// master is, and its own gossip address.
type RegistrationAnswer struct {
	MasterAddr, MasterHAAddr string
	GossipAddr               string
	// DeltaAccepted: the NameServer takes delta registrations.
	DeltaAccepted bool
	// TopicsStale: a delta registration was not applied (the NameServer
	// holds another version); the broker registers its whole table.
	TopicsStale bool
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

// registerSpacing is the least time between the starts of two
// registrations that a change of the topics asks for: a change after a
// quiet spell is registered at once, the changes of a burst go together
// in one registration every registerSpacing at most (delaying a new
// topic's route by as much at most).
const registerSpacing = 10 * time.Millisecond

// registrar registers the broker with every NameServer at start, every
// RegisterInterval and whenever its topics change (at most one such
// registration every registerSpacing), and unregisters it on a clean stop.
//
// A NameServer that answers DeltaAccepted is sent, once it holds a version
// of the topic table, only what changed since that version (an empty delta
// is a heartbeat); one that answers TopicsStale, fails, or holds a version
// older than the table's history of changes is sent the whole table.
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
	// held is, per NameServer that takes deltas, the topic data version it
	// holds for this broker (guarded by mu).
	held map[string]topic.DataVersion
	// deltas and wholes count the registrations sent of each kind (tests).
	deltas, wholes atomic.Int64
}

func newRegistrar(b *Broker, ns NameServers) *registrar {
	ctx, cancel := context.WithCancel(context.Background())
	return &registrar{b: b, ns: ns, now: make(chan struct{}, 1), ctx: ctx, cancel: cancel, lastErr: make(map[string]error),
		refusalLogged: make(map[string]bool), held: make(map[string]topic.DataVersion)}
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
	var last time.Time // when the last registration started
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.now:
			// In a burst, wait out the spacing: the changes made
			// meanwhile are in the registration that follows (its
			// topics are read after the wait).
			if wait := registerSpacing - time.Since(last); wait > 0 {
				spacing := time.NewTimer(wait)
				select {
				case <-r.ctx.Done():
					spacing.Stop()
					return
				case <-spacing.C:
				}
				select {
				case <-r.now:
				default:
				}
			}
		}
		last = time.Now()
		r.registerAll()
	}
}

func (r *registrar) registration() Registration {
	reg := r.header()
	reg.Topics, reg.DataVersion = r.b.registeredTopics()
	return reg
}

// deltaRegistration is the registration for a NameServer holding version
// base: what changed since; ok is false when only the whole table tells it.
func (r *registrar) deltaRegistration(base topic.DataVersion) (Registration, bool) {
	reg := r.header()
	for {
		changed, removed, count, v, ok := r.b.topics.deltaSince(base)
		if !ok {
			return Registration{}, false
		}
		changed = r.b.maskTopics(changed)
		if r.b.topics.dataVersion() == v { // see registeredTopics
			reg.Delta, reg.BaseVersion, reg.DataVersion = true, base, v
			reg.Topics, reg.Removed, reg.TopicCount = changed, removed, count
			return reg, true
		}
	}
}

// header is a registration without its topics.
func (r *registrar) header() Registration {
	b := r.b
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
	var (
		wholeOnce sync.Once
		whole     Registration
	)
	wholeReg := func() Registration {
		wholeOnce.Do(func() { whole = r.registration() })
		return whole
	}
	var wg sync.WaitGroup
	for _, ns := range r.b.opts.NameServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.ctx, r.b.opts.RegisterTimeout)
			defer cancel()
			ans, reg, err := r.registerOne(ctx, ns, wholeReg)
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

// registerOne registers with one NameServer: a delta when it takes them
// and holds a version the history reaches, else (or when it finds the
// delta stale) the whole table. It returns the registration that was
// answered.
func (r *registrar) registerOne(ctx context.Context, ns string, whole func() Registration) (RegistrationAnswer, Registration, error) {
	r.mu.Lock()
	base, ok := r.held[ns]
	r.mu.Unlock()
	var (
		reg Registration
		ans RegistrationAnswer
		err error
	)
	if ok {
		if reg, ok = r.deltaRegistration(base); ok {
			r.deltas.Add(1)
			ans, err = r.ns.Register(ctx, ns, reg)
			ok = err == nil && !ans.TopicsStale
		}
	}
	if !ok {
		reg = whole()
		if cerr := ctx.Err(); cerr != nil {
			if err == nil {
				err = cerr
			}
		} else {
			r.wholes.Add(1)
			ans, err = r.ns.Register(ctx, ns, reg)
		}
	}
	r.mu.Lock()
	if err == nil && ans.DeltaAccepted && !ans.TopicsStale {
		r.held[ns] = reg.DataVersion
	} else {
		delete(r.held, ns)
	}
	r.mu.Unlock()
	return ans, reg, err
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
	reg := r.header()
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
