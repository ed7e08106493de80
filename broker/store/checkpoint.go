package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

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

// The checkpoint file holds two fixed-size slots written alternately in
// place, each with a sequence number and a CRC. Reading picks the valid slot
// with the higher sequence, so a torn write of one slot leaves the other.
// Writing in place into a file allocated once needs no new disk space, so
// checkpoints keep working on a full disk (temp-file-and-rename would not).
//
//	offset 0   slot A: seq int64 | checkpoint encoding (52 bytes)
//	offset 512 slot B: same
const (
	checkpointSlot     = 512
	checkpointFileSize = 2 * checkpointSlot
)

// checkpointFile is the open checkpoint file and the next slot to write.
type checkpointFile struct {
	f   *os.File
	seq int64
}

// openCheckpoint opens (creating and allocating if needed) the checkpoint
// file and returns the newest valid checkpoint in it.
func openCheckpoint(path string) (*checkpointFile, checkpoint, bool, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, checkpoint{}, false, fmt.Errorf("open checkpoint: %w", err)
	}
	buf := make([]byte, checkpointFileSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		_ = f.Close()
		return nil, checkpoint{}, false, fmt.Errorf("read checkpoint: %w", err)
	}
	var best checkpoint
	var bestSeq int64 = -1
	for slot := 0; slot < 2; slot++ {
		off := slot * checkpointSlot
		if n < off+8+checkpointSize {
			continue
		}
		seq := int64(binary.BigEndian.Uint64(buf[off:]))
		c, err := decodeCheckpoint(buf[off+8 : off+8+checkpointSize])
		if err == nil && seq > bestSeq {
			best, bestSeq = c, seq
		}
	}
	if n < checkpointFileSize {
		if err := fsutil.Preallocate(f, checkpointFileSize); err != nil {
			_ = f.Close()
			return nil, checkpoint{}, false, err
		}
		if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
			_ = f.Close()
			return nil, checkpoint{}, false, err
		}
	}
	cf := &checkpointFile{f: f, seq: bestSeq + 1}
	if bestSeq < 0 {
		return cf, checkpoint{}, n > 0 && !allZero(buf[:n]), nil
	}
	return cf, best, true, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// write stores c in the slot after the last one written and makes it durable.
func (cf *checkpointFile) write(c checkpoint) error {
	rec := make([]byte, 8, 8+checkpointSize)
	binary.BigEndian.PutUint64(rec, uint64(cf.seq))
	rec = append(rec, c.encode()...)
	off := int64(cf.seq%2) * checkpointSlot
	if _, err := cf.f.WriteAt(rec, off); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := fsutil.BackgroundFdatasync(cf.f); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	cf.seq++
	return nil
}

func (cf *checkpointFile) close() error { return cf.f.Close() }
