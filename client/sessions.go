package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// brokerSessions keeps one Connect stream open to each broker address of
// a set. A session sends a heartbeat when its stream opens, every
// heartbeat interval and when asked (heartbeatNow), hands every message
// the broker sends to onMessage, and opens the stream again, after a
// backoff, when it breaks. Consumers use it to register their group and
// hear of rebalances, transaction producers to register theirs and
// receive checks.
type brokerSessions struct {
	b    *base
	name string // in log lines: "consumer session", "transaction session"

	heartbeat func() *pb.ClientMessage
	// onMessage is called on the stream's receiving goroutine with the
	// stream's context, which ends with the stream.
	onMessage func(ctx context.Context, addr string, m *pb.BrokerMessage)
	// onReconnect, when set, is called after a heartbeat got through on a
	// stream other than the session's first: the broker forgot the client
	// while the stream was down.
	onReconnect func()
	// refused, when set, is told of each failure of a session; when it
	// reports a permanent refusal the session waits long before it tries
	// again.
	refused func(error) bool

	mu     sync.Mutex
	m      map[string]*brokerSession
	closed bool
}

// brokerSession is the Connect stream to one broker address.
type brokerSession struct {
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
	hbNow  signal
	first  chan struct{} // closed after the first heartbeat is written
}

func newBrokerSessions(b *base, name string, heartbeat func() *pb.ClientMessage,
	onMessage func(ctx context.Context, addr string, m *pb.BrokerMessage)) *brokerSessions {
	return &brokerSessions{b: b, name: name, heartbeat: heartbeat, onMessage: onMessage, m: make(map[string]*brokerSession)}
}

// sync opens a session to every address in want and closes the others,
// waiting for those to end.
func (s *brokerSessions) sync(want map[string]bool) {
	var stale []*brokerSession
	s.mu.Lock()
	for addr, bs := range s.m {
		if !want[addr] {
			stale = append(stale, bs)
			delete(s.m, addr)
		}
	}
	for addr := range want {
		s.openLocked(addr)
	}
	s.mu.Unlock()
	for _, bs := range stale {
		bs.cancel()
		<-bs.done
	}
}

// ensure opens a session to addr unless there is one.
func (s *brokerSessions) ensure(addr string) {
	s.mu.Lock()
	s.openLocked(addr)
	s.mu.Unlock()
}

// openLocked opens a session to addr unless there is one or the set is
// closed; mu is held. It only starts the session's goroutine.
func (s *brokerSessions) openLocked(addr string) {
	if s.m[addr] != nil || s.closed || s.b.ctx.Err() != nil {
		return
	}
	sctx, cancel := context.WithCancel(s.b.ctx)
	bs := &brokerSession{addr: addr, cancel: cancel, done: make(chan struct{}), hbNow: newSignal(), first: make(chan struct{})}
	s.m[addr] = bs
	if !s.b.goRun(func() { s.run(sctx, bs) }) {
		cancel()
		close(bs.done)
	}
}

// heartbeatNow makes every session send a heartbeat at once.
func (s *brokerSessions) heartbeatNow() {
	s.mu.Lock()
	for _, bs := range s.m {
		bs.hbNow.notify()
	}
	s.mu.Unlock()
}

// waitFirstHeartbeats waits until every session has written its first
// heartbeat, ctx ends or the RPC timeout passes.
func (s *brokerSessions) waitFirstHeartbeats(ctx context.Context) {
	s.mu.Lock()
	var firsts []chan struct{}
	for _, bs := range s.m {
		firsts = append(firsts, bs.first)
	}
	s.mu.Unlock()
	wctx, cancel := s.b.rpcContext(ctx)
	defer cancel()
	for _, f := range firsts {
		select {
		case <-f:
		case <-wctx.Done():
			return
		}
	}
}

// close closes every session and waits for them to end; no session opens
// after it.
func (s *brokerSessions) close() {
	s.mu.Lock()
	sessions := s.m
	s.m = make(map[string]*brokerSession)
	s.closed = true
	s.mu.Unlock()
	for _, bs := range sessions {
		bs.cancel()
	}
	for _, bs := range sessions {
		<-bs.done
	}
}

// run keeps the session's stream open until ctx ends.
func (s *brokerSessions) run(ctx context.Context, bs *brokerSession) {
	defer close(bs.done)
	backoff := 100 * time.Millisecond
	for {
		connected, err := s.connectOnce(ctx, bs)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 100 * time.Millisecond
		}
		if s.refused != nil && s.refused(err) {
			s.b.log.Error(s.name+" refused", zap.String("broker", bs.addr), zap.Error(err))
			backoff = 5 * time.Second
		}
		s.b.log.Debug(s.name+" ended", zap.String("broker", bs.addr), zap.Error(err))
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// connectOnce runs one Connect stream until it breaks. It reports whether
// the first heartbeat got through.
func (s *brokerSessions) connectOnce(ctx context.Context, bs *brokerSession) (bool, error) {
	cli, err := s.b.broker(bs.addr)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cli.Connect(sctx)
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", bs.addr, err)
	}
	if err := stream.Send(s.heartbeat()); err != nil {
		return false, fmt.Errorf("heartbeat to %s: %w", bs.addr, err)
	}
	select {
	case <-bs.first:
		if s.onReconnect != nil {
			s.onReconnect()
		}
	default: // the session's first stream; only this goroutine closes first
		close(bs.first)
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			s.onMessage(sctx, bs.addr, m)
		}
	}()
	defer func() {
		cancel()
		<-recvErr
	}()
	tick := time.NewTicker(s.b.opts.heartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-sctx.Done():
			return true, sctx.Err()
		case err := <-recvErr:
			recvErr <- err // for the deferred wait
			return true, fmt.Errorf("session with %s: %w", bs.addr, err)
		case <-tick.C:
		case <-bs.hbNow:
		}
		if err := stream.Send(s.heartbeat()); err != nil {
			return true, fmt.Errorf("heartbeat to %s: %w", bs.addr, err)
		}
	}
}
