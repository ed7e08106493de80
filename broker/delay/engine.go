package delay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Unit is one timer message as the timer topic's ConsumeQueue and record
// say: where it is, when it is due and which message it is a copy of.
type Unit struct {
	QueueOffset int64
	Location    int64
	Size        int32
	DeliverMS   int64
	// Origin is the CommitLog offset of the message's first copy when
	// HasOrigin is set (the message is a copy); otherwise Location is.
	Origin    int64
	HasOrigin bool
	// Cancel, when set, makes the unit a cancel marker (see
	// PropertyTimerCancel): not a timer message but the cancellation of
	// the one it names.
	Cancel *CancelTarget
}

// Host is what the engine needs from the broker's store.
type Host interface {
	// ReadTimerQueue reads up to max units of the timer topic's queue from
	// offset from, in queue order, and returns the offset after the last one
	// read (or where reading must resume: past units that no longer exist).
	ReadTimerQueue(from int64, max int) (units []Unit, next int64, err error)
	// TimerQueueMaxOffset is the timer queue's end (what is dispatched).
	TimerQueueMaxOffset() int64
	// TimerArrival returns a channel closed when the timer queue grows
	// (taken before a read, so no arrival is missed).
	TimerArrival() <-chan struct{}
	// ReadRecords reads the stored records at CommitLog offsets and calls
	// fn for each, with its index in locations, in any order; rec is valid
	// only during fn.
	ReadRecords(locations []int64, fn func(i int, rec []byte, err error))
	// StoreHost is the host the store writes into its records: delivered
	// records are prepared with it.
	StoreHost() netip.AddrPort
	// Deliver stores due messages, restored into records of their real
	// topics (RestoreRecord), and returns once they are stored as an
	// acknowledged send is.
	Deliver(ctx context.Context, recs []store.Prepared) error
}

// Options configure an Engine.
type Options struct {
	// Dir holds the bucket index, the fired logs, the cancel log and the
	// checkpoint.
	Dir   string
	Clock Clock
	// LoadAhead is how far ahead level-0 buckets are loaded into the wheel
	// (30 s; at most 10 min).
	LoadAhead time.Duration
	// LoadInterval is how often (clock time) buckets are split and loaded
	// (1 s).
	LoadInterval time.Duration
	// CheckpointInterval is how often (wall time) the bucket files are
	// synced and the index checkpoint written (1 s).
	CheckpointInterval time.Duration
	// BatchSize bounds one delivery batch (256): after a crash at most one
	// batch is delivered again.
	BatchSize int
	// MaxOpenFiles bounds the descriptors the bucket index keeps open (256).
	MaxOpenFiles int
	// DeliverTimeout bounds one attempt to store a batch (10 s).
	DeliverTimeout time.Duration
}

// DefaultOptions returns the defaults for an engine under dir.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:                dir,
		Clock:              RealClock,
		LoadAhead:          30 * time.Second,
		LoadInterval:       time.Second,
		CheckpointInterval: time.Second,
		BatchSize:          256,
		MaxOpenFiles:       256,
		DeliverTimeout:     10 * time.Second,
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("delay: Dir is empty"))
	}
	if o.LoadAhead < time.Duration(granularity[0])*time.Millisecond || o.LoadAhead > time.Duration(maxLoadAhead)*time.Millisecond {
		errs = append(errs, fmt.Errorf("delay: LoadAhead %v not in 10s..%v", o.LoadAhead, time.Duration(maxLoadAhead)*time.Millisecond))
	}
	if o.LoadInterval <= 0 || o.LoadInterval > o.LoadAhead/2 {
		errs = append(errs, fmt.Errorf("delay: LoadInterval %v must be positive and at most LoadAhead/2", o.LoadInterval))
	}
	if o.CheckpointInterval <= 0 || o.DeliverTimeout <= 0 {
		errs = append(errs, errors.New("delay: CheckpointInterval and DeliverTimeout must be positive"))
	}
	if o.BatchSize <= 0 || o.BatchSize > 4096 {
		errs = append(errs, fmt.Errorf("delay: BatchSize %d not in 1..4096", o.BatchSize))
	}
	if o.MaxOpenFiles < 8 {
		errs = append(errs, fmt.Errorf("delay: MaxOpenFiles %d must be at least 8", o.MaxOpenFiles))
	}
	return errors.Join(errs...)
}

// Engine delivers timer messages at their time: it indexes the timer
// topic into time buckets on disk, loads the buckets that come due into an
// in-memory wheel and stores each message in its real topic when due. See
// doc.go.
type Engine struct {
	opts  Options
	host  Host
	log   *zap.Logger
	clock Clock

	mu       sync.Mutex
	amu      sync.Mutex // serialises appends to bucket files (taken before mu)
	files    *fileSet
	loaded   []*lbucket // by start
	frontier int64      // every level-0 file starting at or before it is loaded
	loadedAt int64      // clock time of the last completed load step
	cancels  map[int64]cancelRec
	clog     *cancelLog
	qoff     int64 // next timer queue offset to index
	lastLoc  int64 // location of the last unit indexed
	ckpt     checkpoint
	inflight int
	closed   bool
	// sleepUntil is the due time the firer waits for (0: none, −1: it is
	// not waiting).
	sleepUntil int64
	// tombs are split buckets to delete at the next checkpoint; resplits
	// are tombstones found at start, to split again.
	tombs    []string
	resplits []tombstone

	// active: the engine delivers; otherwise it stands by (standby.go).
	// holdUntil: after an activation nothing fires until qoff reaches it.
	active    bool
	holdUntil int64
	// inherit are the Progress statements taken from a master (imu orders
	// their writes to disk); flights the batches taken for delivery.
	inherit []Progress
	imu     sync.Mutex
	flights []*flight

	delivered, cancelled, lost, skipped atomic.Int64

	wake    chan struct{}
	batches chan *batch

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
}

type checkpoint struct {
	Version     int   `json:"version"`
	QueueOffset int64 `json:"queueOffset"`
	Location    int64 `json:"location"`
}

const checkpointName = "checkpoint.json"

// Open opens (creating) the engine's directory and recovers its state: the
// bucket files, the cancel log and the checkpoint. Nothing runs until
// Start.
func Open(opts Options, host Host, log *zap.Logger) (*Engine, error) {
	start := time.Now()
	if opts.Clock == nil {
		opts.Clock = RealClock
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	e := &Engine{
		opts: opts, host: host, log: log, clock: opts.Clock,
		files:    newFileSet(opts.Dir, opts.MaxOpenFiles),
		frontier: math.MinInt64,
		loadedAt: math.MinInt64,
		cancels:  make(map[int64]cancelRec),
		lastLoc:  -1,
		active:   true,
		wake:     make(chan struct{}, 1),
		batches:  make(chan *batch, 2),
	}
	var err error
	if e.resplits, err = e.files.scan(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(opts.Dir, checkpointName))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &e.ckpt); err != nil {
			return nil, fmt.Errorf("delay: checkpoint: %w", err)
		}
	case errors.Is(err, os.ErrNotExist):
		e.ckpt = checkpoint{Version: 1, Location: -1}
	default:
		return nil, fmt.Errorf("delay: checkpoint: %w", err)
	}
	e.qoff, e.lastLoc = e.ckpt.QueueOffset, e.ckpt.Location
	if e.inherit, err = loadInherited(opts.Dir); err != nil {
		return nil, err
	}
	if e.clog, err = openCancelLog(filepath.Join(opts.Dir, cancelLogName), e.cancels); err != nil {
		return nil, err
	}
	log.Info("timer index opened", zap.String("dir", opts.Dir), zap.Int("buckets", len(e.files.m)),
		zap.Int64("queueOffset", e.qoff), zap.Int("cancels", len(e.cancels)), zap.Duration("took", time.Since(start)))
	return e, nil
}

// Start starts indexing, loading, firing and checkpointing.
func (e *Engine) Start() {
	e.startOnce.Do(func() {
		e.ctx, e.cancel = context.WithCancel(context.Background())
		e.wg.Add(5)
		go e.buildLoop()
		go e.loadLoop()
		go e.fireLoop()
		go e.deliverLoop()
		go e.checkpointLoop()
	})
}

// Close stops the engine: the batch being delivered completes, the bucket
// files are synced and the checkpoint written. It is idempotent.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		if e.cancel != nil {
			e.cancel()
			e.wg.Wait()
		}
		var errs []error
		if err := e.checkpointOnce(); err != nil {
			errs = append(errs, err)
		}
		e.mu.Lock()
		e.closed = true
		errs = append(errs, e.files.closeAll())
		for _, lb := range e.loaded {
			if lb.fired != nil {
				if lb.firedDirty {
					errs = append(errs, fsutil.Fdatasync(lb.fired))
				}
				errs = append(errs, lb.fired.Close())
				lb.fired = nil
			}
		}
		errs = append(errs, e.clog.close())
		e.mu.Unlock()
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

func (e *Engine) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// sleep waits d of wall time or until the engine stops; it reports whether
// the engine still runs.
func (e *Engine) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ---- indexing -------------------------------------------------------------

// buildLoop tails the timer topic's queue and appends every unit to its
// bucket file.
func (e *Engine) buildLoop() {
	defer e.wg.Done()
	for {
		arrived := e.host.TimerArrival()
		e.mu.Lock()
		from := e.qoff
		e.mu.Unlock()
		units, next, err := e.host.ReadTimerQueue(from, 1024)
		if err != nil {
			e.log.Error("read timer queue", zap.Int64("offset", from), zap.Error(err))
			if !e.sleep(200 * time.Millisecond) {
				return
			}
			continue
		}
		if len(units) > 0 {
			if err := e.index(units, next); err != nil {
				e.log.Error("timer index write failed; retrying", zap.Error(err))
				if !e.sleep(time.Second) {
					return
				}
			}
			continue
		}
		if next != from {
			e.mu.Lock()
			e.qoff = next
			e.releaseLocked()
			e.mu.Unlock()
			continue
		}
		select {
		case <-e.ctx.Done():
			return
		case <-arrived:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// index appends units to their buckets, applies the cancel markers among
// them and advances the queue offset.
func (e *Engine) index(units []Unit, next int64) error {
	now := e.clock.Now().UnixMilli()
	groups := make(map[bucketKey][]Entry)
	var order []bucketKey
	var markers []CancelTarget
	for _, u := range units {
		if u.Cancel != nil {
			markers = append(markers, *u.Cancel)
			continue
		}
		en := Entry{DeliverMS: u.DeliverMS, Location: u.Location, Origin: u.Location, Size: u.Size}
		if u.HasOrigin {
			en.Origin = u.Origin
		}
		k := place(en.DeliverMS, now, numLevels-1)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], en)
	}
	for _, k := range order {
		e.amu.Lock()
		err := e.appendEntries(k, groups[k], now)
		e.amu.Unlock()
		if err != nil {
			return err
		}
	}
	if len(markers) > 0 {
		if err := e.applyMarkers(markers); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.qoff = next
	e.releaseLocked()
	e.lastLoc = units[len(units)-1].Location
	e.mu.Unlock()
	return nil
}

// appendEntries appends entries to bucket k (or finer ones if k is being
// split) and, for a level-0 bucket in the loaded range, puts them in the
// wheel. The caller holds e.amu (appends are serialised) but not e.mu: the
// file-system calls (open, write) happen without the engine lock, which
// the firer needs.
func (e *Engine) appendEntries(k bucketKey, ents []Entry, now int64) error {
	e.mu.Lock()
	bf := e.files.get(k, true)
	for bf.removing { // being reclaimed: a late entry recreates it after
		e.mu.Unlock()
		time.Sleep(time.Millisecond)
		e.mu.Lock()
		bf = e.files.get(k, true)
	}
	if bf.splitting {
		e.mu.Unlock()
		// Placed with a clock reading from before the split began: go to
		// the levels below, as the split does.
		regroup := make(map[bucketKey][]Entry)
		for _, en := range ents {
			kk := place(en.DeliverMS, now, k.level-1)
			regroup[kk] = append(regroup[kk], en)
		}
		for kk, g := range regroup {
			if err := e.appendEntries(kk, g, now); err != nil {
				return err
			}
		}
		return nil
	}
	bf.pins++ // its descriptor stays open, it is not reclaimed
	f, path := bf.f, e.files.path(k, idxSuffix)
	e.mu.Unlock()
	unpin := func() {
		e.mu.Lock()
		bf.pins--
		e.mu.Unlock()
	}
	if f == nil {
		nf, err := openBucketFile(path)
		if err != nil {
			unpin()
			return err
		}
		e.mu.Lock()
		if bf.f == nil {
			err = e.files.install(bf, nf)
		} else {
			err = nf.Close()
		}
		f = bf.f
		e.mu.Unlock()
		if err != nil {
			unpin()
			return err
		}
	} else {
		e.mu.Lock()
		e.files.lru.MoveToFront(bf.elem)
		e.mu.Unlock()
	}
	buf := make([]byte, len(ents)*EntrySize)
	for i, en := range ents {
		en.Encode(buf[i*EntrySize:])
	}
	first := bf.n // only appenders (serialised by amu) change it
	if _, err := f.WriteAt(buf, first*EntrySize); err != nil {
		unpin()
		return fmt.Errorf("delay: append to bucket %s: %w", k.name(), err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	bf.pins--
	bf.n += int64(len(ents))
	bf.dirty = true
	e.files.bytes += int64(len(buf))
	e.files.evict()
	if k.level != 0 {
		return nil
	}
	lb := bf.lb
	if lb == nil && k.start <= e.frontier {
		// A bucket of the loaded range that did not exist (or was
		// retired): it is loaded as it is created.
		var err error
		if lb, err = e.installEmptyLocked(bf); err != nil {
			return err
		}
	}
	if lb == nil {
		return nil
	}
	wake := false
	for i, en := range ents {
		_, cancelled := e.cancels[en.Origin]
		if lb.addLate(en, first+int64(i), false) {
			// Wake the firer only for an entry due before what it waits
			// for (0: it waits for nothing; −1: it is busy).
			wake = wake || e.sleepUntil == 0 || (e.sleepUntil > 0 && en.DeliverMS < e.sleepUntil)
			if cancelled {
				i, _ := lb.byOrigin.get(en.Origin)
				w := lb.ents.at(i)
				w.state = stCancelled
				lb.open--
			}
		}
	}
	if wake {
		e.notify()
	}
	return nil
}

// ---- loading ---------------------------------------------------------------

// loadLoop splits and loads buckets every LoadInterval of clock time.
func (e *Engine) loadLoop() {
	defer e.wg.Done()
	for {
		start := e.clock.Now()
		if err := e.loadStep(start.UnixMilli()); err != nil {
			e.log.Error("timer load step failed", zap.Error(err))
		}
		t := TimerAt(e.clock, start.Add(e.opts.LoadInterval))
		select {
		case <-e.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// loadStep splits the coarse buckets that came close, then loads the
// level-0 buckets that start within LoadAhead.
func (e *Engine) loadStep(now int64) error {
	if err := e.resplit(now); err != nil {
		return err
	}
	for l := numLevels - 1; l >= 1; l-- {
		e.mu.Lock()
		var due []bucketKey
		for k := range e.files.m {
			if k.level == l && k.start <= now+splitAhead[l] {
				due = append(due, k)
			}
		}
		e.mu.Unlock()
		slices.SortFunc(due, func(a, b bucketKey) int { return cmp.Compare(a.start, b.start) })
		for _, k := range due {
			if e.ctx.Err() != nil {
				return nil
			}
			if err := e.split(k, now); err != nil {
				return err
			}
		}
	}
	target := floorTo(now+e.opts.LoadAhead.Milliseconds(), granularity[0])
	e.mu.Lock()
	var due []int64
	for start := range e.files.l0 {
		if start <= target {
			due = append(due, start)
		}
	}
	e.mu.Unlock()
	slices.Sort(due)
	for _, start := range due {
		if e.ctx.Err() != nil {
			return nil
		}
		if err := e.load(start); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// Files created while loading: load them now, under the lock, so that
	// the frontier never passes an unloaded file.
	for start, bf := range e.files.l0 {
		if start <= target && bf.lb == nil {
			if err := e.loadLocked(bf); err != nil {
				return err
			}
		}
	}
	e.frontier = max(e.frontier, target)
	e.loadedAt = now
	e.notify()
	return nil
}

// split moves the entries of a coarse bucket into buckets of the levels
// below. The bucket file is then renamed to a tombstone, deleted by the
// next checkpoint once the entries it gave away are synced; a tombstone
// found at start is split again. Copies a repeated split leaves are folded
// together when the level-0 bucket is loaded.
func (e *Engine) split(k bucketKey, now int64) error {
	e.amu.Lock() // no append to it is in progress
	e.mu.Lock()
	bf := e.files.m[k]
	if bf == nil {
		e.mu.Unlock()
		e.amu.Unlock()
		return nil
	}
	bf.splitting = true
	n := bf.n
	e.mu.Unlock()
	e.amu.Unlock()
	if err := e.moveEntries(e.files.path(k, idxSuffix), k.level, n, now); err != nil {
		e.mu.Lock()
		bf.splitting = false
		e.mu.Unlock()
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for bf.pins > 0 { // being synced by the checkpoint
		e.mu.Unlock()
		time.Sleep(time.Millisecond)
		e.mu.Lock()
	}
	tomb, err := e.files.tombstone(bf)
	if err != nil {
		return err
	}
	e.tombs = append(e.tombs, tomb)
	return nil
}

// moveEntries appends the first n entries of a bucket file of level
// (n < 0: all) to buckets below that level, skipping cancelled messages.
func (e *Engine) moveEntries(path string, level int, n, now int64) error {
	if n < 0 {
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("delay: %w", err)
		}
		n = st.Size() / EntrySize
	}
	groups := make(map[bucketKey][]Entry)
	flush := func() error {
		for kk, g := range groups {
			e.mu.Lock()
			live := g[:0]
			for _, en := range g {
				if _, c := e.cancels[en.Origin]; !c {
					live = append(live, en)
				}
			}
			e.mu.Unlock()
			if len(live) > 0 {
				e.amu.Lock()
				err := e.appendEntries(kk, live, now)
				e.amu.Unlock()
				if err != nil {
					return err
				}
			}
			delete(groups, kk)
		}
		return nil
	}
	count := 0
	var ferr error
	err := readEntries(path, 0, n, func(_ int64, en Entry) {
		if ferr != nil {
			return
		}
		kk := place(en.DeliverMS, now, level-1)
		groups[kk] = append(groups[kk], en)
		if count++; count%65536 == 0 {
			ferr = flush()
		}
	})
	if err == nil {
		err = ferr
	}
	if err == nil {
		err = flush()
	}
	return err
}

// resplit splits again the tombstones found at start (their entries may
// not have been synced where they went), then deletes them.
func (e *Engine) resplit(now int64) error {
	for len(e.resplits) > 0 {
		t := e.resplits[0]
		if err := e.moveEntries(t.path, t.level, -1, now); err != nil {
			return err
		}
		if err := e.syncDirty(); err != nil {
			return err
		}
		if err := os.Remove(t.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delay: %w", err)
		}
		e.resplits = e.resplits[1:]
	}
	return nil
}

// syncDirty syncs every dirty bucket file (and the directory if files were
// created).
func (e *Engine) syncDirty() error {
	var fs []*bfile
	e.mu.Lock()
	for el := e.files.lru.Front(); el != nil; el = el.Next() {
		if bf := el.Value.(*bfile); bf.dirty {
			bf.pins++
			bf.dirty = false
			fs = append(fs, bf)
		}
	}
	created := e.files.created
	e.files.created = false
	e.mu.Unlock()
	var errs []error
	for _, bf := range fs {
		if err := fsutil.Fdatasync(bf.f); err != nil {
			errs = append(errs, err)
		}
	}
	if created {
		errs = append(errs, fsutil.SyncDir(e.opts.Dir))
	}
	e.mu.Lock()
	for _, bf := range fs {
		bf.pins--
		if len(errs) > 0 {
			bf.dirty = true
		}
	}
	if len(errs) > 0 {
		e.files.created = e.files.created || created
	}
	e.files.evict()
	e.mu.Unlock()
	return errors.Join(errs...)
}

// load reads a level-0 bucket (most of it without holding the lock) and
// puts it into the wheel.
func (e *Engine) load(start int64) error {
	e.mu.Lock()
	bf := e.files.l0[start]
	if bf == nil || bf.lb != nil {
		e.mu.Unlock()
		return nil
	}
	n := bf.n
	e.mu.Unlock()
	lb, err := e.readBucket(bf, 0, n, nil)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.files.l0[start] != bf || bf.lb != nil {
		return nil
	}
	return e.installLocked(bf, lb, n)
}

// loadLocked loads a (small, just created) level-0 bucket under the lock.
func (e *Engine) loadLocked(bf *bfile) error {
	lb, err := e.readBucket(bf, 0, bf.n, nil)
	if err != nil {
		return err
	}
	return e.installLocked(bf, lb, bf.n)
}

// readBucket reads entries [from, to) of a level-0 bucket and its fired log
// into a new loaded bucket.
func (e *Engine) readBucket(bf *bfile, from, to int64, lb *lbucket) (*lbucket, error) {
	fired, err := readFired(e.files.path(bf.key, firedSuffix))
	if err != nil {
		return nil, err
	}
	if lb == nil {
		lb = newLBucket(bf, int(to-from))
	}
	err = readEntries(e.files.path(bf.key, idxSuffix), from, to, func(i int64, en Entry) {
		lb.addInitial(en, i, bitSet(fired, i))
	})
	if err != nil {
		return nil, err
	}
	lb.sortInitial()
	return lb, nil
}

// installLocked completes a load: it adds the entries appended since n,
// applies cancellations, opens the fired log and puts the bucket in the
// wheel.
func (e *Engine) installLocked(bf *bfile, lb *lbucket, n int64) error {
	if bf.n > n {
		fired, err := readFired(e.files.path(bf.key, firedSuffix))
		if err != nil {
			return err
		}
		add := func(i int64, en Entry) { lb.addLate(en, i, bitSet(fired, i)) }
		if bf.f != nil {
			err = readEntriesFrom(bf.f, e.files.path(bf.key, idxSuffix), n, bf.n, add)
		} else {
			err = readEntries(e.files.path(bf.key, idxSuffix), n, bf.n, add)
		}
		if err != nil {
			return err
		}
	}
	mark := func(origin int64) {
		if i, ok := lb.byOrigin.get(origin); ok && lb.ents.at(i).state == stPending {
			lb.ents.at(i).state = stCancelled
			lb.open--
		}
	}
	if len(e.cancels) < lb.ents.len() {
		for origin := range e.cancels {
			mark(origin)
		}
	} else {
		for i := range int32(lb.ents.len()) {
			if _, ok := e.cancels[lb.ents.at(i).origin]; ok {
				mark(lb.ents.at(i).origin)
			}
		}
	}
	// The fired log is opened (created) at the first delivery.
	lb.firedPath = e.files.path(bf.key, firedSuffix)
	switch st, err := os.Stat(lb.firedPath); {
	case err == nil:
		lb.firedN = st.Size() / 4
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("delay: fired log: %w", err)
	}
	bf.lb = lb
	delete(e.files.l0, bf.key.start)
	i, _ := slices.BinarySearchFunc(e.loaded, lb.key.start, func(x *lbucket, s int64) int { return cmp.Compare(x.key.start, s) })
	e.loaded = slices.Insert(e.loaded, i, lb)
	e.frontier = max(e.frontier, bf.key.start)
	e.notify()
	return nil
}

// installEmptyLocked loads a level-0 bucket that has no entries yet.
func (e *Engine) installEmptyLocked(bf *bfile) (*lbucket, error) {
	lb := newLBucket(bf, 16)
	if err := e.installLocked(bf, lb, bf.n); err != nil {
		return nil, err
	}
	return lb, nil
}

// ---- checkpoint and reclaiming ----------------------------------------------

func (e *Engine) checkpointLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		if err := e.checkpointOnce(); err != nil {
			e.log.Error("timer checkpoint failed", zap.Error(err))
		}
	}
}

// checkpointOnce syncs the bucket files and fired logs, records how far the
// timer queue is indexed, then deletes the buckets that are done.
func (e *Engine) checkpointOnce() error {
	e.mu.Lock()
	cp := checkpoint{Version: 1, QueueOffset: e.qoff, Location: e.lastLoc}
	var bfs []*bfile
	var lbs []*lbucket
	for el := e.files.lru.Front(); el != nil; el = el.Next() {
		bf := el.Value.(*bfile)
		if bf.dirty {
			bf.dirty = false
			bf.pins++
			bfs = append(bfs, bf)
		}
	}
	for _, lb := range e.loaded {
		if lb.firedDirty && lb.fired != nil {
			lb.firedDirty = false
			lb.firedPins++
			lbs = append(lbs, lb)
		}
	}
	created := e.files.created
	e.files.created = false
	tombs := e.tombs
	e.tombs = nil
	e.mu.Unlock()
	var errs []error
	for _, bf := range bfs {
		errs = append(errs, fsutil.BackgroundFdatasync(bf.f))
	}
	for _, lb := range lbs {
		errs = append(errs, fsutil.BackgroundFdatasync(lb.fired))
	}
	if created {
		errs = append(errs, fsutil.SyncDir(e.opts.Dir))
	}
	err := errors.Join(errs...)
	e.mu.Lock()
	for _, bf := range bfs {
		bf.pins--
		if err != nil {
			bf.dirty = true
		}
	}
	for _, lb := range lbs {
		lb.firedPins--
		if err != nil {
			lb.firedDirty = true
		}
	}
	if err != nil {
		e.tombs = append(tombs, e.tombs...)
	}
	e.files.evict()
	e.mu.Unlock()
	if err != nil {
		return err
	}
	// The entries split out of these buckets are durable now.
	for _, t := range tombs {
		if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.log.Error("delete split bucket", zap.String("path", t), zap.Error(err))
		}
	}
	if cp != e.ckpt {
		b, _ := json.Marshal(cp)
		if err := fsutil.WriteFileAtomic(filepath.Join(e.opts.Dir, checkpointName), b, 0o644); err != nil {
			return fmt.Errorf("delay: checkpoint: %w", err)
		}
		e.mu.Lock()
		e.ckpt = cp
		e.mu.Unlock()
	}
	return e.reclaim()
}

// reclaim deletes level-0 buckets that are over, fully delivered and whose
// every entry is covered by the checkpoint (so no replay can bring one
// back), and compacts the cancel log.
func (e *Engine) reclaim() error {
	now := e.clock.Now().UnixMilli()
	e.mu.Lock()
	var gone []*bfile
	keep := e.loaded[:0]
	for _, lb := range e.loaded {
		if lb.key.end() <= now && lb.open == 0 && lb.inflight == 0 && lb.maxLoc <= e.ckpt.Location &&
			lb.bf.pins == 0 && lb.firedPins == 0 && lb.key.start <= e.frontier {
			if lb.fired != nil {
				_ = lb.fired.Close()
				lb.fired = nil
			}
			lb.bf.lb = nil
			e.files.startRemove(lb.bf)
			gone = append(gone, lb.bf)
			continue
		}
		keep = append(keep, lb)
	}
	clear(e.loaded[len(keep):])
	e.loaded = keep
	err := e.compactCancelsLocked()
	e.mu.Unlock()
	// Unlinking can be slow: not under the lock (appenders to these
	// buckets wait for finishRemove).
	errs := []error{err}
	for _, bf := range gone {
		errs = append(errs, e.files.deleteBucketFiles(bf.key))
	}
	e.mu.Lock()
	for _, bf := range gone {
		e.files.finishRemove(bf)
	}
	e.mu.Unlock()
	return errors.Join(errs...)
}
