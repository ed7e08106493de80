package commitlog

import (
	"errors"
	"fmt"
	"time"

	"github.com/bolide-mq/bolide/message"
)

// FlushMode says what an acknowledged append promises.
type FlushMode int

const (
	// FlushAsync acknowledges once the record is in the log; a background
	// flusher makes it durable every FlushInterval.
	FlushAsync FlushMode = iota
	// FlushSync acknowledges only once the record is durable (group commit).
	FlushSync
)

func (m FlushMode) String() string {
	if m == FlushSync {
		return "sync"
	}
	return "async"
}

// ParseFlushMode parses "sync" or "async".
func ParseFlushMode(s string) (FlushMode, error) {
	switch s {
	case "sync", "SYNC_FLUSH":
		return FlushSync, nil
	case "async", "ASYNC_FLUSH", "":
		return FlushAsync, nil
	}
	return 0, fmt.Errorf("unknown flush mode %q (want sync or async)", s)
}

// WriteMode says how appended bytes reach the segment file. Reads always go
// through a shared mapping.
type WriteMode int

const (
	// WriteAuto picks the measured winner of each flush mode: WriteMmap
	// with FlushAsync, WritePwrite with FlushSync. docs/BENCHMARKS.md has
	// the measurements behind the choice.
	WriteAuto WriteMode = iota
	// WriteMmap copies records straight into the writable mapping; they are
	// readable at once and msync makes them durable.
	WriteMmap
	// WritePwrite stages records in memory and writes them with pwrite(2)
	// into the same preallocated file; fdatasync makes them durable. Readers
	// see records once they are written to the file.
	WritePwrite
)

func (m WriteMode) String() string {
	switch m {
	case WriteMmap:
		return "mmap"
	case WritePwrite:
		return "pwrite"
	}
	return "auto"
}

// ParseWriteMode parses "auto", "mmap" or "pwrite".
func ParseWriteMode(s string) (WriteMode, error) {
	switch s {
	case "auto", "":
		return WriteAuto, nil
	case "mmap":
		return WriteMmap, nil
	case "pwrite":
		return WritePwrite, nil
	}
	return 0, fmt.Errorf("unknown write mode %q (want auto, mmap or pwrite)", s)
}

// Options configure a Log.
type Options struct {
	// Dir holds the segment files.
	Dir string
	// SegmentSize is the size of every segment file (1 GiB by default).
	SegmentSize int64
	// FlushMode is FlushAsync (default) or FlushSync.
	FlushMode FlushMode
	// WriteMode is how bytes reach the file; WriteAuto by default.
	WriteMode WriteMode
	// FlushInterval is the async flusher's period (500 ms).
	FlushInterval time.Duration
	// FlushLeastPages is the number of dirty 4 KiB pages below which a
	// periodic async flush is skipped (4).
	FlushLeastPages int
	// FlushThoroughInterval forces a full async flush at least this often (10 s).
	FlushThoroughInterval time.Duration
	// GroupCommitWait bounds how long the sync-mode flusher's eager
	// gather waits for concurrent appenders to join a flush (200 µs; 0
	// flushes at once and turns regrouping off as well, groupcommit.go).
	GroupCommitWait time.Duration
	// SyncFlushTimeout bounds how long a sync-mode append waits for its flush
	// before it fails with ErrFlushTimeout (5 s).
	SyncFlushTimeout time.Duration
	// DiskFullRatio refuses appends when the file system holding Dir is more
	// used than this fraction (0.90).
	DiskFullRatio float64
	// DiskCheckInterval is how often disk usage is sampled (1 s).
	DiskCheckInterval time.Duration
	// ZeroAhead is how far ahead of the writer the active segment is
	// written with zeros in sync flush mode (with pwrite), so that a durable
	// flush need not record newly written extents (zeroahead.go); 0 turns
	// it off, and also the zeros written in mmap write mode into the pages
	// made writable ahead of the writer (mmapwrite.go). 32 MiB by default.
	ZeroAhead int64
	// StageLimit is how many bytes the pwrite path stages before an appender
	// writes them itself (1 MiB).
	StageLimit int
	// Now is the clock for store timestamps; time.Now by default.
	Now func() time.Time
	// OnFlush, if set, is told how long each flush that made bytes durable
	// took and how many bytes it covered (for metrics; it must not block).
	OnFlush func(took time.Duration, bytes int64)
	// AppendersDispatch says that whoever appends with Append, AppendBatch
	// or AppendNoWait hands the records on itself (the store dispatches
	// its own puts), so in async flush mode those appends do not fire
	// ReadableChanged: a reader parked on it is not woken once per
	// append. AppendRaw (replication) and flushes still fire it.
	AppendersDispatch bool
	// CacheWindow bounds the page cache the log keeps: four times a second
	// the bytes more than CacheWindow behind the flushed end are dropped
	// from it (dropBehind), so the log reuses a bounded amount of memory.
	// 0 leaves the page cache to the kernel. DefaultCacheWindow (512 MiB)
	// in DefaultOptions.
	CacheWindow int64
	// ReadAhead is how far ahead of a reader that calls Prefetch the log
	// asks the kernel to read (DefaultReadAhead, 16 MiB, when 0; negative
	// turns read-ahead off).
	ReadAhead int64
}

// DefaultCacheWindow is DefaultOptions' CacheWindow: half a default
// segment, several seconds of appends at the rates a broker takes, so
// consumers at the tail and short delays read from memory. A larger
// window makes a fresh broker grow the page cache for longer before it
// reuses its own pages: on a virtual machine whose memory the host backs
// lazily, bulk appends cost about twice the CPU over that stretch
// (docs/BENCHMARKS.md, "2026-12-06, forenoon").
const DefaultCacheWindow = 512 << 20

// DefaultOptions returns the production defaults for dir.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:                   dir,
		SegmentSize:           1 << 30,
		CacheWindow:           DefaultCacheWindow,
		FlushMode:             FlushAsync,
		WriteMode:             WriteAuto,
		FlushInterval:         500 * time.Millisecond,
		FlushLeastPages:       4,
		FlushThoroughInterval: 10 * time.Second,
		GroupCommitWait:       200 * time.Microsecond,
		SyncFlushTimeout:      5 * time.Second,
		DiskFullRatio:         0.90,
		DiskCheckInterval:     time.Second,
		StageLimit:            1 << 20,
		ZeroAhead:             32 << 20,
		ReadAhead:             DefaultReadAhead,
		Now:                   time.Now,
	}
}

// minSegmentSize keeps a segment big enough for the largest message body
// tests use plus a blank; production uses 1 GiB.
const minSegmentSize = 64 << 10

// Validate checks the options and names the first bad field.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("commitlog: Dir is empty"))
	}
	if o.SegmentSize < minSegmentSize || o.SegmentSize%4096 != 0 || o.SegmentSize > 1<<40 {
		errs = append(errs, fmt.Errorf("commitlog: SegmentSize %d must be a multiple of 4096 between %d and 1 TiB", o.SegmentSize, minSegmentSize))
	}
	if o.FlushMode != FlushAsync && o.FlushMode != FlushSync {
		errs = append(errs, fmt.Errorf("commitlog: FlushMode %d unknown", o.FlushMode))
	}
	if o.WriteMode < WriteAuto || o.WriteMode > WritePwrite {
		errs = append(errs, fmt.Errorf("commitlog: WriteMode %d unknown", o.WriteMode))
	}
	if o.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("commitlog: FlushInterval %v must be positive", o.FlushInterval))
	}
	if o.CacheWindow < 0 {
		errs = append(errs, fmt.Errorf("commitlog: CacheWindow %d must not be negative", o.CacheWindow))
	}
	if o.FlushThoroughInterval <= 0 {
		errs = append(errs, fmt.Errorf("commitlog: FlushThoroughInterval %v must be positive", o.FlushThoroughInterval))
	}
	if o.GroupCommitWait < 0 || o.GroupCommitWait > time.Second {
		errs = append(errs, fmt.Errorf("commitlog: GroupCommitWait %v must be in [0, 1s]", o.GroupCommitWait))
	}
	if o.SyncFlushTimeout <= 0 {
		errs = append(errs, fmt.Errorf("commitlog: SyncFlushTimeout %v must be positive", o.SyncFlushTimeout))
	}
	if o.DiskFullRatio <= 0 || o.DiskFullRatio > 1 {
		errs = append(errs, fmt.Errorf("commitlog: DiskFullRatio %v must be in (0, 1]", o.DiskFullRatio))
	}
	if o.DiskCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("commitlog: DiskCheckInterval %v must be positive", o.DiskCheckInterval))
	}
	if o.ZeroAhead < 0 {
		errs = append(errs, fmt.Errorf("commitlog: ZeroAhead %d must not be negative", o.ZeroAhead))
	}
	if o.StageLimit < 4096 {
		errs = append(errs, fmt.Errorf("commitlog: StageLimit %d must be at least 4096", o.StageLimit))
	}
	return errors.Join(errs...)
}

// effectiveWriteMode resolves WriteAuto.
func (o *Options) effectiveWriteMode() WriteMode {
	if o.WriteMode != WriteAuto {
		return o.WriteMode
	}
	// An async acknowledgement waits for no flush, and a copy into pages
	// made writable ahead of the writer (mmapwrite.go) costs less than a
	// pwrite per append. A durable append waits for its flush, and
	// fdatasync of pwritten pages is several times cheaper than msync of
	// stored ones. BENCHMARKS.md has the measurements.
	if o.FlushMode == FlushAsync {
		return WriteMmap
	}
	return WritePwrite
}

// MaxRecordSize is the largest record a segment of this size can hold.
func (o *Options) MaxRecordSize() int { return int(o.SegmentSize) - message.BlankSize }
