package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/hotwire"
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

// newConnPool returns the pool of a client with options o: TLS when
// o.tls is set, every call signed when o has credentials (sign), refusals
// turned into coded errors, then o's own dial options.
func newConnPool(o options, sign *signer) *connPool {
	transport := insecure.NewCredentials()
	if o.tls != nil {
		transport = credentials.NewTLS(o.tls)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}
	if sign != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(sign))
	}
	opts = append(opts, refusalInterceptors()...)
	return &connPool{dialOpts: append(opts, o.dialOptions...), conns: make(map[string]*grpc.ClientConn)}
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

// framePool holds one frame-protocol client per address: of a broker for
// the data path (sends and pulls), of a NameServer for route lookups. An
// address that refused the frame handshake (an older server) is served
// over gRPC for the client's life; one that closed the connection on the
// magic (framePeers.closeRefuses) for closeRetry, then asked again.
type framePool struct {
	log   *zap.Logger
	opts  frame.Options // TLS and Auth of every connection
	peers framePeers
	// mu protects clients, refused and closed.
	mu      sync.Mutex
	clients map[string]*frame.Client
	// refused: addresses served over gRPC until the time (zero: for the
	// client's life); an entry past its time stays, so that the refusal
	// is logged once per address.
	refused map[string]time.Time
	closed  bool
	// anyRefused: some broker did not speak the frame protocol, so some
	// calls went over gRPC.
	anyRefused atomic.Bool
}

// framesOnly reports whether every call so far went over the frame
// transport: false for a client that uses gRPC, or once a broker has
// refused the frame protocol.
func (p *framePool) framesOnly() bool {
	return p != nil && !p.anyRefused.Load()
}

// framePeers describes the servers a frame pool calls.
type framePeers struct {
	// bufferSize of each connection's buffers (0: frame's default).
	bufferSize int
	// refusal is logged, once per address, when a server at it does not
	// speak the frame protocol.
	refusal string
	// closeRefuses: a server that closes the connection on the magic,
	// without an answer, does not speak the protocol either. A NameServer
	// older than its route lookups does so (its port closes a connection
	// no protocol claims), and so may one that is draining; an older
	// broker answers gRPC's settings.
	closeRefuses bool
}

var (
	brokerFrames = framePeers{refusal: "broker does not speak the frame protocol: sending and pulling over gRPC"}
	// Route lookups and routes are small.
	nameServerFrames = framePeers{bufferSize: 4 << 10, closeRefuses: true,
		refusal: "NameServer does not speak the frame protocol: asking for routes over gRPC"}
)

// newFramePool returns the frame pool of a client with options o (TLS,
// and an Auth request signed by sign when it has credentials) for peers:
// nil unless the client uses TransportFrame.
func newFramePool(o options, sign *signer, log *zap.Logger, peers framePeers) *framePool {
	if o.transport != TransportFrame {
		return nil
	}
	fo := frame.Options{TLS: o.tls, BufferSize: peers.bufferSize}
	if sign != nil {
		fo.Auth = sign.frameAuth
	}
	return &framePool{log: log, opts: fo, peers: peers, clients: make(map[string]*frame.Client),
		refused: make(map[string]time.Time)}
}

// client returns the frame client of addr, nil when addr is served over
// gRPC.
func (p *framePool) client(addr string) (*frame.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if until, ok := p.refused[addr]; ok && (until.IsZero() || time.Now().Before(until)) {
		return nil, nil
	}
	fc := p.clients[addr]
	if fc == nil {
		fc = frame.NewClient(addr, p.opts)
		p.clients[addr] = fc
	}
	return fc, nil
}

// call makes one call to addr over the frame transport, within ctx and
// timeout (none when 0; a call past it fails with
// context.DeadlineExceeded); a nil resp makes it oneway. It reports false,
// having done nothing, when the call must go over gRPC instead: the client
// uses gRPC, or the server at addr does not speak the frame protocol.
func (p *framePool) call(ctx context.Context, timeout time.Duration, addr string, m frame.Method, req, resp proto.Message) (bool, error) {
	if p == nil {
		return false, nil
	}
	fc, err := p.client(addr)
	if fc == nil {
		return err != nil, err
	}
	if resp == nil {
		err = fc.Oneway(ctx, m, req)
	} else {
		err = fc.CallWithin(ctx, timeout, m, req, resp)
	}
	if err == nil {
		return true, nil
	}
	refusal := frameRefusal(addr, err)
	switch {
	case errors.Is(err, frame.ErrNotSupported) || p.closedOnMagic(err):
		var until time.Time
		if !errors.Is(err, frame.ErrNotSupported) {
			until = time.Now().Add(closeRetry)
		}
		p.mu.Lock()
		_, again := p.refused[addr]
		p.refused[addr] = until
		p.anyRefused.Store(true)
		p.mu.Unlock()
		if !again {
			p.log.Info(p.peers.refusal, zap.String("addr", addr))
		}
		return false, nil
	case errors.Is(err, frame.ErrClosed):
		return true, ErrClosed
	case refusal != nil:
		return true, refusal
	}
	if ce, ok := errors.AsType[*frame.ConnError](err); ok {
		return true, &frameConnError{err: ce}
	}
	return true, err
}

// closeRetry is how long a pool whose peers closeRefuses serves an address that
// closed the connection on the magic over gRPC before it tries frames again.
const closeRetry = time.Minute

// closedOnMagic reports a handshake the server ended by closing the
// connection, when that means it does not speak the protocol
// (closeRefuses).
func (p *framePool) closedOnMagic(err error) bool {
	var ce *frame.ConnError
	return p.peers.closeRefuses && errors.As(err, &ce) && ce.Op == "handshake" &&
		(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

func (p *framePool) close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.closed = true
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	var errs []error
	for addr, fc := range clients {
		if err := fc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close frame connection to %s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// frameConnError is a frame connection that could not be made or broke.
// It reports gRPC's Unavailable, so that retries and failover (isTransport)
// treat it exactly as a gRPC connection that could not be made or broke.
type frameConnError struct{ err error }

func (e *frameConnError) Error() string { return e.err.Error() }

func (e *frameConnError) Unwrap() error { return e.err }

func (e *frameConnError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.err.Error())
}

// brokerClient is the client of one broker address: gRPC for every call,
// and the frame transport for sends when the client uses it (sendFrame).
type brokerClient struct {
	pb.BrokerClient
	addr   string
	frames *framePool
}

// sendFrame sends req over the frame transport, within ctx and timeout
// (as framePool.call); oneway returns once it is written. It reports
// false, having done nothing, when the send must go over gRPC. The
// messages go packed (SendRequest.packed) unless packs says that the
// broker at this address is too old to read them.
func (c *brokerClient) sendFrame(ctx context.Context, timeout time.Duration, req *pb.SendRequest, oneway bool, packs *packSupport) (*pb.SendResponse, bool, error) {
	if oneway {
		// A oneway send has no answer to tell that a broker did not read
		// it: packed only once the broker answered packed sends.
		ok, err := c.frames.call(ctx, timeout, c.addr, frame.MethodSend, &sendRequest{SendRequest: req, pack: packs.known()}, nil)
		return nil, ok, err
	}
	r := &sendRequest{SendRequest: req, pack: packs.maybe()}
	resp := getSendResponse()
	ok, err := c.frames.call(ctx, timeout, c.addr, frame.MethodSend, r, sendResponse{resp})
	if err != nil || !r.packed {
		return resp, ok, err
	}
	if !packs.answered(resp) {
		// A broker older than packed sends found no message in the
		// request and stored nothing: send the messages as they are.
		r.pack, r.packed = false, false
		resp = new(pb.SendResponse)
		ok, err = c.frames.call(ctx, timeout, c.addr, frame.MethodSend, r, sendResponse{resp})
	}
	if err != nil {
		return nil, ok, err
	}
	return resp, ok, nil
}

// packSupport is what a sender knows of one broker's reading of packed
// sends.
type packSupport struct{ state atomic.Int32 } // 0 unknown, 1 reads them, 2 does not

// maybe reports whether to pack a send that is answered.
func (s *packSupport) maybe() bool { return s.state.Load() != 2 }

// known reports whether the broker is known to read packed sends.
func (s *packSupport) known() bool { return s.state.Load() == 1 }

// answered learns from the answer to a packed send, and reports whether
// the broker read it: a broker that predates packed sends finds no message
// in the request (INVALID_PARAMETER, "holds no message"); any other answer
// is the broker's to a send it read.
func (s *packSupport) answered(resp *pb.SendResponse) bool {
	st := resp.GetStatus()
	if st.GetCode() == pb.Code_INVALID_PARAMETER && strings.Contains(st.GetMessage(), "holds no message") {
		s.state.Store(2)
		return false
	}
	s.state.CompareAndSwap(0, 1)
	return true
}

// sendRequest and sendResponse carry a send over the frame protocol with
// internal/hotwire's codec, which spares protobuf's reflection on every
// message of a batch (frame.Appender, frame.Unmarshaler). A request to
// pack goes packed when its messages can be (packed says it went so).
type sendRequest struct {
	*pb.SendRequest
	pack, packed bool
}

func (r *sendRequest) AppendProto(dst []byte) []byte {
	if r.pack {
		if b, ok := hotwire.AppendPackedSendRequest(dst, r.SendRequest); ok {
			r.packed = true
			return b
		}
	}
	r.packed = false
	return hotwire.AppendSendRequest(dst, r.SendRequest)
}

type sendResponse struct{ *pb.SendResponse }

func (r sendResponse) UnmarshalProto(b []byte) error {
	return hotwire.DecodeSendResponse(b, r.SendResponse)
}

// sendResponses keeps the answers of finished sends (putSendResponse):
// decoding into one reuses its results and status (hotwire.DecodeSendResponse).
var sendResponses = sync.Pool{New: func() any { return new(pb.SendResponse) }}

func getSendResponse() *pb.SendResponse { return sendResponses.Get().(*pb.SendResponse) }

// putSendResponse gives back the answer of a send once nothing reads it
// any more (the strings read from it stay valid: they are not reused).
func putSendResponse(resp *pb.SendResponse) {
	if resp != nil {
		sendResponses.Put(resp)
	}
}

// pullResponse decodes a pull's answer with internal/hotwire's codec: its
// records are slices of the frame, which the frame client reads into a
// buffer of its own for each answer, so they are not copied again.
type pullResponse struct{ *pb.PullResponse }

func (r pullResponse) UnmarshalProto(b []byte) error {
	return hotwire.DecodePullResponse(b, r.PullResponse)
}

// base is what every client has: options, an id, connections, NameServers,
// the route cache and a set of owned goroutines.
type base struct {
	opts     options
	log      *zap.Logger
	clientID string
	pool     *connPool
	frames   *framePool // nil: the data path uses gRPC
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
	var sign *signer
	if !opts.credentials.Empty() {
		sign = newSigner(opts.credentials)
	}
	b.pool = newConnPool(opts, sign)
	b.frames = newFramePool(opts, sign, b.log, brokerFrames)
	b.ns = &nameServers{addrs: opts.nameServers, pool: b.pool, timeout: opts.rpcTimeout,
		frames: newFramePool(opts, sign, b.log, nameServerFrames)}
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
		err = errors.Join(b.pool.close(), b.frames.close(), b.ns.frames.close())
		releaseClientID(b.clientID)
	})
	return err
}

// broker returns a client for the broker at addr.
func (b *base) broker(addr string) (*brokerClient, error) {
	c, err := b.pool.broker(addr)
	if err != nil {
		return nil, err
	}
	return &brokerClient{BrokerClient: c, addr: addr, frames: b.frames}, nil
}

// pullFrom pulls from the broker at addr within ctx and timeout: over the
// frame transport when the client uses it and the broker speaks it, else
// with cli (gRPC).
func (b *base) pullFrom(ctx context.Context, timeout time.Duration, addr string, cli pb.BrokerClient, req *pb.PullRequest) (*pb.PullResponse, error) {
	resp := new(pb.PullResponse)
	if ok, err := b.frames.call(ctx, timeout, addr, frame.MethodPull, req, pullResponse{resp}); ok {
		return resp, err
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	return cli.Pull(ctx, req)
}

// rpcContext bounds a metadata call by the RPC timeout when ctx has no
// earlier deadline.
func (b *base) rpcContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, b.opts.rpcTimeout)
}

// withTimeout bounds ctx by d from now (not at all when d <= 0), unless
// ctx ends earlier.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
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

// ctxEnded is ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed though its timer has not fired yet. On a busy machine the
// timer can be late, and gRPC refuses a call whose deadline has passed
// with its own DeadlineExceeded status: without this, such a refusal would
// read as a broker that did not answer.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
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
