package indexfile

import (
	"fmt"
	"math"
	"os"
)

// Defaults, as in RocketMQ (maxHashSlotNum, maxIndexNum).
const (
	DefaultSlotCount  = 5_000_000
	DefaultMaxEntries = 20_000_000
)

// maxFileSize bounds the size of one index file (16 GiB), so that a typo in
// the options fails validation instead of trying to map terabytes.
const maxFileSize = 16 << 30

// Options configure a Store. Every file of a store must be created with the
// same options: the layout (where entries start) depends on SlotCount, and
// the file does not record it.
type Options struct {
	// SlotCount is the number of hash slots per file (RocketMQ
	// maxHashSlotNum).
	SlotCount int
	// MaxEntries is the number of entry positions per file (RocketMQ
	// maxIndexNum). Position 0 is never used, so a file holds at most
	// MaxEntries-1 entries.
	MaxEntries int
	// Spare, if set, is asked for a file when a new index file cannot be
	// allocated because the disk is full. It must make path an all-zero
	// file already allocated to size bytes (typically by renaming one it
	// preallocated earlier) and return it open for reading and writing.
	// The broker's store uses it to draw on its reserve, so that dispatch
	// never lacks room for an acknowledged message.
	Spare func(path string, size int64) (*os.File, error)
}

// DefaultOptions returns RocketMQ's defaults: 5,000,000 slots and
// 20,000,000 entries, a 420,000,040-byte file.
func DefaultOptions() Options {
	return Options{SlotCount: DefaultSlotCount, MaxEntries: DefaultMaxEntries}
}

// Validate reports whether the options describe a usable file.
func (o Options) Validate() error {
	if o.SlotCount < 1 || o.SlotCount > math.MaxInt32 {
		return fmt.Errorf("indexfile options: SlotCount %d must be in [1, %d]", o.SlotCount, math.MaxInt32)
	}
	if o.MaxEntries < 2 || o.MaxEntries > math.MaxInt32 {
		return fmt.Errorf("indexfile options: MaxEntries %d must be in [2, %d] (position 0 is unused)",
			o.MaxEntries, math.MaxInt32)
	}
	if sz := int64(HeaderSize) + int64(o.SlotCount)*SlotSize + int64(o.MaxEntries)*EntrySize; sz > maxFileSize {
		return fmt.Errorf("indexfile options: file size %d exceeds %d bytes", sz, int64(maxFileSize))
	}
	return nil
}

// FileSize returns the size in bytes of one index file:
// HeaderSize + SlotCount*SlotSize + MaxEntries*EntrySize.
func (o Options) FileSize() int64 {
	return int64(HeaderSize) + int64(o.SlotCount)*SlotSize + int64(o.MaxEntries)*EntrySize
}

// entriesOffset is the byte offset of entry position 0.
func (o Options) entriesOffset() int {
	return HeaderSize + o.SlotCount*SlotSize
}
