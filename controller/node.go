package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapio"
	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// applyTimeout bounds how long a proposal or barrier waits to be taken by
// Raft; its commit is bounded by the leader's lease (a leader without a
// quorum steps down and answers every future it holds).
const applyTimeout = 5 * time.Second

// Controller is one member of the controller Raft group: the FSM, the
// liveness table, the leader's failure detector and the gRPC service.
type Controller struct {
	opts    Options
	lg      *zap.Logger
	fsm     *fsm
	live    *liveness
	hub     *hub
	metrics *metrics

	trans  *raft.NetworkTransport
	logs   raft.LogStore
	stable raft.StableStore
	bolt   *raftboltdb.BoltStore // nil in memory
	snaps  raft.SnapshotStore
	rlog   *zapio.Writer
	raft   *raft.Raft

	// scanWaiting and scanLeaseEnd are the groups whose dead master's
	// lease the scan waits out, and when it ends; scanLoop's own.
	scanWaiting  map[string]bool
	scanLeaseEnd map[string]time.Time

	obsCh chan raft.Observation
	obs   *raft.Observer

	lmu         sync.Mutex // lmu protects leader, term, ready and leaderSince
	leader      bool
	term        uint64 // of the current leadership
	ready       bool   // a barrier committed in this leadership: the FSM is current
	leaderSince time.Time

	quit chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex // mu protects started and closed
	started   bool
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// New validates opts, opens the Raft stores and binds the Raft transport.
// Raft starts with Start.
func New(opts Options, lg *zap.Logger) (*Controller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	c := &Controller{
		opts:         opts,
		lg:           lg,
		live:         newLiveness(&opts),
		hub:          newHub(),
		metrics:      newMetrics(),
		quit:         make(chan struct{}),
		scanWaiting:  map[string]bool{},
		scanLeaseEnd: map[string]time.Time{},
		rlog:         &zapio.Writer{Log: lg.Named("raft"), Level: zap.InfoLevel},
	}
	c.fsm = newFSM(c.hub.notify)
	if err := c.openStores(); err != nil {
		c.closeStores()
		return nil, err
	}
	stream, err := newStreamLayer(opts.RaftListen, opts.Raft, opts.Guard, lg.Named("raft-transport"))
	if err != nil {
		c.closeStores()
		return nil, fmt.Errorf("controller: raft transport on %s: %w", opts.RaftListen, err)
	}
	c.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 2 * time.Second, Logger: c.hclog(),
	})
	return c, nil
}

func (c *Controller) hclog() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Output: c.rlog, Level: hclog.Info, DisableTime: true})
}

func (c *Controller) openStores() error {
	if c.opts.InMemory && c.opts.Dir == "" {
		s := raft.NewInmemStore()
		c.logs, c.stable = s, s
		c.snaps = raft.NewInmemSnapshotStore()
		return nil
	}
	if err := os.MkdirAll(c.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if c.opts.InMemory {
		s := raft.NewInmemStore()
		c.logs, c.stable = s, s
	} else {
		b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(c.opts.Dir, "raft.db")})
		if err != nil {
			return fmt.Errorf("controller: open raft log: %w", err)
		}
		c.bolt = b
		c.logs, c.stable = b, b
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.opts.Dir, 2, c.hclog())
	if err != nil {
		return fmt.Errorf("controller: snapshot store: %w", err)
	}
	c.snaps = snaps
	return nil
}

func (c *Controller) closeStores() error {
	if c.bolt != nil {
		if err := c.bolt.Close(); err != nil {
			return fmt.Errorf("controller: close raft log: %w", err)
		}
	}
	return nil
}

// RaftAddr is the Raft transport's bound address.
func (c *Controller) RaftAddr() string { return string(c.trans.LocalAddr()) }

// ID is this controller's Raft server id.
func (c *Controller) ID() string { return c.opts.ID }

// Register serves the controller's gRPC service on s.
func (c *Controller) Register(s grpc.ServiceRegistrar) {
	pb.RegisterControllerServer(s, &service{c: c})
}

func (c *Controller) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.opts.ID)
	rc.HeartbeatTimeout = c.opts.RaftHeartbeat
	rc.ElectionTimeout = c.opts.RaftElectionTimeout
	// A leader steps down after a heartbeat timeout without a quorum (the
	// most raft allows): shorter, a loaded host makes leadership flap; the
	// grace period of the next leader covers the overlap.
	rc.LeaderLeaseTimeout = c.opts.RaftHeartbeat
	rc.CommitTimeout = 50 * time.Millisecond
	rc.SnapshotThreshold = 8192
	rc.TrailingLogs = 10240
	rc.SnapshotInterval = 120 * time.Second
	rc.Logger = c.hclog()
	return rc
}

// configuration is the fixed voter set: the peers, or this node alone.
func (c *Controller) configuration() raft.Configuration {
	if len(c.opts.Peers) == 0 {
		return raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(c.opts.ID), Address: c.trans.LocalAddr(),
		}}}
	}
	var cfg raft.Configuration
	for _, p := range c.opts.Peers {
		cfg.Servers = append(cfg.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr),
		})
	}
	return cfg
}

// Start starts Raft (bootstrapping the fixed configuration on first
// start), the leadership watcher and the failure detector.
func (c *Controller) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return errors.New("controller: start after close")
	case c.started:
		return errors.New("controller: already started")
	}
	r, err := raft.NewRaft(c.raftConfig(), c.fsm, c.logs, c.stable, c.snaps, c.trans)
	if err != nil {
		return fmt.Errorf("controller: start raft: %w", err)
	}
	c.raft = r
	c.started = true
	if err := r.BootstrapCluster(c.configuration()).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("controller: bootstrap: %w", err)
	}
	c.obsCh = make(chan raft.Observation, 16)
	c.obs = raft.NewObserver(c.obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(c.obs)
	c.goFunc(c.leaderLoop)
	c.goFunc(c.scanLoop)
	c.lg.Info("controller started", zap.String("id", c.opts.ID), zap.String("raft_addr", c.RaftAddr()),
		zap.String("peers", FormatPeers(c.opts.Peers)), zap.String("dir", c.opts.Dir))
	return nil
}

func (c *Controller) goFunc(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// enter counts a gRPC handler in, false once Close began.
func (c *Controller) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.started {
		return false
	}
	c.wg.Add(1)
	return true
}

// Close ends the heartbeat streams, stops the loops and Raft, and closes
// the transport and the stores. It is idempotent.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Controller) close() error {
	c.mu.Lock()
	c.closed = true
	started := c.started
	c.mu.Unlock()
	close(c.quit)
	// The loops and the handlers end before Raft does: a future that Raft
	// has committed but not yet applied when it shuts down is never
	// answered (its FSM loop returns without draining), so a barrier or a
	// proposal waiting on one would wait forever. While Raft runs every
	// future is answered: applied, refused, or failed when a leader
	// without a quorum steps down (LeaderLeaseTimeout).
	c.wg.Wait()
	var errs []error
	if started {
		c.raft.DeregisterObserver(c.obs)
		if err := c.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("controller: raft shutdown: %w", err))
		}
	}
	// Close the pooled outgoing connections too (Close does not): the
	// peers' goroutines serving them end.
	c.trans.CloseStreams()
	if err := c.trans.Close(); err != nil {
		errs = append(errs, fmt.Errorf("controller: close transport: %w", err))
	}
	if err := c.closeStores(); err != nil {
		errs = append(errs, err)
	}
	c.lg.Info("controller stopped", zap.String("id", c.opts.ID))
	return errors.Join(errs...)
}

// leaderLoop follows this node's leadership: on gaining it, it notes the
// time (the grace period runs from it), commits a barrier (so the FSM is
// current before any decision), and tells every stream; on losing it, it
// forgets the grants.
func (c *Controller) leaderLoop() {
	t := time.NewTicker(c.opts.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-c.obsCh:
		case <-t.C:
		}
		c.syncLeadership()
	}
}

func (c *Controller) syncLeadership() {
	term := c.raft.CurrentTerm()
	is := c.raft.State() == raft.Leader
	c.lmu.Lock()
	was := c.leader && c.term == term // a new term is a new leadership
	c.leader = is
	if is && !was {
		c.term = term
		c.leaderSince = time.Now()
		c.ready = false
	}
	c.lmu.Unlock()
	if is == was {
		return
	}
	c.metrics.leader.Set(boolGauge(is))
	c.hub.notifyAll()
	if !is {
		c.live.forgetGrants()
		c.lg.Info("controller: lost leadership", zap.String("id", c.opts.ID))
		return
	}
	c.lg.Info("controller: leader", zap.String("id", c.opts.ID), zap.Uint64("term", term),
		zap.Duration("no_elections_for", c.opts.grace()))
	if err := c.raft.Barrier(applyTimeout).Error(); err != nil {
		c.lg.Warn("controller: barrier after winning leadership failed", zap.Error(err))
		return
	}
	c.lmu.Lock()
	c.ready = c.leader && c.term == term
	c.lmu.Unlock()
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// leadership is this node's view: leader (Raft says so), ready (the FSM
// is current in this leadership) and since when.
type leadership struct {
	leader bool
	ready  bool
	since  time.Time
}

// leadership is ready only in the leadership (term) whose barrier
// committed: a leadership lost and won again before leaderLoop noticed is
// not ready, so its grace period cannot start from the old one's.
func (c *Controller) leadership() leadership {
	term := c.raft.CurrentTerm()
	is := c.raft.State() == raft.Leader
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return leadership{leader: is, ready: is && c.leader && c.ready && c.term == term, since: c.leaderSince}
}

// leaderID names the Raft leader, "" when unknown.
func (c *Controller) leaderID() (id, addr string) {
	a, i := c.raft.LeaderWithID()
	return string(i), string(a)
}

// propose commits a command and returns its result.
func (c *Controller) propose(cmd *Command) (Result, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return Result{}, fmt.Errorf("controller: encode command: %w", err)
	}
	f := c.raft.Apply(b, applyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			id, _ := c.leaderID()
			return Result{}, errcode.Errorf(errcode.ControllerNotLeader, "controller: not the leader (leader %q): %v", id, err)
		}
		return Result{}, errcode.Errorf(errcode.ServiceNotAvailable, "controller: commit: %v", err)
	}
	switch r := f.Response().(type) {
	case Result:
		return r, nil
	case error:
		return Result{}, r
	}
	return Result{}, fmt.Errorf("controller: unexpected apply response %T", f.Response())
}

// waitUntil sleeps until t, ctx's end or Close; false unless t came.
func (c *Controller) waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
	case <-c.quit:
	}
	return false
}
