package consumequeue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// UnitSize is the size in bytes of one ConsumeQueue unit.
const UnitSize = 20

// Sentinel errors. Every error returned by this package that belongs to one
// of these classes wraps it, so callers can match with errors.Is.
var (
	// ErrCorrupt reports data on disk (or a re-put unit) that contradicts
	// what the queue holds: a short unit, a hole inside [Min, Max), a file of
	// the wrong size, or a re-dispatched unit that differs from the stored one.
	ErrCorrupt = errors.New("consumequeue: corrupt")
	// ErrOffsetGap reports a Put past MaxOffset on a queue that already has data.
	ErrOffsetGap = errors.New("consumequeue: queue offset gap")
	// ErrNotFound reports a queue offset outside [MinOffset, MaxOffset).
	ErrNotFound = errors.New("consumequeue: offset not found")
	// ErrClosed reports use of a closed store or queue (or of a queue whose
	// topic was deleted).
	ErrClosed = errors.New("consumequeue: closed")
	// ErrInvalid reports a bad argument: negative offsets, a unit with a
	// non-positive size, a topic name that is not a safe directory name.
	ErrInvalid = errors.New("consumequeue: invalid argument")
)

// Unit is one ConsumeQueue entry: where a message lives in the CommitLog and
// the hash of its tag (for SCHEDULE_TOPIC_XXXX, the delivery timestamp).
type Unit struct {
	Offset  int64 // CommitLog physical offset of the message
	Size    int32 // stored size of the message in bytes
	TagHash int64 // tag hash code, 0 when the message has no tag
}

// End returns the CommitLog offset just past the message.
func (u Unit) End() int64 { return u.Offset + int64(u.Size) }

// blankUnit is the RocketMQ "pre-blank" marker written in front of the first
// real unit of a queue that starts at a non-zero offset inside its first file.
// Its size is positive so recovery treats it as data, not as the end.
var blankUnit = Unit{Offset: 0, Size: math.MaxInt32, TagHash: 0}

// valid reports whether a decoded unit holds data. The first unit that is not
// valid marks the end of a queue's data.
func (u Unit) valid() bool { return u.Offset >= 0 && u.Size > 0 }

// checkPut reports whether u may be stored by Put.
func (u Unit) checkPut() error {
	switch {
	case u.Offset < 0:
		return fmt.Errorf("unit physical offset %d is negative: %w", u.Offset, ErrInvalid)
	case u.Size <= 0:
		return fmt.Errorf("unit size %d must be positive: %w", u.Size, ErrInvalid)
	case u.Size == math.MaxInt32:
		return fmt.Errorf("unit size %d is reserved for the pre-blank marker: %w", u.Size, ErrInvalid)
	case u.Offset > math.MaxInt64-int64(u.Size):
		return fmt.Errorf("unit physical offset %d + size %d overflows: %w", u.Offset, u.Size, ErrInvalid)
	}
	return nil
}

// EncodeUnit writes u into dst[0:20] in the RocketMQ layout: physical offset
// (8 bytes), size (4 bytes), tag hash (8 bytes), all big-endian. It panics if
// len(dst) < UnitSize.
func EncodeUnit(dst []byte, u Unit) {
	_ = dst[UnitSize-1]
	binary.BigEndian.PutUint64(dst[0:8], uint64(u.Offset))
	binary.BigEndian.PutUint32(dst[8:12], uint32(u.Size))
	binary.BigEndian.PutUint64(dst[12:20], uint64(u.TagHash))
}

// DecodeUnit reads one unit from src[0:20]. It returns an error wrapping
// ErrCorrupt if src is shorter than UnitSize. It does not judge the content:
// a zero unit decodes to Unit{}.
func DecodeUnit(src []byte) (Unit, error) {
	if len(src) < UnitSize {
		return Unit{}, fmt.Errorf("decode unit: %d bytes, need %d: %w", len(src), UnitSize, ErrCorrupt)
	}
	return decodeUnit(src), nil
}

func decodeUnit(b []byte) Unit {
	_ = b[UnitSize-1]
	return Unit{
		Offset:  int64(binary.BigEndian.Uint64(b[0:8])),
		Size:    int32(binary.BigEndian.Uint32(b[8:12])),
		TagHash: int64(binary.BigEndian.Uint64(b[12:20])),
	}
}
