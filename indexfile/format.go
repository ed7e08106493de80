package indexfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// Sizes of the fixed parts of an index file, in bytes.
const (
	// HeaderSize is the size of the file header.
	HeaderSize = 40
	// SlotSize is the size of one hash slot.
	SlotSize = 4
	// EntrySize is the size of one index entry.
	EntrySize = 20
)

// Byte offsets of the header fields.
const (
	offBeginTimestamp = 0
	offEndTimestamp   = 8
	offBeginPhyOffset = 16
	offEndPhyOffset   = 24
	offHashSlotCount  = 32
	offIndexCount     = 36
)

// Byte offsets of the entry fields, relative to the entry start.
const (
	offEntryKeyHash   = 0
	offEntryPhyOffset = 4
	offEntryTimeDiff  = 12
	offEntryPrevIndex = 16
)

// Errors returned by this package. They are wrapped with context, so match
// them with errors.Is.
var (
	// ErrCorrupt reports bytes that do not decode as a header or an entry,
	// or an index file that cannot be made consistent.
	ErrCorrupt = errors.New("indexfile: corrupt data")
	// ErrClosed reports a call on a closed Store.
	ErrClosed = errors.New("indexfile: store closed")
	// ErrFull reports that an index file has no room for another entry.
	// Store.Put never returns it: it rolls over to a new file instead.
	ErrFull = errors.New("indexfile: index file full")
	// ErrOutOfOrder reports a Put whose physical offset is below the
	// highest offset already indexed. Entries must be appended in
	// non-decreasing physical offset order (see TruncateAfter).
	ErrOutOfOrder = errors.New("indexfile: physical offset out of order")
)

// Header is the 40-byte header at the start of every index file.
type Header struct {
	// BeginTimestamp is the store timestamp (ms) of the first entry; entry
	// time differences are relative to it.
	BeginTimestamp int64
	// EndTimestamp is the store timestamp (ms) of the last entry.
	EndTimestamp int64
	// BeginPhyOffset is the CommitLog offset of the first entry.
	BeginPhyOffset int64
	// EndPhyOffset is the CommitLog offset of the last entry.
	EndPhyOffset int64
	// SlotCount is RocketMQ's hashSlotCount: the number of hash slots that
	// are in use (non-zero) in this file. It is NOT the configured number of
	// slots, which the file does not record (it follows from Options).
	SlotCount int32
	// IndexCount is the next entry position to use. It starts at 1 because
	// entry position 0 is never used (0 means "none" in slots and chains),
	// so a file holds IndexCount-1 entries.
	IndexCount int32
}

// Entries returns the number of entries the header accounts for.
func (h Header) Entries() int {
	if h.IndexCount <= 1 {
		return 0
	}
	return int(h.IndexCount) - 1
}

// EncodeHeader writes h into dst[:HeaderSize], big-endian. It panics if dst
// is shorter than HeaderSize.
func EncodeHeader(dst []byte, h Header) {
	_ = dst[HeaderSize-1]
	binary.BigEndian.PutUint64(dst[offBeginTimestamp:], uint64(h.BeginTimestamp))
	binary.BigEndian.PutUint64(dst[offEndTimestamp:], uint64(h.EndTimestamp))
	binary.BigEndian.PutUint64(dst[offBeginPhyOffset:], uint64(h.BeginPhyOffset))
	binary.BigEndian.PutUint64(dst[offEndPhyOffset:], uint64(h.EndPhyOffset))
	binary.BigEndian.PutUint32(dst[offHashSlotCount:], uint32(h.SlotCount))
	binary.BigEndian.PutUint32(dst[offIndexCount:], uint32(h.IndexCount))
}

// DecodeHeader reads a header from src. It fails with ErrCorrupt when src is
// shorter than HeaderSize or a count is negative. Range checks that depend on
// Options are done by the Store when it opens a file.
func DecodeHeader(src []byte) (Header, error) {
	if len(src) < HeaderSize {
		return Header{}, fmt.Errorf("decode header: %d bytes, need %d: %w", len(src), HeaderSize, ErrCorrupt)
	}
	h := Header{
		BeginTimestamp: int64(binary.BigEndian.Uint64(src[offBeginTimestamp:])),
		EndTimestamp:   int64(binary.BigEndian.Uint64(src[offEndTimestamp:])),
		BeginPhyOffset: int64(binary.BigEndian.Uint64(src[offBeginPhyOffset:])),
		EndPhyOffset:   int64(binary.BigEndian.Uint64(src[offEndPhyOffset:])),
		SlotCount:      int32(binary.BigEndian.Uint32(src[offHashSlotCount:])),
		IndexCount:     int32(binary.BigEndian.Uint32(src[offIndexCount:])),
	}
	if h.SlotCount < 0 || h.IndexCount < 0 {
		return Header{}, fmt.Errorf("decode header: negative count (slots %d, index %d): %w",
			h.SlotCount, h.IndexCount, ErrCorrupt)
	}
	return h, nil
}

// Entry is one 20-byte index entry.
type Entry struct {
	// KeyHash is KeyHash(key) of the indexed key (never negative).
	KeyHash int32
	// PhyOffset is the CommitLog offset of the message.
	PhyOffset int64
	// TimeDiff is the message store time minus the header BeginTimestamp,
	// in whole SECONDS (truncated), clamped to [0, MaxInt32].
	TimeDiff int32
	// PrevIndex is the position of the previous entry in the same hash
	// slot's chain, 0 for none.
	PrevIndex int32
}

// EncodeEntry writes e into dst[:EntrySize], big-endian. It panics if dst is
// shorter than EntrySize.
func EncodeEntry(dst []byte, e Entry) {
	_ = dst[EntrySize-1]
	binary.BigEndian.PutUint32(dst[offEntryKeyHash:], uint32(e.KeyHash))
	binary.BigEndian.PutUint64(dst[offEntryPhyOffset:], uint64(e.PhyOffset))
	binary.BigEndian.PutUint32(dst[offEntryTimeDiff:], uint32(e.TimeDiff))
	binary.BigEndian.PutUint32(dst[offEntryPrevIndex:], uint32(e.PrevIndex))
}

// DecodeEntry reads an entry from src. It fails with ErrCorrupt when src is
// shorter than EntrySize or a field is negative (no valid entry has a
// negative hash, offset, time difference or previous index).
func DecodeEntry(src []byte) (Entry, error) {
	if len(src) < EntrySize {
		return Entry{}, fmt.Errorf("decode entry: %d bytes, need %d: %w", len(src), EntrySize, ErrCorrupt)
	}
	e := decodeEntryUnchecked(src)
	if e.KeyHash < 0 || e.PhyOffset < 0 || e.TimeDiff < 0 || e.PrevIndex < 0 {
		return Entry{}, fmt.Errorf("decode entry: negative field %+v: %w", e, ErrCorrupt)
	}
	return e, nil
}

func decodeEntryUnchecked(src []byte) Entry {
	_ = src[EntrySize-1]
	return Entry{
		KeyHash:   int32(binary.BigEndian.Uint32(src[offEntryKeyHash:])),
		PhyOffset: int64(binary.BigEndian.Uint64(src[offEntryPhyOffset:])),
		TimeDiff:  int32(binary.BigEndian.Uint32(src[offEntryTimeDiff:])),
		PrevIndex: int32(binary.BigEndian.Uint32(src[offEntryPrevIndex:])),
	}
}

// BuildKey returns the indexed form of a message key: topic + "#" + key, as
// RocketMQ's IndexService builds it.
func BuildKey(topic, key string) string {
	return topic + "#" + key
}

// JavaHashCode returns Java's String.hashCode of s: the sum of
// s[i]*31^(n-1-i) over the UTF-16 code units of s, in wrapping int32
// arithmetic. s is read as UTF-8; characters beyond the BMP count as their
// two surrogates, exactly as Java stores them. Each invalid UTF-8 byte counts
// as U+FFFD (Java's decoder may fold a truncated multi-byte sequence into a
// single U+FFFD, so such malformed keys can hash differently than in Java).
func JavaHashCode(s string) int32 { return javaHashOn(0, s) }

// javaHashOn goes on with the Java hash h of a string with s: the hash of
// their concatenation, wherever the first string ends with a complete
// character (an ASCII byte, or any byte it ends with as long as s begins
// with an ASCII byte, which no multi-byte sequence continues into).
func javaHashOn(h int32, s string) int32 {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// KeyHash returns the hash stored in index entries for key (the full key, see
// BuildKey): abs(JavaHashCode(key)), with math.MinInt32 (whose absolute value
// does not fit) mapped to 0, as RocketMQ's IndexFile.indexKeyHashMethod does.
// The result is never negative.
func KeyHash(key string) int32 { return absHash(JavaHashCode(key)) }

// TopicKeyHash is KeyHash(BuildKey(topic, key)), without building the key:
// the dispatcher indexes every message's keys this way. It equals it for
// every topic and key: the '#' between them is ASCII, so no character of
// the topic runs on into the key.
func TopicKeyHash(topic, key string) int32 {
	return absHash(javaHashOn(javaHashOn(javaHashOn(0, topic), "#"), key))
}

// absHash is the index's form of a Java hash.
func absHash(h int32) int32 {
	if h < 0 {
		if h == math.MinInt32 {
			return 0
		}
		h = -h
	}
	return h
}
