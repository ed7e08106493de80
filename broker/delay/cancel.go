package delay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// ErrClosed: the engine is closed.
var ErrClosed = errors.New("delay: closed")

// ErrAlreadyDelivered: a cancel came after the message was delivered or
// while it was being delivered.
var ErrAlreadyDelivered = errors.New("delay: message already delivered")

// CancelTarget names one stored copy of a timer message.
type CancelTarget struct {
	// Origin is the CommitLog offset of the message's first copy.
	Origin    int64
	DeliverMS int64
	// Location is the CommitLog offset of this copy.
	Location int64
}

// Cancel cancels timer messages. It returns once the cancellations are
// durable: from then on none of the targets is delivered. If a target was
// delivered already (or is being delivered) it returns ErrAlreadyDelivered,
// after cancelling the others. It returns how many targets are cancelled
// (including ones cancelled before).
func (e *Engine) Cancel(targets []CancelTarget) (int, error) {
	done, err := e.CancelEach(targets)
	return len(done), err
}

// CancelEach is Cancel, returning the targets that are cancelled (now or
// before): the ones whose cancellation the broker passes on to its slaves.
func (e *Engine) CancelEach(targets []CancelTarget) ([]CancelTarget, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	var done []CancelTarget
	delivered, recorded := false, false
	var seq int64
	var werr error
	for _, t := range targets {
		st, s, err := e.cancelLocked(t)
		switch {
		case err != nil:
			werr = err
		case st == stInflight || st == stDone:
			delivered = true
		default:
			if s > 0 {
				seq, recorded = s, true
			}
			done = append(done, t)
		}
	}
	e.mu.Unlock()
	if recorded {
		if err := e.clog.sync(seq); err != nil {
			// In memory the messages are cancelled (never delivered by this
			// process), but the caller must not rely on it after a crash.
			return nil, fmt.Errorf("delay: cancel log: %w", err)
		}
	}
	if werr != nil {
		return done, fmt.Errorf("delay: cancel log: %w", werr)
	}
	if delivered {
		return done, ErrAlreadyDelivered
	}
	return done, nil
}

// cancelLocked cancels one target unless it is cancelled, in flight or
// done already; it returns the state found (stPending: cancelled now) and
// the cancel log sequence to sync (0: nothing written).
func (e *Engine) cancelLocked(t CancelTarget) (uint8, int64, error) {
	st := e.stateLocked(t)
	if st != stPending {
		return st, 0, nil
	}
	rec := cancelRec{DeliverMS: t.DeliverMS, Location: t.Location}
	seq, err := e.clog.appendLocked(t.Origin, rec)
	if err != nil {
		return st, 0, err
	}
	e.cancels[t.Origin] = rec
	if lb := e.loadedBucketLocked(t.DeliverMS); lb != nil {
		if i, ok := lb.byOrigin.get(t.Origin); ok && lb.ents.at(i).state == stPending {
			lb.ents.at(i).state = stCancelled
			lb.open--
		}
	}
	e.cancelled.Add(1)
	return st, seq, nil
}

// applyMarkers applies the cancel markers read from the timer queue (see
// PropertyTimerCancel): on a slave they are the master's cancellations; on
// the master that wrote them they are already applied. They are durable
// before the index moves past them.
func (e *Engine) applyMarkers(targets []CancelTarget) error {
	e.mu.Lock()
	var seq int64
	var errs []error
	for _, t := range targets {
		_, s, err := e.cancelLocked(t)
		if err != nil {
			errs = append(errs, err)
		}
		seq = max(seq, s)
	}
	e.mu.Unlock()
	if seq > 0 {
		errs = append(errs, e.clog.sync(seq))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delay: cancel log: %w", err)
	}
	return nil
}

// PropertyTimerCancel marks a cancel marker: a record of the timer topic
// that is not a timer message but the cancellation of one, written by the
// master after Cancel so that its slaves (which replicate the CommitLog,
// not the cancel log) cancel it too. Its value is "<origin>:<location>"
// (CommitLog offsets of the cancelled message's first copy and of the copy
// cancelled); TIMER_OUT_MS is the message's due time.
const PropertyTimerCancel = "TIMER_CANCEL"

// CancelMarker returns the properties of the marker that cancels t.
func CancelMarker(t CancelTarget) map[string]string {
	return map[string]string{
		PropertyTimerCancel:        strconv.FormatInt(t.Origin, 10) + ":" + strconv.FormatInt(t.Location, 10),
		message.PropertyTimerOutMS: strconv.FormatInt(t.DeliverMS, 10),
	}
}

// ParseCancelMarker reads the target of a cancel marker; ok is false when
// props are not a marker's.
func ParseCancelMarker(props map[string]string) (t CancelTarget, ok bool, err error) {
	v, ok := props[PropertyTimerCancel]
	if !ok {
		return CancelTarget{}, false, nil
	}
	o, l, found := strings.Cut(v, ":")
	origin, err1 := strconv.ParseInt(o, 10, 64)
	loc, err2 := strconv.ParseInt(l, 10, 64)
	due, err3 := strconv.ParseInt(props[message.PropertyTimerOutMS], 10, 64)
	if !found || err1 != nil || err2 != nil || err3 != nil || origin < 0 || loc < 0 {
		return CancelTarget{}, true, fmt.Errorf("delay: bad cancel marker %s=%q %s=%q", PropertyTimerCancel, v,
			message.PropertyTimerOutMS, props[message.PropertyTimerOutMS])
	}
	return CancelTarget{Origin: origin, Location: loc, DeliverMS: due}, true, nil
}

// Cancelled reports whether the message whose first copy is at origin is
// cancelled.
func (e *Engine) Cancelled(origin int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.cancels[origin]
	return ok
}

func (e *Engine) loadedBucketLocked(deliverMS int64) *lbucket {
	if bf := e.files.m[bucketKey{0, floorTo(deliverMS, granularity[0])}]; bf != nil {
		return bf.lb
	}
	return nil
}

// stateLocked says where a message is: pending (not yet due or not yet
// indexed), in flight, done or cancelled.
func (e *Engine) stateLocked(t CancelTarget) uint8 {
	if _, ok := e.cancels[t.Origin]; ok {
		return stCancelled
	}
	if lb := e.loadedBucketLocked(t.DeliverMS); lb != nil {
		if i, ok := lb.byOrigin.get(t.Origin); ok {
			return lb.ents.at(i).state
		}
		return stPending // not indexed yet
	}
	key := floorTo(t.DeliverMS, granularity[0])
	if key <= e.frontier && t.Location <= e.lastLoc {
		// Indexed into a bucket of the loaded range that is gone: it was
		// reclaimed after every entry was delivered.
		if bf, exists := e.files.m[bucketKey{0, key}]; !exists || bf.removing {
			return stDone
		}
	}
	return stPending
}

// compactCancelsLocked forgets cancellations that can no longer matter
// (their bucket is reclaimed and no replay can bring the message back) and
// rewrites the cancel log when most of it is dead.
func (e *Engine) compactCancelsLocked() error {
	for origin, r := range e.cancels {
		key := floorTo(r.DeliverMS, granularity[0])
		if key < e.frontier && r.Location <= e.ckpt.Location {
			if _, exists := e.files.m[bucketKey{0, key}]; !exists {
				delete(e.cancels, origin)
			}
		}
	}
	if dead := e.clog.n - int64(len(e.cancels)); dead > 4096 && dead > int64(len(e.cancels)) {
		return e.clog.rewrite(e.cancels)
	}
	return nil
}

// The cancel log: fixed 32-byte records, appended and fsynced before a
// cancel is acknowledged (see doc.go).
const (
	cancelLogName = "cancel.log"
	cancelRecSize = 32
)

type cancelRec struct {
	DeliverMS int64
	Location  int64
}

type cancelLog struct {
	path    string
	f       *os.File
	n       int64 // records in the file
	written int64 // records appended (sequence), guarded by Engine.mu
	syncMu  sync.Mutex
	synced  int64 // sequence durable, guarded by syncMu
}

func encodeCancel(b []byte, origin int64, r cancelRec) {
	binary.BigEndian.PutUint64(b[0:], uint64(origin))
	binary.BigEndian.PutUint64(b[8:], uint64(r.DeliverMS))
	binary.BigEndian.PutUint64(b[16:], uint64(r.Location))
	binary.BigEndian.PutUint32(b[24:], 0)
	binary.BigEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
}

func openCancelLog(path string, into map[int64]cancelRec) (*cancelLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("delay: cancel log: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("delay: cancel log: %w", err)
	}
	n := int64(len(b) / cancelRecSize)
	for i := int64(0); i < n; i++ {
		r := b[i*cancelRecSize : (i+1)*cancelRecSize]
		if binary.BigEndian.Uint32(r[28:]) != crc32.Checksum(r[:28], castagnoli) {
			continue // torn by a power loss; it was never acknowledged
		}
		into[int64(binary.BigEndian.Uint64(r))] = cancelRec{
			DeliverMS: int64(binary.BigEndian.Uint64(r[8:])),
			Location:  int64(binary.BigEndian.Uint64(r[16:])),
		}
	}
	if int64(len(b)) != n*cancelRecSize {
		if err := f.Truncate(n * cancelRecSize); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("delay: cancel log: %w", err)
		}
	}
	return &cancelLog{path: path, f: f, n: n}, nil
}

// appendLocked writes one record (to the page cache) and returns its
// sequence number for sync. The caller holds Engine.mu.
func (c *cancelLog) appendLocked(origin int64, r cancelRec) (int64, error) {
	var b [cancelRecSize]byte
	encodeCancel(b[:], origin, r)
	if _, err := c.f.WriteAt(b[:], c.n*cancelRecSize); err != nil {
		return 0, err
	}
	c.n++
	c.written++
	return c.written, nil
}

// sync makes every record up to seq durable; concurrent callers share one
// fdatasync.
func (c *cancelLog) sync(seq int64) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	if c.synced >= seq {
		return nil
	}
	// Everything written so far is covered by this sync; written may be
	// read racily here, so take the conservative seq.
	if err := fsutil.Fdatasync(c.f); err != nil {
		return err
	}
	c.synced = seq
	return nil
}

// rewrite replaces the log with the live records. The caller holds
// Engine.mu, so nothing is appended meanwhile.
func (c *cancelLog) rewrite(live map[int64]cancelRec) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	b := make([]byte, 0, len(live)*cancelRecSize)
	var rec [cancelRecSize]byte
	for origin, r := range live {
		encodeCancel(rec[:], origin, r)
		b = append(b, rec[:]...)
	}
	if err := fsutil.WriteFileAtomic(c.path, b, 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(c.path, os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	_ = c.f.Close()
	c.f = f
	c.n = int64(len(live))
	c.synced = c.written
	return nil
}

func (c *cancelLog) close() error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	if c.f == nil {
		return nil
	}
	err := fsutil.Fdatasync(c.f)
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	return err
}
