package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// maxMsgSize bounds one gRPC message in either direction: a 4 MiB body plus
// properties, or a pull of many records, must fit.
const maxMsgSize = 128 << 20

// connPool holds one gRPC connection per address, shared by every call the
// client makes to that address.
type connPool struct {
	dialOpts []grpc.DialOption
	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	closed   bool
}

func newConnPool(extra []grpc.DialOption) *connPool {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}
	return &connPool{dialOpts: append(opts, extra...), conns: make(map[string]*grpc.ClientConn)}
}

// get returns the connection to addr, creating it on first use (grpc
// connects lazily, so this never blocks).
func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc := p.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *connPool) broker(addr string) (pb.BrokerClient, error) {
	cc, err := p.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewBrokerClient(cc), nil
}

func (p *connPool) nameServer(addr string) (pb.NameServerClient, error) {
	cc, err := p.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewNameServerClient(cc), nil
}

func (p *connPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for addr, cc := range p.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to %s: %w", addr, err))
		}
	}
	p.conns = nil
	return errors.Join(errs...)
}

// base is what every client has: options, an id, connections, NameServers,
// the route cache and a set of owned goroutines.
type base struct {
	opts     options
	log      *zap.Logger
	clientID string
	pool     *connPool
	ns       *nameServers
	routes   *routeCache

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// runMu orders goRun's wg.Add before close's wg.Wait.
	runMu   sync.Mutex
	closing bool

	closeOnce sync.Once
}

func newBase(opts options, instance string) *base {
	b := &base{opts: opts, log: opts.log, clientID: reserveClientID(instance)}
	b.log = b.log.With(zap.String("client_id", b.clientID))
	b.pool = newConnPool(opts.dialOptions)
	b.ns = &nameServers{addrs: opts.nameServers, pool: b.pool, timeout: opts.rpcTimeout}
	b.routes = newRouteCache(b.ns, b.log)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// goRun runs fn on a goroutine that close waits for. Once close has begun
// it runs nothing and returns false.
func (b *base) goRun(fn func()) bool {
	b.runMu.Lock()
	defer b.runMu.Unlock()
	if b.closing {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
	return true
}

// startRouteRefresher refreshes every cached route periodically.
func (b *base) startRouteRefresher() {
	b.goRun(func() {
		t := time.NewTicker(b.opts.routeRefresh)
		defer t.Stop()
		for {
			select {
			case <-b.ctx.Done():
				return
			case <-t.C:
				b.routes.refreshAll(b.ctx)
			}
		}
	})
}

// close cancels every goroutine of the client, waits for them and closes
// the connections.
func (b *base) close() error {
	var err error
	b.closeOnce.Do(func() {
		b.runMu.Lock()
		b.closing = true
		b.runMu.Unlock()
		b.cancel()
		b.wg.Wait()
		err = b.pool.close()
		releaseClientID(b.clientID)
	})
	return err
}

// broker returns a client for the broker at addr.
func (b *base) broker(addr string) (pb.BrokerClient, error) { return b.pool.broker(addr) }

// rpcContext bounds a metadata call by the RPC timeout when ctx has no
// earlier deadline.
func (b *base) rpcContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, b.opts.rpcTimeout)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// mergeContext returns a context done when either ctx or the client's
// lifetime context is done.
func (b *base) mergeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	mctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	return mctx, func() {
		stop()
		cancel()
	}
}

// sleepCtx waits d or until ctx is done; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// signal is a non-blocking wake-up: Notify never blocks and never loses a
// wake-up that nobody has consumed yet.
type signal chan struct{}

func newSignal() signal { return make(signal, 1) }

func (s signal) notify() {
	select {
	case s <- struct{}{}:
	default:
	}
}
