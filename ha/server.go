package ha

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// RecordRef describes what starts at an offset of a log: a record (its size,
// the checksum stored in its trailer, its store timestamp) or an
// end-of-segment blank.
type RecordRef struct {
	Offset         int64
	Blank          bool
	Size           int32
	Checksum       uint32
	StoreTimestamp int64
}

// Source is the master's CommitLog as the Server reads it.
type Source interface {
	// MinOffset is the first offset still in the log.
	MinOffset() int64
	// CommittedOffset is the end of the bytes in the log's files: what
	// may be shipped (it may be ahead of the durable end).
	CommittedOffset() int64
	// CommittedChanged returns a channel closed when CommittedOffset next
	// advances.
	CommittedChanged() <-chan struct{}
	// ReadChunk appends whole committed records starting at off to dst, up
	// to max bytes (at least one record), or a blank's 8-byte header; next
	// is the offset after them (off when nothing is committed there yet).
	ReadChunk(off int64, max int, dst []byte) (chunk []byte, next int64, err error)
	// RecordAt describes the record or blank at a committed offset.
	RecordAt(off int64) (RecordRef, error)
	// SegmentSize is the size of every segment file.
	SegmentSize() int64
	// LastStoreTimestamp is the store time of the newest record (0: none).
	LastStoreTimestamp() int64
}

// ServerOptions configure the master side.
type ServerOptions struct {
	// ListenAddr is the HA address (":0" picks a free port).
	ListenAddr string
	// BrokerName is the group's name: slaves of other groups are refused.
	BrokerName string
	// MasterAddr is the broker's client (gRPC) address, told to slaves
	// for metadata sync.
	MasterAddr string
	// HeartbeatInterval is how often an idle master sends BEAT (1 s).
	HeartbeatInterval time.Duration
	// Timeout drops a connection silent for this long (5 s); it also
	// bounds every write and the handshake.
	Timeout time.Duration
	// MaxFrameBytes bounds a DATA frame (256 KiB; one larger record
	// travels alone).
	MaxFrameBytes int
	// MaxLagBytes: a slave further behind leaves the in-sync set (256 MiB).
	MaxLagBytes int64
	// Epoch returns the master's epoch, told to slaves (nil: 0).
	Epoch func() int64
	// Epochs returns the master's epoch entries, oldest first. With it a
	// version 2 slave whose log is not a prefix of the master's is told to
	// TRUNCATE at the fork point of the two histories, and every version 2
	// WELCOME carries the entries. nil: no entries, no TRUNCATE (version 1
	// behaviour for every slave).
	Epochs func() []EpochEntry
	// Serving returns why this broker does not serve slaves right now
	// (it is not a master), or nil (nil func: always serves).
	Serving func() error
	// WrapListener, when set, wraps the bound listener, for TLS (the
	// broker's tlsconf.Listen: the TLS mode applies to the HA port).
	WrapListener func(net.Listener) net.Listener
	// Authenticate, when set, checks a slave's credentials before its
	// HELLO is looked at: the values of its AUTH frame, or empty strings
	// when it sent none. An error refuses the slave with
	// RefuseUnauthenticated and the error's text. nil: AUTH frames are
	// read and ignored.
	Authenticate func(remote, authorization, date string) error
}

// DefaultServerOptions returns the defaults.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		HeartbeatInterval: time.Second,
		Timeout:           5 * time.Second,
		MaxFrameBytes:     256 << 10,
		MaxLagBytes:       256 << 20,
	}
}

func (o *ServerOptions) validate() error {
	switch {
	case o.ListenAddr == "":
		return errors.New("ha: ListenAddr is empty")
	case o.BrokerName == "":
		return errors.New("ha: BrokerName is empty")
	case o.HeartbeatInterval <= 0 || o.Timeout <= o.HeartbeatInterval:
		return fmt.Errorf("ha: HeartbeatInterval (%v) must be positive and below Timeout (%v)", o.HeartbeatInterval, o.Timeout)
	case o.MaxFrameBytes < 4096 || o.MaxFrameBytes > MaxDataLen:
		return fmt.Errorf("ha: MaxFrameBytes %d must be in [4096, %d]", o.MaxFrameBytes, MaxDataLen)
	case o.MaxLagBytes <= 0:
		return fmt.Errorf("ha: MaxLagBytes %d must be positive", o.MaxLagBytes)
	}
	return nil
}

var (
	// ErrNotEnoughInSync: fewer slaves are in sync than the write needs.
	ErrNotEnoughInSync = errors.New("ha: not enough in-sync slaves")
	// ErrSlaveTimeout: the in-sync slaves did not acknowledge in time.
	ErrSlaveTimeout = errors.New("ha: slaves did not acknowledge in time")
	// ErrClosed is returned once the server or client is closed.
	ErrClosed = errors.New("ha: closed")
)

// SlaveStatus is what the master knows of one slave.
type SlaveStatus struct {
	BrokerID    int64
	RemoteAddr  string
	Connected   bool
	ConnectedAt time.Time
	// AckOffset is the slave's last acknowledged offset; LagBytes how far
	// it is behind the master's committed offset.
	AckOffset int64
	LagBytes  int64
	// LagMs is how much older the slave's newest record is than the
	// master's (store timestamps; 0 when caught up; while the slave holds
	// no record yet, the time since it connected).
	LagMs     int64
	InSync    bool
	LastHeard time.Time
}

// slave is one connection from a slave; a reconnect makes a new one.
type slave struct {
	id          int64
	remote      string
	conn        net.Conn
	connectedAt time.Time
	done        chan struct{} // closed when the session ends
	endOnce     sync.Once

	ack       atomic.Int64
	ackTs     atomic.Int64
	lastHeard atomic.Int64 // unix nanos
	inSync    atomic.Bool
	connected atomic.Bool
	// prevCommitted is the master's committed offset at the previous
	// ack; only the session's reader touches it.
	prevCommitted int64
}

func (sl *slave) end() {
	sl.endOnce.Do(func() {
		sl.connected.Store(false)
		sl.inSync.Store(false)
		_ = sl.conn.Close()
		close(sl.done)
	})
}

// Server is the master side: it accepts slaves on the HA address, checks
// where their logs meet its own, streams committed bytes to them and tracks
// their acknowledgements.
type Server struct {
	opts ServerOptions
	src  Source
	log  *zap.Logger
	lis  net.Listener

	// Lock order: mu (the slave sessions) and timerMu (the shared wake-up
	// timer) are never held together.
	mu     sync.Mutex
	slaves map[int64]*slave // by broker id; the newest connection
	ackSig notifier

	frames, bytes, acks atomic.Int64
	// authLogged is when a refusal for credentials was last logged (unix
	// nanos).
	authLogged atomic.Int64

	timerMu   sync.Mutex
	wakeAt    time.Time
	wakeTimer *time.Timer

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
}

// NewServer validates the options and binds the listener; Start serves.
func NewServer(opts ServerOptions, src Source, log *zap.Logger) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	lis, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("ha: listen %s: %w", opts.ListenAddr, err)
	}
	if opts.WrapListener != nil {
		lis = opts.WrapListener(lis)
	}
	s := &Server{opts: opts, src: src, log: log, lis: lis, slaves: make(map[int64]*slave)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Addr is the bound HA address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Start accepts slaves in the background.
func (s *Server) Start() {
	s.startOnce.Do(func() {
		s.wg.Add(1)
		go s.acceptLoop()
	})
}

// Close stops accepting, ends every session and waits for them. It is
// idempotent.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		err = s.lis.Close()
		s.DropSlaves()
		s.wg.Wait()
		s.timerMu.Lock()
		if s.wakeTimer != nil {
			s.wakeTimer.Stop()
		}
		s.timerMu.Unlock()
		s.ackSig.notify()
	})
	return err
}

// DropSlaves ends every slave session (a demoted master stops serving);
// slaves reconnect and are refused or served as Serving says.
func (s *Server) DropSlaves() {
	s.mu.Lock()
	for _, sl := range s.slaves {
		sl.end()
	}
	s.mu.Unlock()
	s.ackSig.notify()
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.lis.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Warn("ha accept failed", zap.Error(err))
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(conn)
		}()
	}
}

func (s *Server) refuse(conn net.Conn, r Refuse) {
	_ = conn.SetWriteDeadline(time.Now().Add(s.opts.Timeout))
	_, _ = conn.Write(AppendRefuse(nil, r))
}

// serve runs one slave session: handshake, then the stream until either
// side fails or the server closes.
func (s *Server) serve(conn net.Conn) {
	remote := conn.RemoteAddr().String()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = conn.SetDeadline(time.Now().Add(s.opts.Timeout))
	br := bufio.NewReaderSize(conn, 4096)
	f, err := ReadFrame(br, 1, nil)
	var cred *Auth
	if err == nil && f.Kind == KindAuth {
		a := f.Auth
		cred = &a
		f, err = ReadFrame(br, 1, nil)
	}
	if err != nil || f.Kind != KindHello {
		if err == nil {
			err = fmt.Errorf("%w: expected HELLO, got %s", ErrFrame, f.Kind)
		}
		s.log.Warn("ha handshake failed", zap.String("remote", remote), zap.Error(err))
		s.refuse(conn, Refuse{Code: RefuseBadHello, Reason: err.Error()})
		_ = conn.Close()
		return
	}
	h := f.Hello
	if rf := s.authenticate(remote, cred); rf != nil {
		if s.shouldLogAuth(time.Now()) {
			s.log.Warn("refusing slave: not authenticated", zap.String("remote", remote), zap.Int64("slaveId", h.BrokerID),
				zap.String("reason", rf.Reason))
		}
		s.refuse(conn, *rf)
		_ = conn.Close()
		return
	}
	d := s.handshake(h)
	if d.refuse != nil {
		rf := d.refuse
		lvl := s.log.Warn
		if rf.Code == RefuseDiverged || rf.Code == RefuseTooOld {
			lvl = s.log.Error
		}
		lvl("refusing slave", zap.String("remote", remote), zap.Int64("slaveId", h.BrokerID),
			zap.Int64("slaveMaxOffset", h.MaxOffset), zap.Stringer("code", rf.Code), zap.String("reason", rf.Reason))
		s.refuse(conn, *rf)
		_ = conn.Close()
		return
	}
	if d.truncate != nil {
		s.log.Warn("slave holds bytes this master does not have: telling it to truncate",
			zap.String("remote", remote), zap.Int64("slaveId", h.BrokerID), zap.Int64("slaveMaxOffset", h.MaxOffset),
			zap.Int64("fork", d.truncate.Fork), zap.Int64("epoch", d.truncate.Epoch))
		_ = conn.SetWriteDeadline(time.Now().Add(s.opts.Timeout))
		_, _ = conn.Write(AppendTruncate(nil, *d.truncate))
		_ = conn.Close()
		return
	}
	start := d.start
	committed := s.src.CommittedOffset()
	w := Welcome{Version: min(h.Version, Version), Start: start, MinOffset: s.src.MinOffset(), MaxOffset: committed,
		SegmentSize: s.src.SegmentSize(), Epoch: d.epoch, MasterAddr: s.opts.MasterAddr}
	if hasEpochs(w.Version) {
		w.Epochs = d.entries
	}
	wb, err := AppendWelcome(nil, w)
	if err == nil {
		_, err = conn.Write(wb)
	}
	if err != nil {
		s.log.Warn("ha welcome failed", zap.String("remote", remote), zap.Error(err))
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	sl := &slave{id: h.BrokerID, remote: remote, conn: conn, connectedAt: time.Now(), done: make(chan struct{}),
		prevCommitted: committed}
	sl.ack.Store(start)
	sl.lastHeard.Store(time.Now().UnixNano())
	sl.connected.Store(true)
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		_ = conn.Close()
		return
	}
	old := s.slaves[h.BrokerID]
	s.slaves[h.BrokerID] = sl
	s.pruneLocked()
	s.mu.Unlock()
	if old != nil {
		old.end() // the slave reconnected before its old session timed out
	}
	s.log.Info("slave connected", zap.String("remote", remote), zap.Int64("slaveId", h.BrokerID),
		zap.Int64("from", start), zap.Int64("masterCommitted", committed))

	readErr := make(chan error, 1)
	go func() { readErr <- s.receive(sl, br) }()
	sendErr := s.send(sl, start)
	sl.end()
	rerr := <-readErr
	s.ackSig.notify()
	err = sendErr
	if err == nil {
		err = rerr
	}
	if s.ctx.Err() == nil {
		s.log.Warn("slave disconnected", zap.String("remote", remote), zap.Int64("slaveId", h.BrokerID),
			zap.Int64("ackOffset", sl.ack.Load()), zap.Error(err))
	}
}

// authenticate checks the slave's credentials (cred nil: it sent no AUTH)
// when the server checks them.
func (s *Server) authenticate(remote string, cred *Auth) *Refuse {
	if s.opts.Authenticate == nil {
		return nil
	}
	var a Auth
	if cred != nil {
		a = *cred
	}
	err := s.opts.Authenticate(remote, a.Authorization, a.Date)
	if err == nil {
		return nil
	}
	reason := err.Error()
	if cred == nil {
		reason = "this master requires credentials and the slave sent none (give the slave the access key and secret key of an admin user): " + reason
	}
	return &Refuse{Code: RefuseUnauthenticated, Reason: reason}
}

// authLogEvery rate-limits the master's WARN line for refused credentials
// (the guard audits every refusal too).
const authLogEvery = 10 * time.Second

func (s *Server) shouldLogAuth(now time.Time) bool {
	last := s.authLogged.Load()
	return now.UnixNano()-last >= int64(authLogEvery) && s.authLogged.CompareAndSwap(last, now.UnixNano())
}

// pruneLocked forgets slaves disconnected for a long time.
func (s *Server) pruneLocked() {
	for id, sl := range s.slaves {
		if !sl.connected.Load() && time.Since(time.Unix(0, sl.lastHeard.Load())) > 10*time.Minute {
			delete(s.slaves, id)
		}
	}
}

// decision is the master's answer to a HELLO: stream from start (with the
// epoch and entries WELCOME carries), TRUNCATE, or REFUSE.
type decision struct {
	start    int64
	epoch    int64
	entries  []EpochEntry
	truncate *Truncate
	refuse   *Refuse
}

// masterEpochs returns the master's epoch and entries (nil without
// ServerOptions.Epochs), cut to the newest MaxEpochEntries. The epoch is
// ServerOptions.Epoch, or the newest entry's when that is higher.
func (s *Server) masterEpochs() (int64, []EpochEntry) {
	var epoch int64
	if s.opts.Epoch != nil {
		epoch = s.opts.Epoch()
	}
	if s.opts.Epochs == nil {
		return epoch, nil
	}
	entries := s.opts.Epochs()
	if n := len(entries); n > MaxEpochEntries {
		entries = entries[n-MaxEpochEntries:]
	}
	if n := len(entries); n > 0 {
		epoch = max(epoch, entries[n-1].Epoch)
	}
	return epoch, entries
}

// handshake answers a HELLO. A version 1 slave, or any slave of a master
// without epoch entries, gets what check decides. A version 2 slave of a
// master with entries that check refuses as diverged is told to truncate
// at the fork point of the two epoch histories when that is below the
// slave's end and not below the master's minimum offset.
func (s *Server) handshake(h Hello) decision {
	start, rf := s.check(h)
	epoch, entries := s.masterEpochs()
	d := decision{start: start, epoch: epoch, entries: entries}
	if !hasEpochs(h.Version) || s.opts.Epochs == nil {
		d.refuse = rf
		return d
	}
	if rf != nil && (rf.Code == RefuseMismatch || rf.Code == RefuseNotMaster || rf.Code == RefuseBadHello) {
		d.refuse = rf
		return d
	}
	if err := ValidateEpochs(entries); err != nil {
		d.refuse = &Refuse{Code: RefuseInternal, Reason: fmt.Sprintf("the master's epoch entries are invalid: %v", err)}
		return d
	}
	if n := len(h.Epochs); n > 0 && h.Epochs[n-1].Epoch > epoch {
		d.refuse = &Refuse{Code: RefuseNotMaster, Reason: fmt.Sprintf(
			"the slave knows epoch %d, above this master's epoch %d: a newer master exists", h.Epochs[n-1].Epoch, epoch)}
		return d
	}
	if rf == nil || rf.Code != RefuseDiverged {
		d.refuse = rf
		return d
	}
	committed := s.src.CommittedOffset()
	fork, ok := ForkPoint(h.Epochs, h.MaxOffset, entries, committed)
	minOff := s.src.MinOffset()
	switch {
	case !ok:
		rf.Reason += "; the slave's and the master's epoch entries share no epoch"
		d.refuse = rf
	case fork >= h.MaxOffset:
		rf.Reason += fmt.Sprintf("; the epoch entries agree up to the slave's end %d", h.MaxOffset)
		d.refuse = rf
	case fork < minOff:
		d.refuse = &Refuse{Code: RefuseTooOld, Reason: fmt.Sprintf(
			"the slave's log forks from the master's at %d, below the master's minimum offset %d", fork, minOff)}
	default:
		if fork < committed {
			if _, err := s.src.RecordAt(fork); err != nil {
				rf.Reason += fmt.Sprintf("; the fork point %d of the epoch entries is not a record of the master's log: %v", fork, err)
				d.refuse = rf
				return d
			}
		}
		d.truncate = &Truncate{Fork: fork, Epoch: epoch}
	}
	return d
}

// check decides where a slave's stream starts, or refuses it, from the
// slave's last record (the prefix check).
func (s *Server) check(h Hello) (int64, *Refuse) {
	refuse := func(code RefuseCode, format string, args ...any) (int64, *Refuse) {
		return 0, &Refuse{Code: code, Reason: fmt.Sprintf(format, args...)}
	}
	if h.Version != Version1 && h.Version != Version2 {
		return refuse(RefuseMismatch, "protocol version %d, master speaks %d and %d", h.Version, Version1, Version2)
	}
	if h.BrokerName != s.opts.BrokerName {
		return refuse(RefuseMismatch, "slave of broker %q connected to the master of %q", h.BrokerName, s.opts.BrokerName)
	}
	if s.opts.Serving != nil {
		if err := s.opts.Serving(); err != nil {
			return refuse(RefuseNotMaster, "%v", err)
		}
	}
	if h.MaxOffset < 0 || h.LastSize < 0 || (h.LastSize > 0 && (h.LastStart < 0 || h.LastStart+int64(h.LastSize) > h.MaxOffset)) {
		return refuse(RefuseBadHello, "inconsistent log position: end %d, last record %d+%d", h.MaxOffset, h.LastStart, h.LastSize)
	}
	minOff := s.src.MinOffset()
	committed := s.src.CommittedOffset()
	seg := s.src.SegmentSize()
	if h.MaxOffset == 0 && h.LastSize == 0 {
		return minOff, nil // a new slave copies the whole retained log
	}
	if h.MaxOffset > committed {
		return refuse(RefuseDiverged, "the slave's log ends at %d, past the master's end %d: it holds bytes the master does not have", h.MaxOffset, committed)
	}
	if h.MaxOffset < minOff {
		return refuse(RefuseTooOld, "the slave needs bytes from %d but the master keeps only %d and later", h.MaxOffset, minOff)
	}
	if h.LastSize == 0 {
		if h.MaxOffset%seg != 0 {
			return refuse(RefuseDiverged, "the slave's log holds no record but ends at %d, not a segment start", h.MaxOffset)
		}
		return h.MaxOffset, nil
	}
	if h.LastStart < minOff {
		// The slave's last record is in a segment the master deleted; its
		// end is the master's first segment's start, which is a boundary.
		if h.MaxOffset == minOff {
			return h.MaxOffset, nil
		}
		return refuse(RefuseDiverged, "the slave's last record at %d is below the master's minimum %d but its log ends at %d", h.LastStart, minOff, h.MaxOffset)
	}
	rec, err := s.src.RecordAt(h.LastStart)
	if err != nil {
		return refuse(RefuseDiverged, "the slave's last record at %d is not a record of the master's log: %v", h.LastStart, err)
	}
	if rec.Blank || rec.Size != h.LastSize || rec.Checksum != h.LastChecksum {
		return refuse(RefuseDiverged, "the slave's last record at %d (size %d, checksum %d) differs from the master's (size %d, checksum %d, blank %v)",
			h.LastStart, h.LastSize, h.LastChecksum, rec.Size, rec.Checksum, rec.Blank)
	}
	end := h.LastStart + int64(h.LastSize)
	if end == h.MaxOffset {
		return end, nil
	}
	// The slave's log ends with the end-of-segment blank after that record.
	if segEnd := end - end%seg + seg; h.MaxOffset == segEnd {
		if b, err := s.src.RecordAt(end); err == nil && b.Blank {
			return h.MaxOffset, nil
		}
	}
	return refuse(RefuseDiverged, "the slave's log ends at %d, but its last record ends at %d and the master has no segment end there", h.MaxOffset, end)
}

// send streams committed bytes from start until the session ends.
func (s *Server) send(sl *slave, start int64) error {
	buf := make([]byte, 0, s.opts.MaxFrameBytes)
	var hdr [dataHeader]byte
	var beatBuf [beatLen]byte
	beat := time.NewTicker(s.opts.HeartbeatInterval)
	defer beat.Stop()
	write := func(bufs net.Buffers) error {
		_ = sl.conn.SetWriteDeadline(time.Now().Add(s.opts.Timeout))
		_, err := bufs.WriteTo(sl.conn)
		return err
	}
	sendBeat := func() error {
		return write(net.Buffers{AppendBeat(beatBuf[:0], s.src.CommittedOffset(), time.Now().UnixMilli())})
	}
	pos := start
	for {
		ch := s.src.CommittedChanged()
		chunk, next, err := s.src.ReadChunk(pos, s.opts.MaxFrameBytes, buf[:0])
		if err != nil {
			reason := fmt.Sprintf("cannot read the master's log at %d: %v", pos, err)
			code := RefuseInternal
			if pos < s.src.MinOffset() {
				code = RefuseTooOld
			}
			s.refuse(sl.conn, Refuse{Code: code, Reason: reason})
			return errors.New(reason)
		}
		if cap(chunk) <= 4*s.opts.MaxFrameBytes {
			buf = chunk[:0] // keep a buffer grown for a large record, within reason
		}
		if next > pos {
			if err := write(net.Buffers{AppendDataHeader(hdr[:0], pos, len(chunk)), chunk}); err != nil {
				return err
			}
			s.frames.Add(1)
			s.bytes.Add(int64(len(chunk)))
			pos = next
			select {
			case <-beat.C:
				if err := sendBeat(); err != nil {
					return err
				}
			default:
			}
			continue
		}
		select {
		case <-ch:
			s.gather()
		case <-beat.C:
			if err := sendBeat(); err != nil {
				return err
			}
		case <-sl.done:
			return nil
		case <-s.ctx.Done():
			return ErrClosed
		}
	}
}

// gatherWait bounds how long the sender waits for more bytes after being
// woken by new ones.
const gatherWait = 100 * time.Microsecond

// gather lets appends that arrive together join one frame. When the sender
// wakes up for the first of a burst of appends (sync replication: every
// producer appends again right after its acknowledgement), shipping at once
// would send one record per frame, and the slave would write and ack each
// alone. So the sender yields until the committed offset stops growing
// between two yields, for at most gatherWait: a lone append costs one or
// two yields, a burst travels in one frame.
func (s *Server) gather() {
	deadline := time.Now().Add(gatherWait)
	last := s.src.CommittedOffset()
	for time.Now().Before(deadline) {
		runtime.Gosched()
		cur := s.src.CommittedOffset()
		if cur == last {
			return
		}
		last = cur
	}
}

// receive reads the slave's acks until the connection fails or is silent
// for Timeout.
func (s *Server) receive(sl *slave, br *bufio.Reader) error {
	defer sl.end()
	for {
		_ = sl.conn.SetReadDeadline(time.Now().Add(s.opts.Timeout))
		f, err := ReadFrame(br, 1, nil)
		if err != nil {
			return err
		}
		if f.Kind != KindAck {
			return fmt.Errorf("%w: expected ACK from the slave, got %s", ErrFrame, f.Kind)
		}
		s.onAck(sl, f.Offset, f.Timestamp)
	}
}

func (s *Server) onAck(sl *slave, ack, storeTs int64) {
	s.acks.Add(1)
	sl.lastHeard.Store(time.Now().UnixNano())
	if ack < sl.ack.Load() {
		ack = sl.ack.Load() // a slave's log never shrinks within a session
	}
	sl.ack.Store(ack)
	sl.ackTs.Store(storeTs)
	committed := s.src.CommittedOffset()
	lag := committed - ack
	switch {
	case sl.inSync.Load() && lag > s.opts.MaxLagBytes:
		sl.inSync.Store(false)
		s.log.Warn("slave left the in-sync set: too far behind", zap.Int64("slaveId", sl.id),
			zap.Int64("lagBytes", lag), zap.Int64("maxLagBytes", s.opts.MaxLagBytes))
	case !sl.inSync.Load() && ack >= sl.prevCommitted && lag <= s.opts.MaxLagBytes:
		sl.inSync.Store(true)
		s.log.Info("slave joined the in-sync set", zap.Int64("slaveId", sl.id), zap.Int64("ackOffset", ack),
			zap.Int64("lagBytes", lag))
	}
	sl.prevCommitted = committed
	s.ackSig.notify()
}

// ServerStats counts the server's traffic since it started.
type ServerStats struct {
	// Frames and Bytes are the DATA frames and payload bytes shipped;
	// Acks the acknowledgements received (all slaves).
	Frames, Bytes, Acks int64
}

// Stats returns the traffic counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{Frames: s.frames.Load(), Bytes: s.bytes.Load(), Acks: s.acks.Load()}
}

// InSync returns how many slaves are in sync.
func (s *Server) InSync() int {
	n, _ := s.count(0)
	return n
}

// count returns the number of in-sync slaves and how many of them acked at
// least end.
func (s *Server) count(end int64) (inSync, acked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.slaves {
		if sl.connected.Load() && sl.inSync.Load() {
			inSync++
			if sl.ack.Load() >= end {
				acked++
			}
		}
	}
	return inSync, acked
}

// WaitReplicated blocks until at least need in-sync slaves acknowledged
// offset end. It fails with ErrNotEnoughInSync as soon as fewer than need
// slaves are in sync, with ErrSlaveTimeout after timeout, and with the
// context's error.
func (s *Server) WaitReplicated(ctx context.Context, end int64, need int, timeout time.Duration) error {
	var deadline time.Time
	for {
		ch := s.ackSig.c()
		inSync, acked := s.count(end)
		if acked >= need {
			return nil
		}
		if inSync < need {
			return fmt.Errorf("%w: %d in sync, %d needed", ErrNotEnoughInSync, inSync, need)
		}
		if s.ctx.Err() != nil {
			return ErrClosed
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(timeout)
		} else if !now.Before(deadline) {
			return fmt.Errorf("%w: %d of %d needed slaves acknowledged offset %d within %v", ErrSlaveTimeout, acked, need, end, timeout)
		}
		s.waiting(deadline)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitReplicatedBy blocks until every slave whose broker id ids returns
// has a connected session that acknowledged offset end. It is the wait of
// a master whose slave set is decided elsewhere (the sync state set of the
// controller): the in-sync set plays no part, a listed slave that is not
// connected is waited for, and ids is asked again at every wake-up (an ack,
// a disconnection, Wake), so a set that shrinks releases the wait. It
// returns nil at once when ids returns none, ErrSlaveTimeout after timeout,
// ErrClosed once the server closes, and the context's error.
func (s *Server) WaitReplicatedBy(ctx context.Context, end int64, ids func() []int64, timeout time.Duration) error {
	var deadline time.Time
	for {
		ch := s.ackSig.c()
		want := ids()
		missing := s.notAcked(end, want)
		if len(missing) == 0 {
			return nil
		}
		if s.ctx.Err() != nil {
			return ErrClosed
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(timeout)
		} else if !now.Before(deadline) {
			return fmt.Errorf("%w: slaves %v of %v did not acknowledge offset %d within %v", ErrSlaveTimeout, missing, want, end, timeout)
		}
		s.waiting(deadline)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notAcked returns the ids without a connected session that acked end.
func (s *Server) notAcked(end int64, ids []int64) []int64 {
	var missing []int64
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if sl := s.slaves[id]; sl == nil || !sl.connected.Load() || sl.ack.Load() < end {
			missing = append(missing, id)
		}
	}
	return missing
}

// Wake makes every wait re-evaluate its condition now (WaitReplicatedBy
// asks its ids again), for example because the slave set changed.
func (s *Server) Wake() { s.ackSig.notify() }

// AckedBy returns the lowest offset the slaves with these broker ids
// acknowledged, -1 when one of them has no connected session, and
// math.MaxInt64 when ids is empty (no slave holds anything back).
func (s *Server) AckedBy(ids []int64) int64 {
	acked := int64(math.MaxInt64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		sl := s.slaves[id]
		if sl == nil || !sl.connected.Load() {
			return -1
		}
		acked = min(acked, sl.ack.Load())
	}
	return acked
}

// waiting makes sure the waiters are woken at (about) deadline, so that
// each wait needs no timer of its own: one goroutine wakes every waiter at
// the earliest deadline any of them registered, and they check the clock.
func (s *Server) waiting(deadline time.Time) {
	s.timerMu.Lock()
	defer s.timerMu.Unlock()
	if !s.wakeAt.IsZero() && !deadline.Before(s.wakeAt) {
		return
	}
	s.wakeAt = deadline
	d := time.Until(deadline)
	if s.wakeTimer == nil {
		s.wakeTimer = time.AfterFunc(d, s.wake)
	} else {
		s.wakeTimer.Reset(d)
	}
}

// wake wakes every waiter; waiters still waiting register their deadlines
// again, which re-arms the timer.
func (s *Server) wake() {
	s.timerMu.Lock()
	s.wakeAt = time.Time{}
	s.timerMu.Unlock()
	s.ackSig.notify()
}

// Slaves reports every slave the master knows, by broker id.
func (s *Server) Slaves() []SlaveStatus {
	committed := s.src.CommittedOffset()
	lastTs := s.src.LastStoreTimestamp()
	now := time.Now()
	s.mu.Lock()
	out := make([]SlaveStatus, 0, len(s.slaves))
	for _, sl := range s.slaves {
		st := SlaveStatus{
			BrokerID: sl.id, RemoteAddr: sl.remote, Connected: sl.connected.Load(), ConnectedAt: sl.connectedAt,
			AckOffset: sl.ack.Load(), InSync: sl.connected.Load() && sl.inSync.Load(),
			LastHeard: time.Unix(0, sl.lastHeard.Load()),
		}
		st.LagBytes = max(committed-st.AckOffset, 0)
		if st.LagBytes > 0 {
			if ts := sl.ackTs.Load(); ts > 0 {
				st.LagMs = max(lastTs-ts, 0)
			} else {
				st.LagMs = now.Sub(sl.connectedAt).Milliseconds()
			}
		}
		out = append(out, st)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerID < out[j].BrokerID })
	return out
}
