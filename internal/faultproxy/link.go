package faultproxy

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// link is one proxied connection: the accepted client connection and, once
// dialed, the connection to the target.
type link struct {
	p      *Proxy
	id     uint64
	log    *zap.Logger
	client net.Conn
	ctx    context.Context // cancelled by teardown; aborts a dial in progress
	cancel context.CancelFunc
	done   chan struct{} // closed by teardown
	rng    [2]*rand.Rand // drop decisions, one stream per direction

	mu     sync.Mutex
	target net.Conn // nil until dialed; written only by the client→target goroutine
	closed bool

	// t2cDone is closed when the target→client goroutine ends; nil if it was
	// never started. Used only by the run goroutine.
	t2cDone chan struct{}
}

func newLink(p *Proxy, id uint64, client net.Conn) *link {
	ctx, cancel := context.WithCancel(p.ctx)
	seed := p.seed.Load()
	return &link{
		p:      p,
		id:     id,
		log:    p.log.With(zap.Uint64("conn", id), zap.Stringer("client", client.RemoteAddr())),
		client: client,
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		rng: [2]*rand.Rand{
			rand.New(rand.NewPCG(seed, id<<1|clientToTarget)),
			rand.New(rand.NewPCG(seed, id<<1|targetToClient)),
		},
	}
}

// run owns the link: it copies client→target itself, waits for the
// target→client goroutine, then closes both connections.
func (l *link) run() {
	defer l.p.wg.Done()
	defer l.p.removeLink(l)
	l.log.Debug("faultproxy: accepted")
	l.pump(clientToTarget)
	if l.t2cDone != nil {
		<-l.t2cDone
	}
	l.teardown(false)
	l.log.Debug("faultproxy: finished")
}

// teardown closes both connections (with a reset if asked) and reports
// whether this call did it.
func (l *link) teardown(reset bool) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.cancel()
	close(l.done)
	target := l.target
	l.mu.Unlock()
	closeConn(l.client, reset)
	if target != nil {
		closeConn(target, reset)
	}
	return true
}

func (l *link) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func (l *link) getTarget() net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.target
}

// wakePending interrupts the client read of a link that has no target yet,
// so that it notices the blackhole was lifted and dials.
func (l *link) wakePending() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.target == nil && !l.closed {
		_ = l.client.SetReadDeadline(time.Now())
	}
}

// connect dials the target and starts the target→client goroutine. Called
// only from the client→target goroutine.
func (l *link) connect() bool {
	addr := l.p.Target()
	conn, err := l.p.dialer.DialContext(l.ctx, "tcp", addr)
	if err != nil {
		if !l.isClosed() {
			l.p.dialErrors.Add(1)
			l.log.Warn("faultproxy: dial target", zap.String("target", addr), zap.Error(err))
		}
		l.teardown(true)
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = conn.Close()
		return false
	}
	l.target = conn
	l.t2cDone = make(chan struct{})
	l.p.wg.Add(1) // the run goroutine holds a count, so this cannot race Wait
	go func() {
		defer l.p.wg.Done()
		defer close(l.t2cDone)
		l.pump(targetToClient)
	}()
	l.log.Debug("faultproxy: connected", zap.String("target", addr))
	return true
}

// ends returns the source and destination of a direction; dst is nil while a
// client→target link has no target.
func (l *link) ends(dir int) (src, dst net.Conn) {
	if dir == clientToTarget {
		return l.client, l.getTarget()
	}
	return l.getTarget(), l.client
}

// pump copies one direction chunk by chunk, applying the faults current at
// each chunk, until its source ends or the link is torn down.
func (l *link) pump(dir int) {
	p := l.p
	src, _ := l.ends(dir)
	buf := make([]byte, chunkSize)
	for {
		if dir == clientToTarget && l.getTarget() == nil && !p.blackhole.Load() {
			if !l.connect() {
				return
			}
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !l.forward(dir, buf[:n], time.Now()) {
				l.teardown(true)
				return
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !l.isClosed() {
			// Woken by Blackhole(false): clear the deadline before looking
			// at the settings again, so a later wake-up is not lost.
			_ = src.SetReadDeadline(time.Time{})
			continue
		}
		if l.isClosed() {
			return
		}
		// The source finished. Neither FIN nor reset crosses a blackhole:
		// pass it on once the blackhole is lifted.
		if !l.waitOpen(dir) {
			return
		}
		if errors.Is(err, io.EOF) {
			_, dst := l.ends(dir)
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
				return
			}
		}
		l.teardown(true)
		return
	}
}

// waitOpen waits until no blackhole is on and, for client→target, the target
// is connected. It returns false if the link was torn down meanwhile.
func (l *link) waitOpen(dir int) bool {
	p := l.p
	for {
		ch := p.changes()
		if !p.blackhole.Load() {
			break
		}
		select {
		case <-ch:
		case <-l.done:
			return false
		}
	}
	if dir == clientToTarget && l.getTarget() == nil {
		return l.connect()
	}
	return !l.isClosed()
}

// forward applies delay, blackhole and drop rate to a chunk read at readAt,
// then writes it. It returns false if the link must end.
func (l *link) forward(dir int, chunk []byte, readAt time.Time) bool {
	p := l.p
	c := &p.dir[dir]
	_, dst := l.ends(dir)
	if dst == nil { // accepted during a blackhole, not connected yet
		c.blackholedChunks.Add(1)
		c.blackholedBytes.Add(uint64(len(chunk)))
		return true
	}
	if p.delay.Load() > 0 {
		c.delayedChunks.Add(1)
		if !l.waitDelay(readAt) {
			return false
		}
	}
	if p.blackhole.Load() {
		c.blackholedChunks.Add(1)
		c.blackholedBytes.Add(uint64(len(chunk)))
		return true
	}
	if r := math.Float64frombits(p.dropRate.Load()); r > 0 && (r >= 1 || l.rng[dir].Float64() < r) {
		c.droppedChunks.Add(1)
		c.droppedBytes.Add(uint64(len(chunk)))
		return true
	}
	if _, err := dst.Write(chunk); err != nil {
		if !l.isClosed() {
			l.log.Debug("faultproxy: write", zap.Int("dir", dir), zap.Error(err))
		}
		return false
	}
	c.chunks.Add(1)
	c.bytes.Add(uint64(len(chunk)))
	return true
}

// waitDelay sleeps until readAt plus the current delay, re-reading the delay
// whenever it changes. It returns false if the link was torn down.
func (l *link) waitDelay(readAt time.Time) bool {
	p := l.p
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		ch := p.changes()
		wait := time.Until(readAt.Add(time.Duration(p.delay.Load())))
		if wait <= 0 {
			return true
		}
		if t == nil {
			t = time.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C:
		case <-ch:
		case <-l.done:
			return false
		}
	}
}
