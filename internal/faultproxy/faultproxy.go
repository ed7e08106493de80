// Package faultproxy is a userspace TCP proxy that injects network faults for
// tests. Put one on each directed link you want to disturb — client→broker,
// broker→NameServer, master→slave replication — and point the dialing side at
// Proxy.Addr instead of the real listener.
//
// Every connection accepted on the proxy gets its own connection to the target
// and two goroutines, one per direction, that copy 32 KiB chunks. The fault
// settings are read for every chunk, so a change takes effect on existing and
// new connections at once. All faults apply to both directions.
//
// What each fault models, and what it does not:
//
//   - SetDelay: each chunk is written no earlier than the moment it was read
//     plus the current delay (changing the delay also affects a chunk that is
//     already waiting). Order is kept. Because a direction handles one chunk at
//     a time, the delay also caps throughput at about 32 KiB per delay per
//     direction; it is latency for request/response traffic, not a bandwidth
//     model for bulk streams.
//   - SetDropRate: each chunk is discarded with the given probability.
//     Dropping bytes in the middle of a TCP stream cannot happen on a healthy
//     network (TCP retransmits); this models a broken middlebox and exists to
//     test that receivers detect corruption and gaps (CRCs, offsets, lengths)
//     rather than acting on garbage. The decisions come from a PCG generator
//     seeded by SetSeed, one stream per connection and direction, so for a
//     given seed the n-th chunk of a connection always gets the same decision.
//     Chunk boundaries themselves depend on timing.
//   - Blackhole: a partition where packets vanish. Connections stay open,
//     bytes read are discarded (the sender is not slowed down), and neither
//     FIN nor reset crosses the proxy until the blackhole is lifted; then they
//     are passed on. A connection accepted during a blackhole is not connected
//     to the target until the blackhole is lifted (the target never sees it,
//     as a lost SYN), and whatever the client sent meanwhile is discarded.
//     Unlike a real partition, bytes are lost rather than retransmitted, so a
//     stream that lives through a blackhole has a hole in it. Call Cut when
//     lifting the blackhole to model "the connection timed out", or use the
//     hole to test gap detection.
//   - Cut: every current connection is closed with a reset (SO_LINGER 0) on
//     both sides. Later connections work normally.
//   - Refuse: new connections are reset right after accept. The client's
//     connect succeeds (the kernel completes the handshake) and its first read
//     or write fails, which is how most clients see a refused service.
//
// A connection whose target cannot be dialed (for example a broker that is
// restarting) is reset and counted in Stats.DialErrors.
//
// Close stops everything the proxy started and waits for it.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

const (
	chunkSize   = 32 << 10
	dialTimeout = 10 * time.Second
)

// Direction indexes per-direction state.
const (
	clientToTarget = 0
	targetToClient = 1
)

// Proxy forwards TCP connections from Addr to a target address and injects
// faults. Its methods are safe for concurrent use.
type Proxy struct {
	log    *zap.Logger
	ln     net.Listener
	addr   string
	dialer net.Dialer
	ctx    context.Context // cancelled by Close; parent of every dial
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	target    atomic.Pointer[string]
	delay     atomic.Int64  // time.Duration
	dropRate  atomic.Uint64 // math.Float64bits
	blackhole atomic.Bool
	refuse    atomic.Bool
	seed      atomic.Uint64

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever a fault setting changes
	links    map[*link]struct{}
	nextID   uint64
	started  bool
	closed   bool
	closeErr error

	accepted   atomic.Uint64
	refused    atomic.Uint64
	dialErrors atomic.Uint64
	cuts       atomic.Uint64
	dir        [2]dirCounters
}

type dirCounters struct {
	bytes, chunks                   atomic.Uint64
	droppedChunks, droppedBytes     atomic.Uint64
	blackholedBytes                 atomic.Uint64
	blackholedChunks, delayedChunks atomic.Uint64
}

// Stats is a snapshot of the proxy's counters.
type Stats struct {
	Accepted   uint64 // connections accepted, refused ones included
	Refused    uint64 // connections reset at once because Refuse was on
	Active     int    // connections accepted and not yet fully closed
	DialErrors uint64 // connections reset because the target could not be dialed
	Cut        uint64 // connections closed by Cut

	ClientToTarget DirStats
	TargetToClient DirStats
}

// DirStats counts one direction of traffic over all connections.
type DirStats struct {
	Bytes            uint64 // bytes forwarded (written to the other side)
	Chunks           uint64 // chunks forwarded
	DroppedChunks    uint64 // chunks discarded by the drop rate
	DroppedBytes     uint64
	BlackholedChunks uint64 // chunks discarded because of a blackhole
	BlackholedBytes  uint64
	DelayedChunks    uint64 // chunks that waited for a delay
}

// ChunksDropped is the number of chunks discarded by the drop rate, both ways.
func (s Stats) ChunksDropped() uint64 {
	return s.ClientToTarget.DroppedChunks + s.TargetToClient.DroppedChunks
}

// New listens on listenAddr and returns a proxy to targetAddr. An empty host
// (":0") listens on 127.0.0.1. Nothing is dialed until a client connects, and
// nothing is accepted until Start. A nil logger logs nothing.
func New(listenAddr, targetAddr string, log *zap.Logger) (*Proxy, error) {
	if log == nil {
		log = zap.NewNop()
	}
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen address %q: %w", listenAddr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:      ln,
		addr:    ln.Addr().String(),
		dialer:  net.Dialer{Timeout: dialTimeout},
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		links:   make(map[*link]struct{}),
	}
	p.log = log.With(zap.String("proxy", p.addr))
	p.target.Store(&targetAddr)
	p.seed.Store(1)
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.addr }

// Target is the address new connections are forwarded to.
func (p *Proxy) Target() string { return *p.target.Load() }

// SetTarget changes where later connections go (for example after the target
// restarted on a new port). Existing connections keep their target.
func (p *Proxy) SetTarget(addr string) {
	p.target.Store(&addr)
	p.log.Info("faultproxy: target set", zap.String("target", addr))
}

// Start runs the accept loop in a goroutine owned by the proxy. Calling it
// again, or after Close, does nothing.
func (p *Proxy) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.wg.Add(1)
	go p.acceptLoop()
}

// Close stops accepting, resets every connection, and waits for every
// goroutine the proxy started. It is idempotent; only the first call can
// return an error.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := p.snapshotLocked()
	p.mu.Unlock()

	close(p.done)
	err := p.ln.Close()
	p.cancel()
	for _, l := range links {
		l.teardown(true)
	}
	p.wg.Wait()
	p.log.Debug("faultproxy: closed")
	return err
}

// SetDelay adds d of latency to every chunk forwarded, in both directions.
// 0 or less removes it. A chunk already waiting uses the new value.
func (p *Proxy) SetDelay(d time.Duration) {
	d = max(d, 0)
	p.delay.Store(int64(d))
	p.notify()
	p.log.Info("faultproxy: delay set", zap.Duration("delay", d))
}

// SetDropRate sets the probability, clamped to [0, 1], that a chunk is
// silently discarded. This corrupts the TCP stream on purpose: see the package
// documentation.
func (p *Proxy) SetDropRate(r float64) {
	if math.IsNaN(r) || r < 0 {
		r = 0
	}
	r = min(r, 1)
	p.dropRate.Store(math.Float64bits(r))
	p.notify()
	p.log.Info("faultproxy: drop rate set", zap.Float64("rate", r))
}

// SetSeed seeds the drop decisions of connections accepted after the call
// (the default seed is 1).
func (p *Proxy) SetSeed(seed uint64) {
	p.seed.Store(seed)
	p.log.Info("faultproxy: seed set", zap.Uint64("seed", seed))
}

// Blackhole turns the partition on or off: while on, nothing is forwarded and
// new connections are accepted but not connected to the target.
func (p *Proxy) Blackhole(on bool) {
	p.blackhole.Store(on)
	if !on {
		// Wake connections accepted during the blackhole that are blocked
		// reading from their client, so they dial the target now.
		p.mu.Lock()
		links := p.snapshotLocked()
		p.mu.Unlock()
		for _, l := range links {
			l.wakePending()
		}
	}
	p.notify()
	p.log.Info("faultproxy: blackhole", zap.Bool("on", on))
}

// Cut resets every current connection on both sides. New connections work.
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := p.snapshotLocked()
	p.mu.Unlock()
	n := 0
	for _, l := range links {
		if l.teardown(true) {
			n++
		}
	}
	p.cuts.Add(uint64(n))
	p.log.Info("faultproxy: cut", zap.Int("connections", n))
}

// Refuse makes new connections be reset right after accept while on.
func (p *Proxy) Refuse(on bool) {
	p.refuse.Store(on)
	p.notify()
	p.log.Info("faultproxy: refuse", zap.Bool("on", on))
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := len(p.links)
	p.mu.Unlock()
	return Stats{
		Accepted:       p.accepted.Load(),
		Refused:        p.refused.Load(),
		Active:         active,
		DialErrors:     p.dialErrors.Load(),
		Cut:            p.cuts.Load(),
		ClientToTarget: p.dir[clientToTarget].snapshot(),
		TargetToClient: p.dir[targetToClient].snapshot(),
	}
}

func (c *dirCounters) snapshot() DirStats {
	return DirStats{
		Bytes:            c.bytes.Load(),
		Chunks:           c.chunks.Load(),
		DroppedChunks:    c.droppedChunks.Load(),
		DroppedBytes:     c.droppedBytes.Load(),
		BlackholedChunks: c.blackholedChunks.Load(),
		BlackholedBytes:  c.blackholedBytes.Load(),
		DelayedChunks:    c.delayedChunks.Load(),
	}
}

// notify wakes every goroutine waiting for a fault setting to change.
func (p *Proxy) notify() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// changes returns a channel closed at the next fault setting change. Take it
// before reading the settings, so no change can be missed.
func (p *Proxy) changes() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

func (p *Proxy) snapshotLocked() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	backoff := time.Duration(0)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (for example EMFILE): back off and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.log.Warn("faultproxy: accept", zap.Error(err), zap.Duration("retry_in", backoff))
			t := time.NewTimer(backoff)
			select {
			case <-p.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		p.accepted.Add(1)
		if p.refuse.Load() {
			p.refused.Add(1)
			closeConn(c, true)
			p.log.Debug("faultproxy: refused", zap.Stringer("client", c.RemoteAddr()))
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			closeConn(c, true)
			return
		}
		p.nextID++
		l := newLink(p, p.nextID, c)
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.run()
	}
}

func (p *Proxy) removeLink(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// closeConn closes c; with reset, the peer gets a RST instead of a FIN.
func closeConn(c net.Conn, reset bool) {
	if tc, ok := c.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
