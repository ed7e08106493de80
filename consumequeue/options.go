package consumequeue

import (
	"fmt"
	"os"
)

// DefaultUnitsPerFile is RocketMQ's ConsumeQueue file capacity: 300 000 units,
// 6 000 000 bytes.
const DefaultUnitsPerFile = 300_000

// DefaultFirstFileUnits is how many units the first file of a queue holds
// (40 960 bytes); the files after it grow to UnitsPerFile (doc.go, "Files").
const DefaultFirstFileUnits = 2048

// MaxUnitsPerFile bounds UnitsPerFile so that a file (UnitsPerFile*20 bytes)
// stays at or below 1 GB and is always mappable.
const MaxUnitsPerFile = 50_000_000

// Options configure a Store.
type Options struct {
	// UnitsPerFile is how many 20-byte units each file holds. Every file of
	// every queue has exactly UnitsPerFile*UnitSize bytes; reopening a store
	// with a different value fails with ErrCorrupt.
	UnitsPerFile int
	// FirstFileUnits is how many units the first file of a queue holds
	// (0: DefaultFirstFileUnits); the next file holds as many, and every
	// later one twice the one before it, until the files reach
	// UnitsPerFile. A value >= UnitsPerFile makes every file full-size.
	// Like UnitsPerFile it is part of the layout on disk: a store must be
	// reopened with the value it was written with (a queue whose first
	// file was written full-size by a version without growing files is
	// recognised and kept so).
	FirstFileUnits int
	// MaxOpenFiles bounds the file descriptors the store keeps open
	// between flushes (0: DefaultMaxOpenFiles). A file is open while it is
	// written or read; the flush closes the files of queues that were idle
	// since the previous flush, and, above the bound, those it has just
	// synced.
	MaxOpenFiles int
	// SyncFSAbove: when a flush has more files to make durable than this,
	// it writes them all and makes them durable with one syncfs(2) of the
	// file system instead of one fdatasync each (0: DefaultSyncFSAbove;
	// negative: never).
	SyncFSAbove int
	// MaxStagedBytes bounds the units FlushBelow leaves staged (and
	// journaled) over all queues: when they would hold more, it flushes
	// every queue instead (0: DefaultMaxStagedBytes; negative: no bound).
	MaxStagedBytes int64
	// Spare, if set, is asked for a file when a new ConsumeQueue file
	// cannot be allocated because the disk is full. It must make path an
	// all-zero file already allocated to size bytes (typically by renaming
	// one it preallocated earlier) and return it open for reading and
	// writing. The broker's store uses it to draw on its reserve, so that
	// dispatch never lacks room for an acknowledged message.
	Spare func(path string, size int64) (*os.File, error)
}

// DefaultMaxOpenFiles is the default of Options.MaxOpenFiles.
const DefaultMaxOpenFiles = 1024

// DefaultSyncFSAbove is the default of Options.SyncFSAbove.
const DefaultSyncFSAbove = 64

// DefaultMaxStagedBytes is the default of Options.MaxStagedBytes: about 3.3
// million units, a minute of 55 000 messages a second spread over queues
// that each get less than a page of them.
const DefaultMaxStagedBytes = 64 << 20

// maxStagedBytes is MaxStagedBytes with its default; negative is no bound.
func (o Options) maxStagedBytes() int64 {
	if o.MaxStagedBytes == 0 {
		return DefaultMaxStagedBytes
	}
	return o.MaxStagedBytes
}

// DefaultOptions returns the RocketMQ defaults.
func DefaultOptions() Options {
	return Options{UnitsPerFile: DefaultUnitsPerFile}
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.UnitsPerFile <= 0 || o.UnitsPerFile > MaxUnitsPerFile {
		return fmt.Errorf("consumequeue options: UnitsPerFile %d must be in [1, %d]: %w",
			o.UnitsPerFile, MaxUnitsPerFile, ErrInvalid)
	}
	if o.FirstFileUnits < 0 || o.MaxOpenFiles < 0 {
		return fmt.Errorf("consumequeue options: FirstFileUnits %d and MaxOpenFiles %d must not be negative: %w",
			o.FirstFileUnits, o.MaxOpenFiles, ErrInvalid)
	}
	return nil
}

// FileSize returns the size in bytes of a full ConsumeQueue file, the
// largest a file can be.
func (o Options) FileSize() int64 { return int64(o.UnitsPerFile) * UnitSize }

// FirstFileSize returns the size in bytes of the first file of a queue,
// the smallest a file is created with.
func (o Options) FirstFileSize() int64 { return int64(o.firstFileUnits()) * UnitSize }

func (o Options) firstFileUnits() int {
	if o.FirstFileUnits <= 0 {
		return min(DefaultFirstFileUnits, o.UnitsPerFile)
	}
	return min(o.FirstFileUnits, o.UnitsPerFile)
}

func (o Options) maxOpenFiles() int64 {
	if o.MaxOpenFiles <= 0 {
		return DefaultMaxOpenFiles
	}
	return int64(o.MaxOpenFiles)
}

func (o Options) syncFSAbove() int {
	if o.SyncFSAbove == 0 {
		return DefaultSyncFSAbove
	}
	return o.SyncFSAbove
}
