package ha

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// ReplicaLog is the slave's CommitLog as the Client writes it.
type ReplicaLog interface {
	// MaxOffset is where the next replicated byte goes.
	MaxOffset() int64
	// LastRecord describes the newest record; ok is false when there is
	// none.
	LastRecord() (ref RecordRef, ok bool, err error)
	// SegmentSize is the size of every segment file (must be the master's).
	SegmentSize() int64
	// StartAt makes the empty log start at off (a segment start).
	StartAt(off int64) error
	// AppendRaw verifies and appends the master's bytes at off (which must
	// be MaxOffset) without waiting for a flush, and returns the new
	// MaxOffset.
	AppendRaw(off int64, data []byte) (int64, error)
	// WaitDurable returns once the log is as durable up to end as its
	// flush mode promises for an acknowledged append.
	WaitDurable(ctx context.Context, end int64) error
	// DurableOnAppend reports whether bytes are as durable as an ack
	// promises once AppendRaw returns (an async-flush log: in the file),
	// so that WaitDurable need not be called.
	DurableOnAppend() bool
	// LastStoreTimestamp is the store time of the newest record.
	LastStoreTimestamp() int64
}

// ClientOptions configure the slave side.
type ClientOptions struct {
	BrokerName string
	BrokerID   int64
	// MasterAddr returns the master's HA address ("" while unknown). It is
	// asked before every connection and every heartbeat: when it changes,
	// the client moves to the new address.
	MasterAddr func() string
	// HeartbeatInterval is how often the slave acks while idle (1 s);
	// Timeout drops a master silent for this long (5 s).
	HeartbeatInterval time.Duration
	Timeout           time.Duration
	// MinBackoff and MaxBackoff bound the wait between connection attempts
	// (100 ms, 5 s); the wait doubles while attempts fail.
	MinBackoff, MaxBackoff time.Duration
	// MaxFrameBytes bounds an accepted DATA frame (MaxDataLen).
	MaxFrameBytes int
	// OnWelcome is called after every accepted handshake, before the first
	// byte is appended; Welcome.Epochs holds the master's epoch entries
	// (version 2).
	OnWelcome func(Welcome)
	// Epochs returns the slave's epoch entries, oldest first. Set, the
	// client speaks protocol version 2: its HELLO carries the entries and
	// a master may answer TRUNCATE. nil: version 1 (no entries; a master
	// refuses a log that is not a prefix of its own).
	Epochs func() []EpochEntry
	// MinEpoch returns the lowest master epoch the slave accepts (the one
	// it was told to follow): a WELCOME or TRUNCATE of a lower epoch is
	// refused, and the client retries with backoff. nil: any epoch.
	MinEpoch func() int64
	// OnTruncate cuts the slave's log at fork (crash-safely, and its epoch
	// entries after fork) for the master of epoch; the client then
	// connects again at once. It is called with no connection open and
	// nothing being appended. nil: a TRUNCATE stops replication as a
	// divergence does. An error is retried with backoff.
	OnTruncate func(fork, epoch int64) error
	// TLS, when set, makes the client dial the master over TLS with this
	// configuration (its ServerName defaults to the master's host).
	TLS *tls.Config
	// Credentials, when set, returns the two values of the AUTH frame
	// sent before every HELLO (the signed-date header, signed afresh for
	// each connection); nil, or an empty authorization: no AUTH frame, as
	// a slave of a master that checks none.
	Credentials func() (authorization, date string)
}

// DefaultClientOptions returns the defaults.
func DefaultClientOptions() ClientOptions {
	return ClientOptions{
		HeartbeatInterval: time.Second,
		Timeout:           5 * time.Second,
		MinBackoff:        100 * time.Millisecond,
		MaxBackoff:        5 * time.Second,
		MaxFrameBytes:     MaxDataLen,
	}
}

func (o *ClientOptions) validate() error {
	switch {
	case o.BrokerName == "":
		return errors.New("ha: BrokerName is empty")
	case o.MasterAddr == nil:
		return errors.New("ha: MasterAddr is nil")
	case o.HeartbeatInterval <= 0 || o.Timeout <= o.HeartbeatInterval:
		return fmt.Errorf("ha: HeartbeatInterval (%v) must be positive and below Timeout (%v)", o.HeartbeatInterval, o.Timeout)
	case o.MinBackoff <= 0 || o.MaxBackoff < o.MinBackoff:
		return fmt.Errorf("ha: backoff bounds %v..%v", o.MinBackoff, o.MaxBackoff)
	}
	return nil
}

// Client states.
const (
	// StateIdle: no master address is known yet.
	StateIdle = "IDLE"
	// StateConnecting: between attempts or in a handshake.
	StateConnecting = "CONNECTING"
	// StateReplicating: streaming from the master.
	StateReplicating = "REPLICATING"
	// StateDiverged: the master refused the slave's log as not a prefix of
	// its own. Replication stopped; nothing was truncated.
	StateDiverged = "DIVERGED"
	// StateStopped: refused for good for another reason (too old for the
	// master's retention, a misconfiguration), or the log failed.
	StateStopped = "STOPPED"
	// StateTruncating: OnTruncate is cutting the log at the master's fork
	// point.
	StateTruncating = "TRUNCATING"
	// StateClosed: Close was called.
	StateClosed = "CLOSED"
)

// ClientStatus is what the slave knows of its replication.
type ClientStatus struct {
	State        string
	MasterHAAddr string
	// MasterAddr is the master's client address from the last welcome.
	MasterAddr string
	Epoch      int64
	// Applied is the offset up to which the slave holds the master's
	// bytes; MasterOffset the master's committed offset as last heard.
	Applied      int64
	MasterOffset int64
	LagBytes     int64
	LastError    string
	// Since is when State was entered.
	Since time.Time
}

// Client is the slave side: it keeps a connection to the master, appends
// what the master ships and acknowledges it.
type Client struct {
	opts ClientOptions
	rl   ReplicaLog
	log  *zap.Logger

	mu     sync.Mutex
	status ClientStatus

	applied      atomic.Int64
	masterOffset atomic.Int64
	// kick interrupts a session or a wait (Reconnect); resetBackoff tells
	// the loop the kick came from Reconnect.
	kick         chan struct{}
	resetBackoff atomic.Bool

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
}

// NewClient validates the options; Start connects.
func NewClient(opts ClientOptions, rl ReplicaLog, log *zap.Logger) (*Client, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.MaxFrameBytes <= 0 || opts.MaxFrameBytes > MaxDataLen {
		opts.MaxFrameBytes = MaxDataLen
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &Client{opts: opts, rl: rl, log: log, kick: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.status = ClientStatus{State: StateIdle, Since: time.Now()}
	c.applied.Store(rl.MaxOffset())
	return c, nil
}

// Start replicates in the background.
func (c *Client) Start() {
	c.startOnce.Do(func() {
		c.wg.Add(1)
		go c.run()
	})
}

// Close stops replicating and waits until nothing is being appended. It is
// idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.setState(StateClosed, "", nil)
	})
	return nil
}

// Reconnect drops the current connection (if any) and connects again at
// once, for example because the master's address changed: it cuts a
// backoff wait short and resets the backoff to MinBackoff. A client that
// stopped after a refusal (StateDiverged, StateStopped) tries again too.
func (c *Client) Reconnect() {
	c.resetBackoff.Store(true)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Status reports the replication state.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	st := c.status
	c.mu.Unlock()
	st.Applied = c.applied.Load()
	st.MasterOffset = max(c.masterOffset.Load(), st.Applied)
	st.LagBytes = st.MasterOffset - st.Applied
	return st
}

func (c *Client) setState(state, addr string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State == StateClosed {
		return
	}
	if c.status.State != state {
		c.status.Since = time.Now()
	}
	c.status.State = state
	if addr != "" {
		c.status.MasterHAAddr = addr
	}
	if err != nil {
		c.status.LastError = err.Error()
	}
}

var errMasterMoved = errors.New("ha: the master's address changed")

// errTruncated ends a session after the slave truncated its log as the
// master said; the client connects again at once.
var errTruncated = errors.New("ha: the log was truncated at the master's fork point")

// errEpoch reports a master whose epoch is below the slave's MinEpoch.
type errEpoch struct{ epoch, min int64 }

func (e errEpoch) Error() string { return fmt.Sprintf("master epoch %d below %d", e.epoch, e.min) }

// backoff is the wait between failed connection attempts.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) reset() { b.cur = b.min }

// next returns the wait after an attempt: min after an attempt that made
// progress (or after reset), then doubling up to max while attempts fail.
func (b *backoff) next(progressed bool) time.Duration {
	if progressed || b.cur < b.min {
		b.cur = b.min
	}
	w := b.cur
	if !progressed {
		b.cur = min(b.cur*2, b.max)
	}
	return w
}

func (c *Client) run() {
	defer c.wg.Done()
	bo := backoff{min: c.opts.MinBackoff, max: c.opts.MaxBackoff}
	bo.reset()
	var lastErr string
	for c.ctx.Err() == nil {
		if c.resetBackoff.Swap(false) {
			bo.reset()
		}
		addr := c.opts.MasterAddr()
		if addr == "" {
			c.setState(StateIdle, "", nil)
			if !c.sleep(c.opts.MinBackoff) {
				return
			}
			continue
		}
		c.setState(StateConnecting, addr, nil)
		progressed, err := c.session(addr)
		if c.ctx.Err() != nil {
			return
		}
		var rf Refuse
		if errors.As(err, &rf) && rf.Code.Fatal() {
			state := StateStopped
			if rf.Code == RefuseDiverged {
				state = StateDiverged
			}
			c.setState(state, addr, err)
			c.log.Error("REPLICATION STOPPED: the master refused this slave's log; it was left as it is and needs an operator",
				zap.String("master", addr), zap.Stringer("code", rf.Code), zap.String("reason", rf.Reason),
				zap.Int64("slaveMaxOffset", c.rl.MaxOffset()))
			// Wait for Reconnect (a new master) or Close.
			if !c.sleep(-1) {
				return
			}
			bo.reset()
			continue
		}
		if errors.Is(err, errTruncated) {
			bo.reset()
			lastErr = ""
			continue
		}
		c.setState(StateConnecting, addr, err)
		if err != nil && (err.Error() != lastErr || progressed) {
			lvl := c.log.Warn
			var ee errEpoch
			if errors.As(err, &ee) || (errors.As(err, &rf) && rf.Code == RefuseUnauthenticated) {
				lvl = c.log.Error
			}
			lvl("replication connection ended; reconnecting", zap.String("master", addr), zap.Error(err))
		}
		if err != nil {
			lastErr = err.Error()
		}
		wait := bo.next(progressed)
		if transient(err) {
			wait = min(wait, max(c.opts.MinBackoff, transientBackoff))
		}
		if errors.Is(err, errMasterMoved) {
			continue
		}
		if !c.sleep(wait) {
			return
		}
	}
}

// transientBackoff caps the wait after a refusal that a failover clears
// within a second or so: a broker that is not master yet (it is taking
// over) or a master whose epoch is below the one the slave was told.
const transientBackoff = 500 * time.Millisecond

func transient(err error) bool {
	var rf Refuse
	var ee errEpoch
	return (errors.As(err, &rf) && rf.Code == RefuseNotMaster) || errors.As(err, &ee)
}

// sleep waits d (forever when d < 0) or until Reconnect; false when the
// client closes.
func (c *Client) sleep(d time.Duration) bool {
	var tc <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-c.ctx.Done():
		return false
	case <-c.kick:
		return true
	case <-tc:
		return true
	}
}

// session runs one connection: handshake, then stream until an error. It
// reports whether it applied anything.
func (c *Client) session(addr string) (progressed bool, err error) {
	conn, err := c.dial(addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	// Handshake.
	_ = conn.SetDeadline(time.Now().Add(c.opts.Timeout))
	var hb []byte
	if c.opts.Credentials != nil {
		if authz, date := c.opts.Credentials(); authz != "" {
			if hb, err = AppendAuth(nil, Auth{Authorization: authz, Date: date}); err != nil {
				return false, err
			}
		}
	}
	maxOff := c.rl.MaxOffset()
	h := Hello{Version: Version1, BrokerName: c.opts.BrokerName, BrokerID: c.opts.BrokerID, MaxOffset: maxOff, LastStart: -1}
	last, ok, err := c.rl.LastRecord()
	if err != nil {
		return false, fmt.Errorf("read the last record: %w", err)
	}
	if ok {
		h.LastStart, h.LastSize, h.LastChecksum = last.Offset, last.Size, last.Checksum
	}
	if c.opts.Epochs != nil {
		h.Version = Version2
		h.Epochs = c.opts.Epochs()
		if n := len(h.Epochs); n > MaxEpochEntries {
			h.Epochs = h.Epochs[n-MaxEpochEntries:]
		}
	}
	hb, err = AppendHello(hb, h)
	if err != nil {
		return false, err
	}
	if _, err := conn.Write(hb); err != nil {
		return false, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	f, err := ReadFrame(br, 1, nil)
	if err != nil {
		if c.opts.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return false, fmt.Errorf("handshake: %w (the master closed a plaintext connection: does its HA port accept TLS only? then dial with TLS)", err)
		}
		return false, fmt.Errorf("handshake: %w", err)
	}
	switch f.Kind {
	case KindRefuse:
		return false, f.Refuse
	case KindTruncate:
		if h.Version < Version2 {
			return false, fmt.Errorf("%w: TRUNCATE to a version %d slave", ErrFrame, h.Version)
		}
		_ = conn.Close()
		return false, c.truncate(addr, f.Truncate, h)
	case KindWelcome:
	default:
		return false, fmt.Errorf("%w: expected WELCOME, got %s", ErrFrame, f.Kind)
	}
	w := f.Welcome
	if w.Version != h.Version {
		return false, Refuse{Code: RefuseMismatch, Reason: fmt.Sprintf("master answered protocol version %d to a HELLO of version %d", w.Version, h.Version)}
	}
	if err := c.checkEpoch(w.Epoch); err != nil {
		return false, err
	}
	if w.SegmentSize != c.rl.SegmentSize() {
		return false, Refuse{Code: RefuseMismatch, Reason: fmt.Sprintf("master's segment size is %d, this slave's %d: the logs cannot be byte-identical", w.SegmentSize, c.rl.SegmentSize())}
	}
	if w.Start != maxOff {
		if maxOff != 0 || ok || w.Start%w.SegmentSize != 0 {
			return false, fmt.Errorf("%w: master starts the stream at %d, the slave's log ends at %d", ErrFrame, w.Start, maxOff)
		}
		if err := c.rl.StartAt(w.Start); err != nil {
			return false, Refuse{Code: RefuseMismatch, Reason: fmt.Sprintf("cannot start the empty log at the master's minimum offset %d: %v", w.Start, err)}
		}
		c.log.Info("empty slave log starts at the master's minimum offset", zap.Int64("start", w.Start))
	}
	_ = conn.SetDeadline(time.Time{})
	c.applied.Store(w.Start)
	c.masterOffset.Store(w.MaxOffset)
	c.mu.Lock()
	c.status.MasterAddr, c.status.Epoch = w.MasterAddr, w.Epoch
	c.mu.Unlock()
	if c.opts.OnWelcome != nil {
		c.opts.OnWelcome(w)
	}
	c.setState(StateReplicating, addr, nil)
	c.log.Info("replicating from master", zap.String("master", addr), zap.Int64("from", w.Start),
		zap.Int64("masterCommitted", w.MaxOffset), zap.Int64("epoch", w.Epoch))

	sctx, scancel := context.WithCancel(c.ctx)
	var wmu sync.Mutex
	var ackBuf [beatLen]byte
	sendAck := func() error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(c.opts.Timeout))
		_, err := conn.Write(AppendAck(ackBuf[:0], c.applied.Load(), c.rl.LastStoreTimestamp()))
		return err
	}
	if err := sendAck(); err != nil {
		scancel()
		return false, err
	}
	st := &stream{c: c, conn: conn, br: br, sendAck: sendAck, appended: make(chan struct{}, 1)}
	st.end.Store(w.Start)
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errc <- st.read(sctx) }()
	if !c.rl.DurableOnAppend() {
		wg.Add(1)
		go func() { defer wg.Done(); errc <- st.ackDurable(sctx) }()
	}
	tick := time.NewTicker(c.opts.HeartbeatInterval)
	defer tick.Stop()
	for err == nil {
		select {
		case err = <-errc:
		case <-c.ctx.Done():
			err = ErrClosed
		case <-c.kick:
			err = errMasterMoved
		case <-tick.C:
			if now := c.opts.MasterAddr(); now != addr {
				err = fmt.Errorf("%w: %s → %s", errMasterMoved, addr, now)
				break
			}
			err = sendAck()
		}
	}
	scancel()
	_ = conn.Close()
	wg.Wait()
	return st.progressed.Load(), err
}

// dial connects to the master, over TLS when ClientOptions.TLS is set (the
// handshake is bounded by Timeout).
func (c *Client) dial(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: c.opts.Timeout}
	conn, err := d.DialContext(c.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if c.opts.TLS == nil {
		return conn, nil
	}
	cfg := c.opts.TLS
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("TLS handshake with the master: %w", err)
	}
	return tc, nil
}

// checkEpoch refuses a master whose epoch is below MinEpoch.
func (c *Client) checkEpoch(epoch int64) error {
	if c.opts.MinEpoch == nil {
		return nil
	}
	if m := c.opts.MinEpoch(); epoch < m {
		return errEpoch{epoch: epoch, min: m}
	}
	return nil
}

// truncate carries out a master's TRUNCATE: the master's epoch must be at
// least MinEpoch and above the slave's newest epoch entry, and the fork
// below the slave's end. It returns errTruncated once OnTruncate cut the
// log, so that the client connects again at once.
func (c *Client) truncate(addr string, t Truncate, h Hello) error {
	if err := c.checkEpoch(t.Epoch); err != nil {
		return err
	}
	if n := len(h.Epochs); n > 0 && t.Epoch <= h.Epochs[n-1].Epoch {
		return fmt.Errorf("master of epoch %d told this slave to truncate at %d, but the slave's newest epoch entry is %d: only a newer master may cut its log",
			t.Epoch, t.Fork, h.Epochs[n-1].Epoch)
	}
	if t.Fork >= h.MaxOffset {
		return fmt.Errorf("%w: TRUNCATE at %d, the slave's log ends at %d", ErrFrame, t.Fork, h.MaxOffset)
	}
	if c.opts.OnTruncate == nil {
		return Refuse{Code: RefuseDiverged, Reason: fmt.Sprintf(
			"the master of epoch %d says this slave's log forks from its own at %d, below the slave's end %d, and this slave does not truncate",
			t.Epoch, t.Fork, h.MaxOffset)}
	}
	c.setState(StateTruncating, addr, nil)
	c.log.Warn("truncating the log at the master's fork point", zap.String("master", addr),
		zap.Int64("fork", t.Fork), zap.Int64("epoch", t.Epoch), zap.Int64("slaveMaxOffset", h.MaxOffset),
		zap.Int64("dropBytes", h.MaxOffset-t.Fork))
	if err := c.opts.OnTruncate(t.Fork, t.Epoch); err != nil {
		return fmt.Errorf("truncate the log at %d for the master of epoch %d: %w", t.Fork, t.Epoch, err)
	}
	end := c.rl.MaxOffset()
	c.applied.Store(end)
	if end > t.Fork {
		return fmt.Errorf("the log ends at %d after truncating at %d", end, t.Fork)
	}
	c.log.Info("log truncated at the master's fork point", zap.Int64("fork", t.Fork), zap.Int64("epoch", t.Epoch))
	return errTruncated
}

// stream is one session's replication stream on the slave.
type stream struct {
	c       *Client
	conn    net.Conn
	br      *bufio.Reader
	sendAck func() error
	// end is the slave log's end after the last append; appended signals
	// the acker when it moves (sync flush).
	end        atomic.Int64
	appended   chan struct{}
	progressed atomic.Bool
}

// read decodes the master's frames and appends DATA as it arrives. When the
// slave's log makes appended bytes as durable as an ack promises (async
// flush), it acks itself once no further frame is already buffered;
// otherwise ackDurable waits for the flush and acks, while reading goes on.
func (st *stream) read(ctx context.Context) error {
	c := st.c
	durable := c.rl.DurableOnAppend()
	buf := make([]byte, 0, 256<<10)
	pending := false
	for {
		_ = st.conn.SetReadDeadline(time.Now().Add(c.opts.Timeout))
		f, err := ReadFrame(st.br, c.opts.MaxFrameBytes, buf[:0])
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		switch f.Kind {
		case KindData:
			if cap(f.Data) <= 4<<20 {
				buf = f.Data[:0] // keep a buffer grown for a large record, within reason
			}
			c.masterOffset.Store(max(c.masterOffset.Load(), f.Offset+int64(len(f.Data))))
			end := st.end.Load()
			if f.Offset != end {
				return fmt.Errorf("%w: DATA at %d, the slave's log ends at %d", ErrFrame, f.Offset, end)
			}
			next, err := c.rl.AppendRaw(f.Offset, f.Data)
			if next > end {
				st.progressed.Store(true)
				st.end.Store(next)
			}
			if err != nil {
				return fmt.Errorf("append the master's bytes at %d: %w", end, err)
			}
			if !durable {
				select {
				case st.appended <- struct{}{}:
				default:
				}
				continue
			}
			c.applied.Store(next)
			pending = true
		case KindBeat:
			c.masterOffset.Store(max(c.masterOffset.Load(), f.Offset))
		case KindRefuse:
			return f.Refuse
		default:
			return fmt.Errorf("%w: unexpected %s from the master", ErrFrame, f.Kind)
		}
		// More frames already here: ack once after them.
		if pending && st.br.Buffered() == 0 {
			pending = false
			if err := st.sendAck(); err != nil {
				return err
			}
		}
	}
}

// ackDurable waits for the slave's flush of what was appended and acks
// it, once per flush however many frames it covers.
func (st *stream) ackDurable(ctx context.Context) error {
	c := st.c
	for {
		select {
		case <-st.appended:
		case <-ctx.Done():
			return ctx.Err()
		}
		end := st.end.Load()
		if err := c.rl.WaitDurable(ctx, end); err != nil {
			return err
		}
		c.applied.Store(end)
		if err := st.sendAck(); err != nil {
			return err
		}
	}
}
