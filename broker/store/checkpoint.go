package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/bolide-mq/bolide/consumequeue"
	"github.com/bolide-mq/bolide/internal/fsutil"
)

// checkpointMagic starts every checkpoint file ("BLCP").
const checkpointMagic uint32 = 0x424C4350

// checkpointVersion is the version written; version 1 (without the
// staging fields) is still read.
const checkpointVersion uint32 = 2

// checkpointSize: magic, version, eight int64 fields, crc; checkpointSizeV1
// has five.
const (
	checkpointSize   = 4 + 4 + 8*8 + 4
	checkpointSizeV1 = 4 + 4 + 5*8 + 4
)

// checkpoint is what the store knows to be durable, written atomically.
type checkpoint struct {
	// LogFrom is a record boundary at or below the durable end of the
	// CommitLog from which recovery verifies records. It lags the end by at
	// least the recovery window so that damage to the last records is found.
	LogFrom int64
	// DispatchFrom: ConsumeQueue and IndexFile entries of every record below
	// it are durable, in the files or in the ConsumeQueues' staging
	// journal up to Journal. Recovery drops entries from here on and
	// rebuilds them.
	DispatchFrom int64
	// FlushedOffset is the CommitLog's durable end when the checkpoint was
	// taken. Recovery reports a log that ends below it as torn
	// (checkDurableEnd).
	FlushedOffset int64
	// StoreTimestamp is the store time of the last dispatched record.
	StoreTimestamp int64
	// WrittenAt is when the checkpoint was taken (ms since the epoch).
	WrittenAt int64
	// StagedFrom <= DispatchFrom: the ConsumeQueue units of records from
	// here on may be only in the staging journal. Recovery rebuilds from
	// here when the journal does not cover Journal.
	StagedFrom int64
	// Journal is the staging journal's generation and length the
	// checkpoint relies on.
	Journal consumequeue.JournalPosition
}

func (c checkpoint) encode() []byte {
	b := make([]byte, 0, checkpointSize)
	be := binary.BigEndian
	b = be.AppendUint32(b, checkpointMagic)
	b = be.AppendUint32(b, checkpointVersion)
	for _, v := range []int64{c.LogFrom, c.DispatchFrom, c.FlushedOffset, c.StoreTimestamp, c.WrittenAt,
		c.StagedFrom, int64(c.Journal.Gen), c.Journal.End} {
		b = be.AppendUint64(b, uint64(v))
	}
	return be.AppendUint32(b, crc32.ChecksumIEEE(b))
}

var errBadCheckpoint = errors.New("bad checkpoint")

// decodeCheckpoint decodes the checkpoint at the start of b (a slot's
// bytes after its sequence number); its version says how long it is.
func decodeCheckpoint(b []byte) (checkpoint, error) {
	var c checkpoint
	be := binary.BigEndian
	if len(b) < 8 || be.Uint32(b) != checkpointMagic {
		return c, fmt.Errorf("%w: magic", errBadCheckpoint)
	}
	size := 0
	switch v := be.Uint32(b[4:]); v {
	case 1:
		size = checkpointSizeV1
	case checkpointVersion:
		size = checkpointSize
	default:
		return c, fmt.Errorf("%w: version %d", errBadCheckpoint, v)
	}
	if len(b) < size {
		return c, fmt.Errorf("%w: %d bytes, want %d", errBadCheckpoint, len(b), size)
	}
	b = b[:size]
	if crc32.ChecksumIEEE(b[:len(b)-4]) != be.Uint32(b[len(b)-4:]) {
		return c, fmt.Errorf("%w: checksum", errBadCheckpoint)
	}
	f := b[8:]
	c.LogFrom = int64(be.Uint64(f[0:]))
	c.DispatchFrom = int64(be.Uint64(f[8:]))
	c.FlushedOffset = int64(be.Uint64(f[16:]))
	c.StoreTimestamp = int64(be.Uint64(f[24:]))
	c.WrittenAt = int64(be.Uint64(f[32:]))
	c.StagedFrom = c.DispatchFrom // version 1 staged nothing past DispatchFrom
	if size == checkpointSize {
		c.StagedFrom = int64(be.Uint64(f[40:]))
		c.Journal.Gen = be.Uint64(f[48:])
		c.Journal.End = int64(be.Uint64(f[56:]))
	}
	if c.LogFrom < 0 || c.DispatchFrom < 0 || c.LogFrom > c.DispatchFrom {
		return c, fmt.Errorf("%w: offsets logFrom=%d dispatchFrom=%d", errBadCheckpoint, c.LogFrom, c.DispatchFrom)
	}
	if c.StagedFrom < 0 || c.StagedFrom > c.DispatchFrom || c.Journal.End < 0 {
		return c, fmt.Errorf("%w: stagedFrom=%d dispatchFrom=%d journalEnd=%d", errBadCheckpoint, c.StagedFrom, c.DispatchFrom, c.Journal.End)
	}
	return c, nil
}

// The checkpoint file holds two fixed-size slots written alternately in
// place, each with a sequence number and a CRC. Reading picks the valid slot
// with the higher sequence, so a torn write of one slot leaves the other.
// Writing in place into a file allocated once needs no new disk space, so
// checkpoints keep working on a full disk (temp-file-and-rename would not).
//
//	offset 0   slot A: seq int64 | checkpoint encoding (76 bytes; 52 in version 1)
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
		if n < off+8+checkpointSizeV1 {
			continue
		}
		seq := int64(binary.BigEndian.Uint64(buf[off:]))
		c, err := decodeCheckpoint(buf[off+8 : off+checkpointSlot])
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
