// Package rolegate runs a broker's master-only services — transaction
// check-back, delayed delivery, anything else that must act on one broker
// of a group only — while the broker is the master, and only then.
//
// Every such service subscribes to the one Gate of its broker. When the
// broker becomes the master the gate calls each service's Lead with a fresh
// context; when it stops being the master (a demotion, a fence, or the
// gate closing) the gate cancels that context and waits until the service
// says its work has stopped, before it would let the service lead again.
// Transitions are serialised, so a service never leads twice at once and
// never sees a loss without the lead before it.
package rolegate

import (
	"context"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Source is where the gate learns the broker's role.
type Source interface {
	// IsMaster reports whether the broker is the master now.
	IsMaster() bool
	// Changes returns a channel that is closed at the next role change.
	// The gate takes it before it reads IsMaster, so no change is missed.
	Changes() <-chan struct{}
}

// Service is a master-only service.
type Service interface {
	// Lead starts the service's master-only work and returns at once. The
	// work runs until ctx ends; the returned wait blocks until it has
	// stopped.
	Lead(ctx context.Context) (wait func())
}

type member struct {
	name   string
	svc    Service
	cancel context.CancelFunc // nil while not leading
	wait   func()
}

// Gate follows a Source and runs the subscribed services while it says
// master. The zero value is not usable: use New.
type Gate struct {
	src Source
	log *zap.Logger

	mu      sync.Mutex // serialises transitions
	members []*member
	leading bool
	closed  bool
	// applied is leading && !closed, for Sync's look without the lock.
	applied atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New returns a gate over src. Subscribe the services, then Start.
func New(src Source, log *zap.Logger) *Gate {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Gate{src: src, log: log, ctx: ctx, cancel: cancel}
}

// Subscribe adds a service. If the gate already leads, the service starts
// leading at once.
func (g *Gate) Subscribe(name string, s Service) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := &member{name: name, svc: s}
	g.members = append(g.members, m)
	if g.leading && !g.closed {
		g.leadLocked(m)
	}
}

// Start applies the current role and follows its changes until Close.
func (g *Gate) Start() {
	g.once.Do(func() {
		changed := g.src.Changes()
		g.Sync()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for {
				select {
				case <-g.ctx.Done():
					return
				case <-changed:
				}
				changed = g.src.Changes()
				g.Sync()
			}
		}()
	})
}

// Sync applies the role the source reports now, without waiting for the
// watcher (a request that comes right after a promotion), and reports
// whether the services lead.
func (g *Gate) Sync() bool {
	master := g.src.IsMaster()
	if master == g.applied.Load() {
		return master // nothing to apply: the common case, on every send
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || master == g.leading {
		return g.leading && !g.closed
	}
	if master {
		g.log.Info("master: master-only services start", zap.Int("services", len(g.members)))
		for _, m := range g.members {
			g.leadLocked(m)
		}
	} else {
		g.log.Info("not the master: master-only services stop", zap.Int("services", len(g.members)))
		g.followLocked()
	}
	g.leading = master
	g.applied.Store(master)
	return master
}

// Leading reports whether the services lead now.
func (g *Gate) Leading() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leading && !g.closed
}

// Close stops following the role, stops every leading service and waits
// for them. It is idempotent; a closed gate never leads again.
func (g *Gate) Close() {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	g.applied.Store(false)
	g.followLocked()
	g.leading = false
}

func (g *Gate) leadLocked(m *member) {
	ctx, cancel := context.WithCancel(g.ctx)
	m.cancel = cancel
	m.wait = m.svc.Lead(ctx)
}

// followLocked stops the leading services, last subscribed first.
func (g *Gate) followLocked() {
	for i := len(g.members) - 1; i >= 0; i-- {
		m := g.members[i]
		if m.cancel == nil {
			continue
		}
		m.cancel()
		if m.wait != nil {
			m.wait()
		}
		m.cancel, m.wait = nil, nil
	}
}
