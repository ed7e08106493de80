package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/consumequeue"
	"github.com/bolide-mq/bolide/indexfile"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/notify"
)

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store: closed")

// Store is a broker's message store.
type Store struct {
	opts Options
	log  *zap.Logger

	lockFile *os.File
	cpFile   *checkpointFile
	clog     *commitlog.Log
	cqs      *consumequeue.Store
	index    *indexfile.Store // nil when indexing is off

	// dispatched is the offset up to which every record has been handed to
	// the ConsumeQueues and IndexFiles; only the dispatcher writes it.
	dispatched     atomic.Int64
	lastStoreTime  atomic.Int64
	dispatchErrors atomic.Int64
	dispatchedSig  notify.Signal
	arrival        atomic.Pointer[ArrivalFunc]

	samplesMu  sync.Mutex
	samples    []int64      // recent dispatched record boundaries, oldest first
	logFrom    int64        // last checkpoint's LogFrom
	lastSample int64        // dispatcher-owned: newest boundary in samples
	sampleGap  atomic.Int64 // spacing of samples: sampleEvery, doubled while the ring is full

	// Room for dispatch (room.go): every record below planned has room
	// for its queue and index files; the dispatcher never passes it, and
	// Put acknowledges nothing above it.
	res            *reserve
	planMu         sync.Mutex // serialises planning
	dispatchMu     sync.Mutex // held by the dispatcher while it dispatches one record
	planned        atomic.Int64
	plannedSig     notify.Signal                   // planned moved, or the last PutBatch in flight returned
	putting        atomic.Int64                    // PutBatch calls in flight
	plannedEntries int64                           // index entries of the records planned since Open; planMu
	settledEntries atomic.Int64                    // index entries of the records dispatched since Open
	planQueues     map[touched]*consumequeue.Queue // the planner's; planMu
	newMu          sync.Mutex                      // guards newFiles, heldBig and newOrder
	newFiles       map[queueFile]bool              // planned new files; true: larger than a first file
	heldBig        int64                           // how many of newFiles are true
	newOrder       []plannedFile                   // planned records that start a queue file, in log order
	nextNewFile    atomic.Int64                    // newOrder[0].off, MaxInt64 when empty
	decoded        decodedRing                     // records the planner decoded, for the dispatcher
	full           atomic.Pointer[error]           // why puts are refused, nil when they are not
	roomSig        notify.Signal                   // the keeper found room
	// recovering: Open could not rebuild the queues up to recoverEnd for
	// lack of room; puts are refused until the dispatcher gets there.
	recovering atomic.Bool
	recoverEnd int64

	// seen is the dispatcher's scratch map of queues a batch touched.
	seen map[touched]*consumequeue.Queue
	// dispatchFailed: the last dispatch attempt stopped at a record.
	dispatchFailed bool

	// Truncation (truncate.go): the dispatcher holds pauseMu while it plans
	// and dispatches, TruncateTo holds it to pause dispatch; retentionMu
	// keeps retention and truncation apart. Lock order: retentionMu,
	// pauseMu, planMu, cpMu, dispatchMu.
	pauseMu     sync.Mutex
	retentionMu sync.Mutex
	// pauseWanted makes the dispatcher stop between two records, so that
	// TruncateTo gets pauseMu without waiting for a long backlog.
	pauseWanted atomic.Bool
	// stepping is set while the dispatcher goroutine holds pauseMu for a
	// step (dispatchInline tells it of new records only then).
	stepping atomic.Bool
	// dispatchLater is dispatchInline as one func value, for
	// afterreply.Defer (a method value made per put would allocate).
	dispatchLater func()
	// dispatchLimit: only records ending at or below it are dispatched
	// (SetDispatchLimit); limitSig fires when it rises.
	dispatchLimit atomic.Int64
	limitSig      notify.Signal
	// truncateHook, set by tests, runs after each step of TruncateTo; an
	// error stops it there, as a crash would.
	truncateHook func(truncateStep) error

	recovery    Recovery
	cpMu        sync.Mutex // serialises checkpoint writes
	checkpoints int64      // checkpoints taken; cpMu
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error
	closed      atomic.Bool
}

// ArrivalFunc is called by the dispatcher after records of a queue become
// visible; maxOffset is the queue's new max offset. It must not block.
type ArrivalFunc func(topic string, queueID int32, maxOffset int64)

// Recovery reports what Open found.
type Recovery struct {
	// CleanShutdown is false when the abort marker was present.
	CleanShutdown bool
	// Checkpoint reports whether a checkpoint file was found.
	Checkpoint bool
	// Log is the CommitLog's own recovery report.
	Log commitlog.RecoveryInfo
	// Journal is what the ConsumeQueues found in their staging journal.
	Journal consumequeue.JournalState
	// DispatchFrom is where dispatch was rebuilt from; Redispatched counts
	// the records it rebuilt before Open returned.
	DispatchFrom int64
	Redispatched int64
	Duration     time.Duration
}

const (
	lockName       = "lock"
	abortName      = "abort"
	checkpointName = "checkpoint"
	reserveName    = "reserve"
)

// Open opens (creating if needed) the store, recovers it and starts the
// dispatcher, the checkpointer and retention.
func Open(opts Options, log *zap.Logger) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	start := time.Now()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{opts: opts, log: log, newFiles: make(map[queueFile]bool), planQueues: make(map[touched]*consumequeue.Queue)}
	s.nextNewFile.Store(math.MaxInt64)
	s.dispatchLimit.Store(math.MaxInt64)
	s.dispatchLater = s.dispatchInline
	lf, err := lockDir(filepath.Join(opts.Dir, lockName))
	if err != nil {
		return nil, err
	}
	s.lockFile = lf
	if err := s.open(); err != nil {
		s.closeParts()
		return nil, err
	}
	s.recovery.Duration = time.Since(start)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(4)
	go s.dispatchLoop()
	go s.keepRoom()
	go s.every(s.opts.CheckpointInterval, s.checkpointOnce)
	go s.every(s.opts.RetentionInterval, s.retentionOnce)
	if s.opts.ReleaseInterval > 0 {
		s.wg.Add(1)
		go s.every(s.opts.ReleaseInterval, s.releaseResident)
	}
	s.logResources()
	log.Info("store opened", zap.String("dir", opts.Dir),
		zap.Bool("cleanShutdown", s.recovery.CleanShutdown),
		zap.Int64("dispatchFrom", s.recovery.DispatchFrom),
		zap.Int64("redispatched", s.recovery.Redispatched),
		zap.Int64("unitsFromJournal", s.recovery.Journal.Units),
		zap.Duration("took", s.recovery.Duration))
	return s, nil
}

// logResources says at start-up what the store needs of the process's
// limits: the descriptors and mappings it holds (ConsumeQueue files are
// read with pread and hold a descriptor only while in use, up to their
// MaxOpenFiles between flushes; CommitLog segments and IndexFiles are
// mapped and keep a descriptor each), against RLIMIT_NOFILE and
// vm.max_map_count. It warns when the bounds come close to the limits:
// connections need descriptors too.
func (s *Store) logResources() {
	segs := len(s.clog.Segments())
	idx := 0
	if s.index != nil {
		idx = s.index.Files()
	}
	cqFiles, cqOpen := s.cqs.Files(), s.cqs.MaxOpenFiles()
	fds := int64(segs+idx) + cqOpen + 16 // lock, checkpoint, directories
	maps := int64(segs + idx)
	nofile, ferr := fsutil.OpenFileLimit()
	maxMaps, merr := fsutil.MaxMapCount()
	fields := []zap.Field{zap.Int("commitLogSegments", segs), zap.Int("indexFiles", idx),
		zap.Int("consumeQueueFiles", cqFiles), zap.Int64("consumeQueueOpenFilesMax", cqOpen),
		zap.Int64("descriptorsNeeded", fds), zap.Int64("mappingsNeeded", maps),
		zap.Uint64("rlimitNofile", nofile), zap.Int64("vmMaxMapCount", maxMaps)}
	if err := errors.Join(ferr, merr); err != nil {
		fields = append(fields, zap.Error(err))
	}
	switch {
	case ferr == nil && uint64(fds)*2 > nofile:
		s.log.Warn("store: the open-file limit leaves little room for connections; raise ulimit -n", fields...)
	case merr == nil && maps*2 > maxMaps:
		s.log.Warn("store: vm.max_map_count is close to what the store maps; raise it (RocketMQ's deployment guide uses 655360)", fields...)
	default:
		s.log.Info("store resources", fields...)
	}
}

func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: %s is in use by another process: %w", filepath.Dir(path), err)
	}
	return f, nil
}

// open recovers the parts in order: CommitLog from the checkpoint, then the
// queues and index truncated to what the checkpoint says is durable and
// rebuilt from the log up to its end.
func (s *Store) open() error {
	o := s.opts
	abortPath := filepath.Join(o.Dir, abortName)
	_, statErr := os.Stat(abortPath)
	s.recovery.CleanShutdown = errors.Is(statErr, os.ErrNotExist)
	cpFile, cp, found, err := openCheckpoint(filepath.Join(o.Dir, checkpointName))
	if err != nil {
		return err
	}
	s.cpFile = cpFile
	s.recovery.Checkpoint = found
	if !s.recovery.CleanShutdown {
		s.log.Warn("store was not shut down cleanly; recovering from the checkpoint",
			zap.Int64("logFrom", cp.LogFrom), zap.Int64("dispatchFrom", cp.DispatchFrom))
	}
	// A truncation that a crash interrupted is finished first: the log is
	// verified from a boundary at or below its target (the checkpoint may
	// have been written before it, above the cut) and cut there; the
	// queues and index are then cut by the recovery below, which trusts
	// nothing past the log's end.
	intent, pending, err := readIntent(o.Dir)
	if err != nil {
		return err
	}
	logFrom := cp.LogFrom
	if pending {
		// The segment start below the target is a record boundary whatever
		// the intent says (records never cross segments); the target
		// itself is checked once the log is open.
		logFrom = min(logFrom, intent-intent%o.CommitLog.SegmentSize)
		s.log.Warn("finishing an interrupted truncation", zap.Int64("to", intent), zap.Int64("logFrom", logFrom))
	}
	clogOpts := o.CommitLog
	clogOpts.AppendersDispatch = true // PutBatch dispatches its own records (dispatchInline)
	s.clog, err = commitlog.Open(clogOpts, logFrom, s.log.Named("commitlog"))
	if err != nil {
		return err
	}
	if pending {
		if end := s.clog.MaxOffset(); intent < end {
			if err := s.clog.Truncate(intent); err != nil {
				return fmt.Errorf("store: finish the truncation in %s: %w", filepath.Join(o.Dir, intentName), err)
			}
		} else if intent > end {
			s.log.Warn("the log recovered to below the interrupted truncation's target", zap.Int64("to", intent), zap.Int64("logEnd", end))
		}
		cp.LogFrom = logFrom
	}
	s.recovery.Log = s.clog.Recovery()
	if found && !pending {
		s.checkDurableEnd(cp.FlushedOffset)
	}
	if !found {
		// Without a checkpoint the whole log is verified: worth a warning
		// when there was a log, not for a new (or empty) store.
		if rec := s.recovery.Log; rec.End == 0 && !rec.Torn && rec.RemovedSegments == 0 {
			s.log.Info("new store: no checkpoint and an empty log")
		} else {
			s.log.Warn("no valid checkpoint; verified the whole log", zap.Int64("records", rec.Records), zap.Int64("end", rec.End))
		}
	}
	var sizes [spareKinds]int64
	sizes[spareQueue] = o.ConsumeQueue.FileSize()
	if first := o.ConsumeQueue.FirstFileSize(); first < sizes[spareQueue] {
		sizes[spareQueueSmall] = first
	}
	if o.IndexEnabled {
		sizes[spareIndex] = o.Index.FileSize()
	}
	s.res, err = openReserve(filepath.Join(o.Dir, reserveName), sizes,
		[spareKinds]int{o.ReserveQueueFiles, o.ReserveFirstQueueFiles, o.ReserveIndexFiles}, s.log.Named("reserve"))
	if err != nil {
		return err
	}
	o.ConsumeQueue.Spare = func(path string, size int64) (*os.File, error) { return s.takeSpare(spareQueue, path, size) }
	o.Index.Spare = func(path string, size int64) (*os.File, error) { return s.takeSpare(spareIndex, path, size) }
	s.cqs, err = consumequeue.Open(filepath.Join(o.Dir, "consumequeue"), o.ConsumeQueue, s.log.Named("consumequeue"))
	if err != nil {
		return err
	}
	if o.IndexEnabled {
		s.index, err = indexfile.Open(filepath.Join(o.Dir, "index"), o.Index, s.log.Named("index"))
		if err != nil {
			return err
		}
	}
	end := s.clog.MaxOffset()
	from := cp.DispatchFrom
	s.recovery.Journal = s.cqs.Replayed()
	if !s.recovery.Journal.Covers(cp.Journal) {
		// Units the checkpoint left to the staging journal are not all
		// back: rebuild from the first of them.
		from = cp.StagedFrom
		s.log.Warn("the ConsumeQueues' staging journal does not cover the checkpoint; rebuilding from its staged units",
			zap.Int64("stagedFrom", cp.StagedFrom), zap.Int64("dispatchFrom", cp.DispatchFrom),
			zap.Uint64("journalGen", s.recovery.Journal.Gen), zap.Int64("journalEnd", s.recovery.Journal.End),
			zap.Uint64("checkpointJournalGen", cp.Journal.Gen), zap.Int64("checkpointJournalEnd", cp.Journal.End),
			zap.Bool("lost", s.recovery.Journal.Lost))
	}
	from = min(from, end)
	if from < s.clog.MinOffset() {
		from = s.clog.MinOffset()
	}
	if err := s.cqs.TruncateAfter(from); err != nil {
		return fmt.Errorf("store: truncate consume queues: %w", err)
	}
	if s.index != nil {
		if err := s.index.TruncateAfter(from); err != nil {
			return fmt.Errorf("store: truncate index: %w", err)
		}
	}
	// The queues recover their min offsets from their files alone: move
	// them past the units whose messages retention has deleted. Only the
	// removal of files can fail, after the min offsets moved; a later
	// retention run tries again.
	if err := s.dropBelowLog(); err != nil {
		s.log.Warn("could not remove queue or index files below the log's start", zap.Error(err))
	}
	s.dispatched.Store(from)
	s.planned.Store(from)
	s.lastStoreTime.Store(cp.StoreTimestamp)
	s.recovery.DispatchFrom = from
	s.logFrom = min(cp.LogFrom, from)
	s.samples = []int64{s.logFrom}
	s.lastSample = s.logFrom
	// Keep the reserve, then rebuild what the checkpoint did not cover,
	// before any append. On a full disk the store still opens: it serves
	// what it could rebuild and refuses puts until there is room.
	if err := s.res.fill(); err != nil {
		s.setFull(fmt.Errorf("%w: the reserve of spare queue and index files cannot be kept: %w", commitlog.ErrDiskFull, err))
	}
	planErr := s.planTo(end)
	n, err := s.dispatchAvailable(s.planned.Load())
	s.recovery.Redispatched = n
	if err != nil && !fsutil.IsNoSpace(err) {
		return fmt.Errorf("store: rebuild queues from %d: %w", from, err)
	}
	if d := s.dispatched.Load(); d != end {
		if err == nil && planErr == nil {
			return fmt.Errorf("store: rebuilt queues up to %d, log ends at %d", d, end)
		}
		s.recovering.Store(true)
		s.recoverEnd = end
		s.setFull(fmt.Errorf("%w: %w", commitlog.ErrDiskFull, errors.Join(planErr, err)))
		s.log.Error("disk full: the queues are rebuilt up to the middle of the log only; "+
			"serving what they hold and refusing puts until the dispatcher reaches the end",
			zap.Int64("dispatched", d), zap.Int64("logEnd", end), zap.NamedError("plan", planErr), zap.Error(err))
	} else {
		s.adoptQueueOffsets()
	}
	// Make the rebuilt state durable before declaring the store running.
	if err := s.writeCheckpoint(); err != nil {
		return err
	}
	if pending {
		if err := s.removeIntent(); err != nil {
			return err
		}
		s.log.Warn("interrupted truncation finished", zap.Int64("to", intent), zap.Int64("logEnd", s.clog.MaxOffset()))
	}
	if err := os.WriteFile(abortPath, nil, 0o644); err != nil {
		return fmt.Errorf("store: create abort marker: %w", err)
	}
	return nil
}

// checkDurableEnd reports as torn a log that recovered to below durable,
// the end the last checkpoint saw flushed. The CommitLog's scan alone cannot
// tell lost records from a tail never written when what replaced them reads
// as zeros: a zeroed page that starts at a record, or within the first bytes
// of its length field, ends the scan as cleanly as the end of the data does.
// A truncation lowers the end legitimately, but it writes a checkpoint
// before its intent file goes, so none is pending here.
func (s *Store) checkDurableEnd(durable int64) {
	rec := &s.recovery.Log
	if rec.End >= durable {
		return
	}
	reason := fmt.Sprintf("the log ends at %d, below the end %d the last checkpoint saw durable", rec.End, durable)
	if rec.Torn {
		rec.TornReason += "; " + reason
	} else {
		rec.Torn, rec.TornReason = true, reason
	}
	s.log.Error("records the last checkpoint saw durable are missing from the CommitLog",
		zap.Int64("logEnd", rec.End), zap.Int64("durableEnd", durable), zap.Int64("lostBytes", durable-rec.End))
}

// adoptQueueOffsets gives the CommitLog the ConsumeQueues' next offsets,
// raised by records not dispatched yet (adoptQueueOffsetsTail).
func (s *Store) adoptQueueOffsets() int { return s.adoptQueueOffsetsTail() }

// CommitLog exposes the log for replication and tools.
func (s *Store) CommitLog() *commitlog.Log { return s.clog }

// Recovery reports what Open found and did.
func (s *Store) Recovery() Recovery { return s.recovery }

// Options returns the store's options.
func (s *Store) Options() Options { return s.opts }

// SetArrivalListener installs the function the dispatcher calls when records
// become visible in a queue (long polling hooks in here).
func (s *Store) SetArrivalListener(fn ArrivalFunc) {
	if fn == nil {
		s.arrival.Store(nil)
		return
	}
	s.arrival.Store(&fn)
}

// DispatchedOffset is the CommitLog offset up to which ConsumeQueues and
// IndexFiles are built.
func (s *Store) DispatchedOffset() int64 { return s.dispatched.Load() }

// DispatchBehind is how many CommitLog bytes are written but not dispatched.
func (s *Store) DispatchBehind() int64 { return s.clog.MaxOffset() - s.dispatched.Load() }

// DispatchErrors counts records the dispatcher could not index.
func (s *Store) DispatchErrors() int64 { return s.dispatchErrors.Load() }

// WaitDispatched blocks until everything below off is dispatched.
func (s *Store) WaitDispatched(ctx context.Context, off int64) error {
	for {
		ch := s.dispatchedSig.C()
		if s.dispatched.Load() >= off {
			return nil
		}
		if s.closed.Load() {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Flush makes the CommitLog durable, then the queues and index, and writes a
// checkpoint.
func (s *Store) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.clog.Flush(); err != nil {
		return err
	}
	return s.writeCheckpoint()
}

// Close stops the background work, dispatches and flushes everything,
// writes a final checkpoint, removes the abort marker and releases the
// directory lock. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.wg.Wait()
		// Puts still in flight dispatch nothing from here on (dispatchInline
		// checks closed under pauseMu).
		s.pauseMu.Lock()
		defer s.pauseMu.Unlock()
		var errs []error
		if err := s.clog.Flush(); err != nil && !errors.Is(err, commitlog.ErrClosed) {
			errs = append(errs, err)
		}
		// Records without room stay in the log, unacknowledged; the next
		// Open dispatches them once there is room.
		if err := s.planTo(s.clog.Readable()); err != nil {
			s.log.Warn("disk full: records at the end of the log are left undispatched", zap.Error(err))
		}
		if _, err := s.dispatchAvailable(s.planned.Load()); err != nil {
			errs = append(errs, err)
		}
		if err := s.writeCheckpoint(); err != nil {
			errs = append(errs, err)
		}
		clean := len(errs) == 0 && s.clog.Err() == nil
		errs = append(errs, s.closeParts())
		if clean {
			if err := os.Remove(filepath.Join(s.opts.Dir, abortName)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if s.lockFile != nil {
			errs = append(errs, s.lockFile.Close())
		}
		s.dispatchedSig.Notify()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *Store) closeParts() error {
	var errs []error
	if s.clog != nil {
		errs = append(errs, s.clog.Close())
	}
	if s.cqs != nil {
		errs = append(errs, s.cqs.Close())
	}
	if s.index != nil {
		errs = append(errs, s.index.Close())
	}
	if s.cpFile != nil {
		errs = append(errs, s.cpFile.close())
	}
	if s.ctx == nil && s.lockFile != nil { // failed Open
		errs = append(errs, s.lockFile.Close())
	}
	return errors.Join(errs...)
}
