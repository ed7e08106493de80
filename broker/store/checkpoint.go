package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// checkpointMagic starts every checkpoint file ("BLCP").
const checkpointMagic uint32 = 0x424C4350

const checkpointVersion uint32 = 1

// checkpointSize: magic, version, five int64 fields, crc.
const checkpointSize = 4 + 4 + 5*8 + 4

// checkpoint is what the store knows to be durable, written atomically.
type checkpoint struct {
	// LogFrom is a record boundary at or below the durable end of the
	// CommitLog from which recovery verifies records. It lags the end by at
	// least the recovery window so that damage to the last records is found.
	LogFrom int64
	// DispatchFrom: ConsumeQueue and IndexFile entries of every record below
	// it are durable. Recovery drops entries from here on and rebuilds them.
	DispatchFrom int64
	// FlushedOffset is the CommitLog's durable end when the checkpoint was
	// taken (informational).
	FlushedOffset int64
	// StoreTimestamp is the store time of the last dispatched record.
	StoreTimestamp int64
	// WrittenAt is when the checkpoint was taken (ms since the epoch).
	WrittenAt int64
}

func (c checkpoint) encode() []byte {
	b := make([]byte, 0, checkpointSize)
	be := binary.BigEndian
	b = be.AppendUint32(b, checkpointMagic)
	b = be.AppendUint32(b, checkpointVersion)
	for _, v := range []int64{c.LogFrom, c.DispatchFrom, c.FlushedOffset, c.StoreTimestamp, c.WrittenAt} {
		b = be.AppendUint64(b, uint64(v))
	}
	return be.AppendUint32(b, crc32.ChecksumIEEE(b))
}

var errBadCheckpoint = errors.New("bad checkpoint")

func decodeCheckpoint(b []byte) (checkpoint, error) {
	var c checkpoint
	if len(b) != checkpointSize {
		return c, fmt.Errorf("%w: %d bytes, want %d", errBadCheckpoint, len(b), checkpointSize)
	}
	be := binary.BigEndian
	if be.Uint32(b) != checkpointMagic || be.Uint32(b[4:]) != checkpointVersion {
		return c, fmt.Errorf("%w: magic or version", errBadCheckpoint)
	}
	if crc32.ChecksumIEEE(b[:len(b)-4]) != be.Uint32(b[len(b)-4:]) {
		return c, fmt.Errorf("%w: checksum", errBadCheckpoint)
	}
	f := b[8:]
	c.LogFrom = int64(be.Uint64(f[0:]))
	c.DispatchFrom = int64(be.Uint64(f[8:]))
	c.FlushedOffset = int64(be.Uint64(f[16:]))
	c.StoreTimestamp = int64(be.Uint64(f[24:]))
	c.WrittenAt = int64(be.Uint64(f[32:]))
	if c.LogFrom < 0 || c.DispatchFrom < 0 || c.LogFrom > c.DispatchFrom {
		return c, fmt.Errorf("%w: offsets logFrom=%d dispatchFrom=%d", errBadCheckpoint, c.LogFrom, c.DispatchFrom)
	}
	return c, nil
}

// readCheckpoint loads the checkpoint; a missing file is a zero checkpoint.
func readCheckpoint(path string) (checkpoint, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("read checkpoint: %w", err)
	}
	c, err := decodeCheckpoint(b)
	return c, true, err
}

func writeCheckpoint(path string, c checkpoint) error {
	return fsutil.WriteFileAtomic(path, c.encode(), 0o644)
}
