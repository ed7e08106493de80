package pop

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RecordVersion is the version of the POP log record format.
const RecordVersion = 1

// Kind is what a POP log record records.
type Kind uint8

// Record kinds.
const (
	// KindPop: messages handed out (first delivery or redelivery); the
	// queue's next offset moves to Next.
	KindPop Kind = 1
	// KindAck: messages acknowledged (applied when the sequence matches).
	KindAck Kind = 2
	// KindChange: invisibility changed by the consumer (ChangeInvisible,
	// Nack) or released with its client: new sequence and visible time,
	// auto-renewal off (applied when OldSeq matches).
	KindChange Kind = 3
	// KindRenew: invisibility extended for an auto-renewing client; the
	// sequence stays (applied when it matches).
	KindRenew Kind = 4
	// KindDLQ: messages moved to the group's dead-letter queue: done,
	// whatever their sequence.
	KindDLQ Kind = 5
	// KindReset: the queue's consumption was moved (an offset reset):
	// next = Next, nothing in flight. It has no entries.
	KindReset Kind = 6
)

func (k Kind) String() string {
	switch k {
	case KindPop:
		return "POP"
	case KindAck:
		return "ACK"
	case KindChange:
		return "CHANGE"
	case KindRenew:
		return "RENEW"
	case KindDLQ:
		return "DLQ"
	case KindReset:
		return "RESET"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Record is one state change of one (group, topic, queue).
type Record struct {
	Kind    Kind
	TimeMS  int64
	Group   string
	Topic   string
	QueueID int32
	// Pop only.
	Next        int64  // the queue's next offset to hand out after this pop
	AttemptID   string // the request's attempt id (FIFO)
	ClientID    string // the auto-renewing client ("" without auto-renew)
	InvisibleMS int64  // the requested invisible duration (renewal period)
	Entries     []Entry
}

// Entry is one message of a record.
type Entry struct {
	Offset int64
	// Seq is the handle sequence the message gets (Pop, Change), keeps
	// (Renew) or was acknowledged with (Ack, DLQ).
	Seq uint64
	// OldSeq is the sequence a Change replaces.
	OldSeq uint64
	// Attempt is the delivery attempt (Pop).
	Attempt int32
	// VisibleAtMS is when the message becomes visible (Pop, Change, Renew).
	VisibleAtMS int64
}

// Limits of a record.
const (
	maxName    = 255
	maxEntries = 1 << 16
)

// ErrBadRecord reports a POP log record that does not decode.
var ErrBadRecord = errors.New("bad POP log record")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendRecord appends the encoding of r to b:
//
//	version u8 | kind u8 | timeMS varint | group str | topic str | queue uvarint
//	[Pop: next varint | attemptID str | clientID str | invisibleMS uvarint]
//	[Reset: next varint]
//	entries uvarint | entry...
//
// where str is a uvarint length and bytes, and an entry is
//
//	Pop:    offset uvarint | seq uvarint | attempt uvarint | visibleAt varint
//	Ack:    offset uvarint | seq uvarint
//	DLQ:    offset uvarint | seq uvarint
//	Change: offset uvarint | oldSeq uvarint | seq uvarint | visibleAt varint
//	Renew:  offset uvarint | seq uvarint | visibleAt varint
func AppendRecord(b []byte, r *Record) ([]byte, error) {
	if r.Kind < KindPop || r.Kind > KindReset {
		return b, fmt.Errorf("%w: kind %d", ErrBadRecord, r.Kind)
	}
	if r.Kind == KindReset && len(r.Entries) > 0 {
		return b, fmt.Errorf("%w: a reset has no entries", ErrBadRecord)
	}
	if len(r.Group) > maxName || len(r.Topic) > maxName || len(r.AttemptID) > maxName || len(r.ClientID) > maxName {
		return b, fmt.Errorf("%w: name longer than %d bytes", ErrBadRecord, maxName)
	}
	if r.QueueID < 0 || len(r.Entries) > maxEntries {
		return b, fmt.Errorf("%w: queue %d, %d entries", ErrBadRecord, r.QueueID, len(r.Entries))
	}
	b = append(b, RecordVersion, byte(r.Kind))
	b = binary.AppendVarint(b, r.TimeMS)
	b = appendString(b, r.Group)
	b = appendString(b, r.Topic)
	b = binary.AppendUvarint(b, uint64(r.QueueID))
	if r.Kind == KindReset {
		b = binary.AppendVarint(b, r.Next)
	}
	if r.Kind == KindPop {
		if r.InvisibleMS < 0 {
			return b, fmt.Errorf("%w: invisible %d ms", ErrBadRecord, r.InvisibleMS)
		}
		b = binary.AppendVarint(b, r.Next)
		b = appendString(b, r.AttemptID)
		b = appendString(b, r.ClientID)
		b = binary.AppendUvarint(b, uint64(r.InvisibleMS))
	}
	b = binary.AppendUvarint(b, uint64(len(r.Entries)))
	for _, e := range r.Entries {
		if e.Offset < 0 || e.Attempt < 0 {
			return b, fmt.Errorf("%w: offset %d attempt %d", ErrBadRecord, e.Offset, e.Attempt)
		}
		b = binary.AppendUvarint(b, uint64(e.Offset))
		switch r.Kind {
		case KindPop:
			b = binary.AppendUvarint(b, e.Seq)
			b = binary.AppendUvarint(b, uint64(e.Attempt))
			b = binary.AppendVarint(b, e.VisibleAtMS)
		case KindAck, KindDLQ:
			b = binary.AppendUvarint(b, e.Seq)
		case KindChange:
			b = binary.AppendUvarint(b, e.OldSeq)
			b = binary.AppendUvarint(b, e.Seq)
			b = binary.AppendVarint(b, e.VisibleAtMS)
		case KindRenew:
			b = binary.AppendUvarint(b, e.Seq)
			b = binary.AppendVarint(b, e.VisibleAtMS)
		}
	}
	return b, nil
}

// reader decodes the fields of a record.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrBadRecord, what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) nonNeg(what string, limit uint64) int64 {
	v := r.uvarint(what)
	if v > limit {
		r.fail(what)
		return 0
	}
	return int64(v)
}

func (r *reader) str(what string) string {
	n := r.uvarint(what)
	if r.err != nil {
		return ""
	}
	if n > maxName || n > uint64(len(r.b)) {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// DecodeRecord decodes one record; trailing bytes are an error.
func DecodeRecord(b []byte) (*Record, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadRecord, len(b))
	}
	if b[0] != RecordVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadRecord, b[0])
	}
	rec := &Record{Kind: Kind(b[1])}
	if rec.Kind < KindPop || rec.Kind > KindReset {
		return nil, fmt.Errorf("%w: kind %d", ErrBadRecord, b[1])
	}
	r := &reader{b: b[2:]}
	rec.TimeMS = r.varint("time")
	rec.Group = r.str("group")
	rec.Topic = r.str("topic")
	rec.QueueID = int32(r.nonNeg("queue", 1<<31-1))
	if rec.Kind == KindReset {
		rec.Next = r.varint("next")
	}
	if rec.Kind == KindPop {
		rec.Next = r.varint("next")
		rec.AttemptID = r.str("attempt id")
		rec.ClientID = r.str("client id")
		rec.InvisibleMS = r.nonNeg("invisible", 1<<62)
	}
	n := r.uvarint("entries")
	if r.err == nil && (n > maxEntries || n > uint64(len(r.b)) || rec.Kind == KindReset && n > 0) {
		r.fail("entries")
	}
	if r.err != nil {
		return nil, r.err
	}
	if n > 0 {
		rec.Entries = make([]Entry, n)
	}
	for i := range rec.Entries {
		e := &rec.Entries[i]
		e.Offset = r.nonNeg("offset", 1<<62)
		switch rec.Kind {
		case KindPop:
			e.Seq = r.uvarint("seq")
			e.Attempt = int32(r.nonNeg("attempt", 1<<31-1))
			e.VisibleAtMS = r.varint("visible at")
		case KindAck, KindDLQ:
			e.Seq = r.uvarint("seq")
		case KindChange:
			e.OldSeq = r.uvarint("old seq")
			e.Seq = r.uvarint("seq")
			e.VisibleAtMS = r.varint("visible at")
		case KindRenew:
			e.Seq = r.uvarint("seq")
			e.VisibleAtMS = r.varint("visible at")
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	if r.err != nil {
		return nil, r.err
	}
	return rec, nil
}
