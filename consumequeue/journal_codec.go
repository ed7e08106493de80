package consumequeue

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The staging journal's encoding (see "Staging journal" in doc.go). These
// functions only encode and decode bytes; journal.go does the I/O.

// journalName is the journal's file name in the store's root. It cannot
// be a topic (validTopic refuses it).
const journalName = "staged.journal"

const (
	journalMagic      uint32 = 0x424C534A // "BLSJ"
	journalVersion    uint32 = 1
	journalHeaderSize        = 4 + 4 + 8 + 4 // magic, version, generation, CRC
	blockHeaderSize          = 4 + 4         // payload length, CRC
	// maxBlockPayload bounds a block, so that a damaged length cannot ask
	// for a huge allocation.
	maxBlockPayload = 1 << 30
	// entryFixed: topic length, queue id, first queue offset, unit count.
	entryFixed = 2 + 4 + 8 + 4
)

// encodeJournalHeader returns the header of a journal of generation gen.
func encodeJournalHeader(gen uint64) []byte {
	be := binary.BigEndian
	b := make([]byte, 0, journalHeaderSize)
	b = be.AppendUint32(b, journalMagic)
	b = be.AppendUint32(b, journalVersion)
	b = be.AppendUint64(b, gen)
	return be.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// decodeJournalHeader returns the generation in a journal header.
func decodeJournalHeader(b []byte) (uint64, error) {
	be := binary.BigEndian
	switch {
	case len(b) < journalHeaderSize:
		return 0, fmt.Errorf("journal header: %d bytes: %w", len(b), ErrCorrupt)
	case be.Uint32(b) != journalMagic || be.Uint32(b[4:]) != journalVersion:
		return 0, fmt.Errorf("journal header: magic or version: %w", ErrCorrupt)
	case crc32.ChecksumIEEE(b[:16]) != be.Uint32(b[16:]):
		return 0, fmt.Errorf("journal header: checksum: %w", ErrCorrupt)
	}
	gen := be.Uint64(b[8:])
	if gen == 0 {
		return 0, fmt.Errorf("journal header: generation 0: %w", ErrCorrupt)
	}
	return gen, nil
}

// blockCRC is the checksum of a block of generation gen: the generation
// is part of it, so a block left from an earlier generation never passes.
func blockCRC(gen uint64, payload []byte) uint32 {
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], gen)
	return crc32.Update(crc32.ChecksumIEEE(g[:]), crc32.IEEETable, payload)
}

// beginBlock appends room for a block header to dst; finishBlock fills it
// in once the entries are appended after it.
func beginBlock(dst []byte) []byte { return append(dst, make([]byte, blockHeaderSize)...) }

// finishBlock completes the block that dst holds, begun by beginBlock.
func finishBlock(dst []byte, gen uint64) []byte {
	payload := dst[blockHeaderSize:]
	binary.BigEndian.PutUint32(dst, uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[4:], blockCRC(gen, payload))
	return dst
}

// appendJournalEntry appends one entry: units (encoded, a multiple of
// UnitSize bytes) of queue topic/id from queue offset from on.
func appendJournalEntry(dst []byte, topic string, id int32, from int64, units []byte) []byte {
	be := binary.BigEndian
	dst = be.AppendUint16(dst, uint16(len(topic)))
	dst = append(dst, topic...)
	dst = be.AppendUint32(dst, uint32(id))
	dst = be.AppendUint64(dst, uint64(from))
	dst = be.AppendUint32(dst, uint32(len(units)/UnitSize))
	return append(dst, units...)
}

// nextBlock returns the payload of the block at the start of b and the
// bytes it takes, or ok false when b does not start with a whole, valid
// block of generation gen (the end of the journal, or a torn tail).
func nextBlock(b []byte, gen uint64) (payload []byte, n int, ok bool) {
	if len(b) < blockHeaderSize {
		return nil, 0, false
	}
	be := binary.BigEndian
	size := int64(be.Uint32(b))
	if size == 0 || size > maxBlockPayload || size > int64(len(b)-blockHeaderSize) {
		return nil, 0, false
	}
	payload = b[blockHeaderSize : blockHeaderSize+int(size)]
	if blockCRC(gen, payload) != be.Uint32(b[4:]) {
		return nil, 0, false
	}
	return payload, blockHeaderSize + int(size), true
}

// journalEntry is one decoded entry; Units aliases the block.
type journalEntry struct {
	Topic   string
	QueueID int32
	From    int64
	Units   []byte
}

// decodeJournalEntries calls fn for each entry of a block's payload, in
// order, and stops at fn's first error. A payload that does not split
// into whole entries is ErrCorrupt (its checksum passed, so it was
// written so: a bug, not a torn write).
func decodeJournalEntries(payload []byte, fn func(journalEntry) error) error {
	be := binary.BigEndian
	for len(payload) > 0 {
		if len(payload) < 2 {
			return fmt.Errorf("journal entry: %d stray bytes: %w", len(payload), ErrCorrupt)
		}
		tl := int(be.Uint16(payload))
		if len(payload) < entryFixed+tl {
			return fmt.Errorf("journal entry: cut short: %w", ErrCorrupt)
		}
		e := journalEntry{Topic: string(payload[2 : 2+tl])}
		p := payload[2+tl:]
		e.QueueID = int32(be.Uint32(p))
		e.From = int64(be.Uint64(p[4:]))
		count := int64(be.Uint32(p[12:]))
		p = p[16:]
		if e.From < 0 || count == 0 || count*UnitSize > int64(len(p)) {
			return fmt.Errorf("journal entry %s/%d: from %d, %d units in %d bytes: %w",
				e.Topic, e.QueueID, e.From, count, len(p), ErrCorrupt)
		}
		e.Units = p[:count*UnitSize]
		if err := fn(e); err != nil {
			return err
		}
		payload = p[count*UnitSize:]
	}
	return nil
}
