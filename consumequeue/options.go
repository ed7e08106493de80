package consumequeue

import (
	"fmt"
	"os"
)

// DefaultUnitsPerFile is RocketMQ's ConsumeQueue file capacity: 300 000 units,
// 6 000 000 bytes.
const DefaultUnitsPerFile = 300_000

// MaxUnitsPerFile bounds UnitsPerFile so that a file (UnitsPerFile*20 bytes)
// stays at or below 1 GB and is always mappable.
const MaxUnitsPerFile = 50_000_000

// Options configure a Store.
type Options struct {
	// UnitsPerFile is how many 20-byte units each file holds. Every file of
	// every queue has exactly UnitsPerFile*UnitSize bytes; reopening a store
	// with a different value fails with ErrCorrupt.
	UnitsPerFile int
	// Spare, if set, is asked for a file when a new ConsumeQueue file
	// cannot be allocated because the disk is full. It must make path an
	// all-zero file already allocated to size bytes (typically by renaming
	// one it preallocated earlier) and return it open for reading and
	// writing. The broker's store uses it to draw on its reserve, so that
	// dispatch never lacks room for an acknowledged message.
	Spare func(path string, size int64) (*os.File, error)
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
	return nil
}

// FileSize returns the size in bytes of every ConsumeQueue file.
func (o Options) FileSize() int64 { return int64(o.UnitsPerFile) * UnitSize }
