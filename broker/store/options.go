package store

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/consumequeue"
	"github.com/bolide-mq/bolide/indexfile"
	"github.com/bolide-mq/bolide/message"
)

// Options configure a Store. Sub-directories of Dir:
//
//	commitlog/      CommitLog segments
//	consumequeue/   ConsumeQueues
//	index/          IndexFiles
//	reserve/        spare ConsumeQueue and IndexFile files (reserve.go)
//	checkpoint      what is durable (see checkpoint.go)
//	abort           exists while the store is open
//	lock            flock'ed while the store is open
type Options struct {
	Dir          string
	CommitLog    commitlog.Options
	ConsumeQueue consumequeue.Options
	Index        indexfile.Options
	// IndexEnabled builds IndexFiles (true).
	IndexEnabled bool
	Retention    commitlog.RetentionPolicy
	// RetentionInterval is how often retention runs (10 s).
	RetentionInterval time.Duration
	// CheckpointInterval is how often ConsumeQueues and IndexFiles are
	// flushed and the checkpoint written (1 s).
	CheckpointInterval time.Duration
	// QueueFlushLag and QueueFlushEvery: when many queues are written
	// (more than consumequeue.Options.SyncFSAbove between two
	// checkpoints), a periodic checkpoint leaves the units of a queue
	// that has less than a page of them staged, unless they point more
	// than QueueFlushLag bytes behind the dispatched end, and every
	// QueueFlushEvery-th checkpoint flushes everything. The units left
	// staged are appended to the ConsumeQueues' staging journal, which a
	// recovery reads back; only when the journal is damaged does it
	// dispatch again from the first of them, at most about QueueFlushLag
	// bytes more (1 GiB, 60: a light queue is written about once a
	// minute, as RocketMQ's are; a zero lag flushes every queue at every
	// checkpoint). The staged units are held in memory meanwhile: 20
	// bytes each.
	QueueFlushLag   int64
	QueueFlushEvery int
	// ResidentTail and ReleaseInterval: every ReleaseInterval the mapped
	// CommitLog pages more than ResidentTail bytes behind the dispatched
	// end are dropped from the process's resident set (the page cache
	// keeps them; see commitlog.Log.ReleaseResident), so the broker's RSS
	// does not grow with the log it has read (64 MiB, 10 s; a zero
	// interval turns it off).
	ResidentTail    int64
	ReleaseInterval time.Duration
	// RecoverWindow is how far (bytes) behind the durable end of the log the
	// checkpoint's verification point is kept, so that recovery re-verifies
	// at least the last RecoverWindow bytes (4 MiB).
	RecoverWindow int64
	// ReserveQueueFiles and ReserveIndexFiles are how many spare
	// ConsumeQueue files and IndexFiles the store keeps preallocated in
	// <dir>/reserve, so that dispatch has room for every acknowledged
	// message when the disk fills up (4 and 1; see "Full disk" in the
	// package documentation).
	ReserveQueueFiles int
	ReserveIndexFiles int
	// ReserveFirstQueueFiles is how many spare first ConsumeQueue files
	// (consumequeue.Options.FirstFileSize, 40 960 bytes by default) the
	// reserve keeps besides (64): a new queue's first file takes one of
	// those, or a full-size one (see "Full disk").
	ReserveFirstQueueFiles int
	// StoreHost is written into every record as its store host and used in
	// offset message ids.
	StoreHost netip.AddrPort
	// MaxMessageSize bounds a message body (4 MiB).
	MaxMessageSize int
	// TagCode computes the ConsumeQueue tag code of a record; the default is
	// the tags hash. The broker overrides it for schedule topics. It takes
	// the Dispatch by value, so that calling it leaves the dispatcher's on
	// the stack.
	TagCode func(d message.Dispatch) int64
	// Now is the clock (time.Now).
	Now func() time.Time
}

// DefaultOptions returns production defaults for a store under dir.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:                    dir,
		CommitLog:              commitlog.DefaultOptions(filepath.Join(dir, "commitlog")),
		ConsumeQueue:           consumequeue.DefaultOptions(),
		Index:                  indexfile.DefaultOptions(),
		IndexEnabled:           true,
		Retention:              commitlog.DefaultRetention(),
		RetentionInterval:      10 * time.Second,
		CheckpointInterval:     time.Second,
		QueueFlushLag:          1 << 30,
		QueueFlushEvery:        60,
		RecoverWindow:          4 << 20,
		ReserveQueueFiles:      4,
		ReserveIndexFiles:      1,
		ReserveFirstQueueFiles: 64,
		ResidentTail:           64 << 20,
		ReleaseInterval:        10 * time.Second,
		StoreHost:              netip.MustParseAddrPort("127.0.0.1:10911"),
		MaxMessageSize:         message.DefaultMaxBodySize,
		Now:                    time.Now,
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("store: Dir is empty"))
	}
	if o.CommitLog.Dir == "" {
		o.CommitLog.Dir = filepath.Join(o.Dir, "commitlog")
	}
	if err := o.CommitLog.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.ConsumeQueue.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.IndexEnabled {
		if err := o.Index.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := o.Retention.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.RetentionInterval <= 0 || o.CheckpointInterval <= 0 {
		errs = append(errs, fmt.Errorf("store: RetentionInterval (%v) and CheckpointInterval (%v) must be positive", o.RetentionInterval, o.CheckpointInterval))
	}
	if o.ReserveQueueFiles < 0 || o.ReserveIndexFiles < 0 || o.ReserveFirstQueueFiles < 0 {
		errs = append(errs, fmt.Errorf("store: ReserveQueueFiles (%d), ReserveFirstQueueFiles (%d) and ReserveIndexFiles (%d) must not be negative",
			o.ReserveQueueFiles, o.ReserveFirstQueueFiles, o.ReserveIndexFiles))
	}
	if o.RecoverWindow < 0 {
		errs = append(errs, fmt.Errorf("store: RecoverWindow %d must not be negative", o.RecoverWindow))
	}
	if o.MaxMessageSize <= 0 || o.MaxMessageSize > o.CommitLog.MaxRecordSize()-64<<10 {
		errs = append(errs, fmt.Errorf("store: MaxMessageSize %d must be positive and leave room in a %d-byte segment", o.MaxMessageSize, o.CommitLog.SegmentSize))
	}
	if !o.StoreHost.IsValid() {
		errs = append(errs, errors.New("store: StoreHost is not set"))
	}
	return errors.Join(errs...)
}
