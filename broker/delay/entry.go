package delay

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// EntrySize is the size of one bucket index entry (see doc.go).
const EntrySize = 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one timer message in the bucket index.
type Entry struct {
	// DeliverMS is the due time, ms since the epoch.
	DeliverMS int64
	// Location is the CommitLog offset of the stored timer message; Size
	// its record size.
	Location int64
	// Origin identifies the message across copies: the CommitLog offset of
	// its first copy (equal to Location unless the broker wrote it again).
	Origin int64
	Size   int32
}

// Encode writes e into b[:EntrySize].
func (e Entry) Encode(b []byte) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint64(b[0:], uint64(e.DeliverMS))
	binary.BigEndian.PutUint64(b[8:], uint64(e.Location))
	binary.BigEndian.PutUint64(b[16:], uint64(e.Origin))
	binary.BigEndian.PutUint32(b[24:], uint32(e.Size))
	binary.BigEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
}

// DecodeEntry parses b[:EntrySize]; ok is false for a torn or corrupt entry.
func DecodeEntry(b []byte) (e Entry, ok bool) {
	if len(b) < EntrySize {
		return Entry{}, false
	}
	if binary.BigEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], castagnoli) {
		return Entry{}, false
	}
	e = Entry{
		DeliverMS: int64(binary.BigEndian.Uint64(b[0:])),
		Location:  int64(binary.BigEndian.Uint64(b[8:])),
		Origin:    int64(binary.BigEndian.Uint64(b[16:])),
		Size:      int32(binary.BigEndian.Uint32(b[24:])),
	}
	if e.Location < 0 || e.Origin < 0 || e.Size <= 0 {
		return Entry{}, false
	}
	return e, true
}

// Bucket levels: level 0 buckets are loaded into the in-memory wheel and
// fire; coarser levels are split into the next finer level as they come
// close (a hierarchy of wheels on disk).
const numLevels = 3

// granularity is the time span of one bucket of each level, ms.
var granularity = [numLevels]int64{10_000, 10 * 60_000, 24 * 3600_000}

// splitAhead is how long before its start a bucket of level ≥ 1 is split
// into buckets of the level below, ms.
var splitAhead = [numLevels]int64{0, 20 * 60_000, 24 * 3600_000}

// maxLoadAhead bounds how early a level-0 bucket may be loaded: it must be
// loaded only after the level-1 bucket that covers it was split.
var maxLoadAhead = splitAhead[1] - granularity[1]

// bucketKey names a bucket: its level and start time (ms, a multiple of the
// level's granularity).
type bucketKey struct {
	level int
	start int64
}

func floorTo(ms, g int64) int64 {
	if ms < 0 {
		return -((-ms + g - 1) / g) * g
	}
	return ms / g * g
}

// place picks the bucket of an entry due at deliverMS, indexed at now: the
// coarsest level (at most maxLevel) whose bucket is not yet due to be split.
func place(deliverMS, now int64, maxLevel int) bucketKey {
	for l := min(maxLevel, numLevels-1); l >= 1; l-- {
		start := floorTo(deliverMS, granularity[l])
		if start > now+splitAhead[l] {
			return bucketKey{l, start}
		}
	}
	return bucketKey{0, floorTo(deliverMS, granularity[0])}
}

func (k bucketKey) end() int64 { return k.start + granularity[k.level] }

// File names: "L<level>-<start ms, 15 digits>.idx" for entries and, for
// level 0, ".fired" for the fired log.
const (
	idxSuffix   = ".idx"
	firedSuffix = ".fired"
	// A split bucket waiting for deletion: "<name>.<n>.split".
	splitSuffix = ".split"
)

func (k bucketKey) name() string { return fmt.Sprintf("L%d-%015d", k.level, k.start) }

// parseBucketName parses a bucket file name (without directory) and returns
// its key and suffix.
func parseBucketName(name string) (bucketKey, string, bool) {
	var suffix string
	switch {
	case strings.HasSuffix(name, idxSuffix):
		suffix = idxSuffix
	case strings.HasSuffix(name, firedSuffix):
		suffix = firedSuffix
	default:
		return bucketKey{}, "", false
	}
	base := strings.TrimSuffix(name, suffix)
	if len(base) != 2+1+15 || base[0] != 'L' || base[2] != '-' {
		return bucketKey{}, "", false
	}
	level := int(base[1] - '0')
	if level < 0 || level >= numLevels {
		return bucketKey{}, "", false
	}
	start, err := strconv.ParseInt(base[3:], 10, 64)
	if err != nil || start < 0 || start%granularity[level] != 0 {
		return bucketKey{}, "", false
	}
	return bucketKey{level, start}, suffix, true
}
