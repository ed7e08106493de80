package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Magic codes of the stored record layout.
const (
	MagicV1    uint32 = 0xDAA320A7
	MagicV2    uint32 = 0xDAA320AB
	BlankMagic uint32 = 0xCBD43194
)

// Fixed positions of the record fields that do not move with the host sizes.
const (
	PosTotalSize      = 0
	PosMagic          = 4
	PosBodyCRC        = 8
	PosQueueID        = 12
	PosFlag           = 16
	PosQueueOffset    = 20
	PosPhysicalOffset = 28
	PosSysFlag        = 36
	PosBornTimestamp  = 40
	PosBornHost       = 48
)

// BlankSize is the size of the end-of-segment blank header.
const BlankSize = 8

// MinRecordSize is the smallest possible record: IPv4 hosts, empty body, a
// one-byte topic and only the checksum trailer.
const MinRecordSize = 91 + 1 + crcReservedLen

// MaxTopicLen is the longest topic the V2 layout can carry.
const MaxTopicLen = 32767

var (
	// ErrCorrupt reports bytes that are not a valid record.
	ErrCorrupt = errors.New("corrupt record")
	// ErrChecksum reports a record whose body or record checksum does not match.
	ErrChecksum = errors.New("record checksum mismatch")
	// ErrTooLarge reports a field too large for the record layout.
	ErrTooLarge = errors.New("record field too large")
)

var crcTable = crc32.MakeTable(crc32.IEEE)

// Checksum is RocketMQ's UtilAll.crc32: IEEE CRC-32 masked to 31 bits.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, crcTable) & 0x7FFFFFFF }

func hostLen(v6 bool) int {
	if v6 {
		return 20
	}
	return 8
}

func isV6(ap netip.AddrPort) bool { return ap.IsValid() && ap.Addr().Is6() && !ap.Addr().Is4In6() }

// StoreTimestampPos returns the position of STORETIMESTAMP for a sysflag.
func StoreTimestampPos(sysFlag int32) int {
	return PosBornHost + hostLen(sysFlag&SysFlagBornHostV6 != 0)
}

// RecordSysFlag is the system flag Encode writes for e: e.SysFlag with its
// IPv6 bits set from the hosts.
func (e *Ext) RecordSysFlag() int32 {
	f := e.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if isV6(e.BornHost) {
		f |= SysFlagBornHostV6
	}
	if isV6(e.StoreHost) {
		f |= SysFlagStoreHostV6
	}
	return f
}

// EncodedLen returns the size of the record Encode would write for e. It
// fails for an empty or too long topic, properties over MaxPropertiesSize
// (ErrTooLarge) and properties that would not decode back to the same map
// (ErrBadProperty: a name containing \x01 or \x02, a value containing \x02,
// or the reserved name PropertyCRC32).
func EncodedLen(e *Ext) (int, error) {
	n, _, err := encodedLen(e)
	return n, err
}

// encodedLen returns the record size and the PROPERTIES length field.
func encodedLen(e *Ext) (n, propLen int, err error) {
	if err := checkTopicLen(e.Topic); err != nil {
		return 0, 0, err
	}
	props, err := encodablePropertiesLen(e.Properties)
	if err != nil {
		return 0, 0, err
	}
	return recordLen(e, props)
}

// checkTopicLen checks the length of a record's topic.
func checkTopicLen(topic string) error {
	if len(topic) == 0 || len(topic) > MaxTopicLen {
		return fmt.Errorf("%w: topic length %d", ErrTooLarge, len(topic))
	}
	return nil
}

// recordLen returns the record size and the PROPERTIES length field of e,
// whose properties encode to props bytes without the checksum trailer.
func recordLen(e *Ext, props int) (n, propLen int, err error) {
	propLen = props + crcReservedLen
	if propLen > MaxPropertiesSize {
		return 0, 0, fmt.Errorf("%w: properties take %d bytes, at most %d", ErrTooLarge, propLen, MaxPropertiesSize)
	}
	n = recordSize(hostLen(isV6(e.BornHost)), hostLen(isV6(e.StoreHost)), len(e.Body), len(e.Topic), propLen)
	if n > 1<<31-1 {
		return 0, 0, fmt.Errorf("%w: record of %d bytes", ErrTooLarge, n)
	}
	return n, propLen, nil
}

// recordSize is the size of a record whose born and store hosts take
// bornLen and storeLen bytes, with a body of bodyLen bytes, a topic of
// topicLen and a PROPERTIES field of propLen (the checksum trailer
// included).
func recordSize(bornLen, storeLen, bodyLen, topicLen, propLen int) int {
	topicLenSize := 1
	if magicFor(topicLen) == MagicV2 {
		topicLenSize = 2
	}
	return PosBornHost + bornLen + 8 + storeLen + 4 + 8 + 4 + bodyLen + topicLenSize + topicLen + 2 + propLen
}

// maxV1TopicLen is the longest topic a V1 record holds (its one-byte
// length is signed).
const maxV1TopicLen = 127

// magicFor is the magic code of a record whose topic takes topicLen
// bytes: V2, with a two-byte topic length, past maxV1TopicLen.
func magicFor(topicLen int) uint32 {
	if topicLen > maxV1TopicLen {
		return MagicV2
	}
	return MagicV1
}

// Encode appends the stored record for e to dst and returns the extended
// slice. BODYCRC and the record checksum are computed; QUEUEOFFSET,
// PHYSICALOFFSET and STORETIMESTAMP are taken from e and may be changed later
// with Stamp, which reseals the record. The IPv6 bits of e.SysFlag are
// ignored and set from the hosts; an IPv4-mapped IPv6 host is stored as IPv4
// and a zero AddrPort as 0.0.0.0. On error dst is returned unchanged.
func Encode(dst []byte, e *Ext) ([]byte, error) {
	start := len(dst)
	dst, err := EncodeUnsealed(dst, e)
	if err != nil {
		return dst, err
	}
	Seal(dst[start:])
	return dst, nil
}

// EncodeUnsealed is Encode without the record checksum: the trailer digits
// are left as zeros. It is for writers that Stamp the record before storing
// it (Stamp seals), so the checksum is computed once.
func EncodeUnsealed(dst []byte, e *Ext) ([]byte, error) {
	if err := checkTopicLen(e.Topic); err != nil {
		return dst, err
	}
	var small [16]property
	props, plen, err := sortedProperties(small[:0], e.Properties)
	if err != nil {
		return dst, err
	}
	n, propLen, err := recordLen(e, plen)
	if err != nil {
		return dst, err
	}
	sysFlag := e.RecordSysFlag()
	start := len(dst)
	be := binary.BigEndian
	magic := magicFor(len(e.Topic))
	dst = be.AppendUint32(dst, uint32(n))
	dst = be.AppendUint32(dst, magic)
	dst = be.AppendUint32(dst, Checksum(e.Body))
	dst = be.AppendUint32(dst, uint32(e.QueueID))
	dst = be.AppendUint32(dst, uint32(e.Flag))
	dst = be.AppendUint64(dst, uint64(e.QueueOffset))
	dst = be.AppendUint64(dst, uint64(e.PhysicalOffset))
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(e.BornTimestamp))
	dst = appendHost(dst, e.BornHost)
	dst = be.AppendUint64(dst, uint64(e.StoreTimestamp))
	dst = appendHost(dst, e.StoreHost)
	dst = be.AppendUint32(dst, uint32(e.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(e.PreparedTransactionOffset))
	dst = appendBodyTopic(dst, e.Body, e.Topic, propLen)
	dst = appendSorted(dst, props)
	dst = appendChecksumTrailer(dst)
	if len(dst)-start != n {
		return dst[:start], fmt.Errorf("%w: encoded %d bytes, expected %d", ErrCorrupt, len(dst)-start, n)
	}
	return dst, nil
}

// appendBodyTopic appends a record's BODY (its length, then the bytes),
// its TOPIC (its length in the width the topic's magic gives) and the
// length field of its PROPERTIES, propLen.
func appendBodyTopic[T ~string | ~[]byte](dst, body []byte, topic T, propLen int) []byte {
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, body...)
	if magicFor(len(topic)) == MagicV2 {
		dst = be.AppendUint16(dst, uint16(len(topic)))
	} else {
		dst = append(dst, byte(len(topic)))
	}
	dst = append(dst, topic...)
	return be.AppendUint16(dst, uint16(propLen))
}

// appendChecksumTrailer appends the record checksum's pair with its digits
// zero, for Seal to fill in.
func appendChecksumTrailer(dst []byte) []byte {
	dst = append(dst, PropertyCRC32...)
	dst = append(dst, NameValueSeparator)
	dst = append(dst, "0000000000"...)
	return append(dst, PropertySeparator)
}

func appendHost(dst []byte, ap netip.AddrPort) []byte {
	addr := ap.Addr()
	if isV6(ap) {
		b := addr.As16()
		dst = append(dst, b[:]...)
	} else {
		var b [4]byte
		if addr.IsValid() {
			b = addr.Unmap().As4()
		}
		dst = append(dst, b[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(ap.Port()))
}

// Stamp writes the queue offset, physical offset and store timestamp into an
// encoded record and reseals its checksum. It is what the CommitLog does
// inside its append lock.
func Stamp(rec []byte, queueOffset, physicalOffset, storeTimestamp int64) {
	be := binary.BigEndian
	be.PutUint64(rec[PosQueueOffset:], uint64(queueOffset))
	be.PutUint64(rec[PosPhysicalOffset:], uint64(physicalOffset))
	sysFlag := int32(be.Uint32(rec[PosSysFlag:]))
	be.PutUint64(rec[StoreTimestampPos(sysFlag):], uint64(storeTimestamp))
	Seal(rec)
}

// Seal computes the record checksum over rec[:len-20] and writes it into the
// trailer. rec must be exactly one encoded record.
func Seal(rec []byte) {
	crc := Checksum(rec[:len(rec)-crcReservedLen])
	digits := rec[len(rec)-11 : len(rec)-1]
	for i := range digits {
		digits[i] = '0' + byte(crc%10)
		crc /= 10
	}
}

// RecordChecksum returns the checksum stored in a record's trailer, and
// whether the trailer is present and well formed.
func RecordChecksum(rec []byte) (uint32, bool) {
	if len(rec) < crcReservedLen {
		return 0, false
	}
	t := rec[len(rec)-crcReservedLen:]
	if string(t[:len(PropertyCRC32)]) != PropertyCRC32 || t[len(PropertyCRC32)] != NameValueSeparator ||
		t[len(t)-1] != PropertySeparator {
		return 0, false
	}
	var crc uint64
	digits := t[len(PropertyCRC32)+1 : len(t)-1]
	for i := len(digits) - 1; i >= 0; i-- {
		d := digits[i]
		if d < '0' || d > '9' {
			return 0, false
		}
		crc = crc*10 + uint64(d-'0')
	}
	if crc > 0x7FFFFFFF {
		return 0, false
	}
	return uint32(crc), true
}

// Header is the first eight bytes of a record or of a blank.
type Header struct {
	TotalSize int32
	Magic     uint32
}

// PeekHeader reads TOTALSIZE and MAGICCODE without further checks.
func PeekHeader(b []byte) (Header, error) {
	if len(b) < BlankSize {
		return Header{}, fmt.Errorf("%w: %d bytes, need %d for a header", ErrCorrupt, len(b), BlankSize)
	}
	return Header{
		TotalSize: int32(binary.BigEndian.Uint32(b)),
		Magic:     binary.BigEndian.Uint32(b[4:]),
	}, nil
}

// IsBlank reports whether h is an end-of-segment blank.
func (h Header) IsBlank() bool { return h.Magic == BlankMagic }

// IsRecord reports whether h starts a message record.
func (h Header) IsRecord() bool { return h.Magic == MagicV1 || h.Magic == MagicV2 }

// EncodeBlank writes an end-of-segment blank header of the given size into b.
func EncodeBlank(b []byte, size int32) {
	binary.BigEndian.PutUint32(b, uint32(size))
	binary.BigEndian.PutUint32(b[4:], BlankMagic)
}

// Verify checks that rec is exactly one well-formed record: the size field,
// the magic, the structure of every field, the body checksum and the record
// checksum. It allocates nothing.
func Verify(rec []byte) error {
	v, err := parse(rec)
	if err != nil {
		return err
	}
	if got := Checksum(v.body); got != v.bodyCRC {
		return fmt.Errorf("%w: body crc %d, stored %d", ErrChecksum, got, v.bodyCRC)
	}
	want, ok := RecordChecksum(v.props)
	if !ok {
		return fmt.Errorf("%w: record checksum trailer missing", ErrCorrupt)
	}
	if got := Checksum(rec[:len(rec)-crcReservedLen]); got != want {
		return fmt.Errorf("%w: record crc %d, stored %d", ErrChecksum, got, want)
	}
	// The trailer must be a pair of its own, and every other pair must be
	// well formed, so that a verified record always decodes.
	pairs := v.props[:len(v.props)-crcReservedLen]
	if len(pairs) > 0 && pairs[len(pairs)-1] != PropertySeparator {
		return fmt.Errorf("%w: record checksum trailer not separated from the properties", ErrCorrupt)
	}
	return checkPropertiesStructure(pairs)
}

// view is a parsed record that points into the record's bytes.
type view struct {
	queueID        int32
	flag           int32
	bodyCRC        uint32
	queueOffset    int64
	physicalOffset int64
	sysFlag        int32
	bornTimestamp  int64
	bornHost       []byte
	storeTimestamp int64
	storeHost      []byte
	reconsumeTimes int32
	preparedTxOff  int64
	body           []byte
	topic          []byte
	props          []byte // the whole PROPERTIES field, trailer included
}

func parse(rec []byte) (view, error) {
	var v view
	h, err := PeekHeader(rec)
	if err != nil {
		return v, err
	}
	if !h.IsRecord() {
		return v, fmt.Errorf("%w: magic %#x", ErrCorrupt, h.Magic)
	}
	if int(h.TotalSize) != len(rec) || int(h.TotalSize) < MinRecordSize-crcReservedLen {
		return v, fmt.Errorf("%w: size field %d, have %d bytes", ErrCorrupt, h.TotalSize, len(rec))
	}
	be := binary.BigEndian
	v.bodyCRC = be.Uint32(rec[PosBodyCRC:])
	v.queueID = int32(be.Uint32(rec[PosQueueID:]))
	v.flag = int32(be.Uint32(rec[PosFlag:]))
	v.queueOffset = int64(be.Uint64(rec[PosQueueOffset:]))
	v.physicalOffset = int64(be.Uint64(rec[PosPhysicalOffset:]))
	v.sysFlag = int32(be.Uint32(rec[PosSysFlag:]))
	v.bornTimestamp = int64(be.Uint64(rec[PosBornTimestamp:]))
	p := PosBornHost
	bl := hostLen(v.sysFlag&SysFlagBornHostV6 != 0)
	sl := hostLen(v.sysFlag&SysFlagStoreHostV6 != 0)
	// born host, store ts, store host, reconsume, prepared, body length
	if len(rec) < p+bl+8+sl+4+8+4 {
		return v, fmt.Errorf("%w: truncated header", ErrCorrupt)
	}
	v.bornHost = rec[p : p+bl]
	p += bl
	v.storeTimestamp = int64(be.Uint64(rec[p:]))
	p += 8
	v.storeHost = rec[p : p+sl]
	p += sl
	v.reconsumeTimes = int32(be.Uint32(rec[p:]))
	p += 4
	v.preparedTxOff = int64(be.Uint64(rec[p:]))
	p += 8
	bodyLen := int(int32(be.Uint32(rec[p:])))
	p += 4
	if bodyLen < 0 || bodyLen > len(rec)-p {
		return v, fmt.Errorf("%w: body length %d", ErrCorrupt, bodyLen)
	}
	v.body = rec[p : p+bodyLen]
	p += bodyLen
	var topicLen int
	if h.Magic == MagicV2 {
		if len(rec)-p < 2 {
			return v, fmt.Errorf("%w: truncated topic length", ErrCorrupt)
		}
		topicLen = int(int16(be.Uint16(rec[p:])))
		p += 2
	} else {
		if len(rec)-p < 1 {
			return v, fmt.Errorf("%w: truncated topic length", ErrCorrupt)
		}
		topicLen = int(int8(rec[p]))
		p++
	}
	if topicLen <= 0 || topicLen > len(rec)-p {
		return v, fmt.Errorf("%w: topic length %d", ErrCorrupt, topicLen)
	}
	v.topic = rec[p : p+topicLen]
	p += topicLen
	if len(rec)-p < 2 {
		return v, fmt.Errorf("%w: truncated properties length", ErrCorrupt)
	}
	propLen := int(int16(be.Uint16(rec[p:])))
	p += 2
	if propLen < 0 || propLen != len(rec)-p {
		return v, fmt.Errorf("%w: properties length %d, %d bytes left", ErrCorrupt, propLen, len(rec)-p)
	}
	v.props = rec[p:]
	return v, nil
}

func decodeHost(b []byte) netip.AddrPort {
	port := binary.BigEndian.Uint32(b[len(b)-4:])
	var addr netip.Addr
	if len(b) == 20 {
		addr = netip.AddrFrom16([16]byte(b[:16]))
	} else {
		addr = netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrPortFrom(addr, uint16(port))
}

// Decode parses one record (structure only; use Verify for checksums). The
// body is copied, so the result does not alias rec. The checksum trailer is
// not returned among the properties.
func Decode(rec []byte) (*Ext, error) { return decode(rec, true) }

// DecodeShared is Decode without the copy of the body: the result's Body
// is a slice of rec (capped, so an append to it copies), for a caller that
// owns rec and will not change or reuse it, such as a client decoding the
// records of a response it has just read.
func DecodeShared(rec []byte) (*Ext, error) { return decode(rec, false) }

// DecodeSharedInto is DecodeShared into e, which it overwrites, except that
// e's Topic string is kept when it spells the record's topic: a caller
// decoding the records of one answer into the same Ext makes the topic's
// string once, and allocates no Ext per record.
func DecodeSharedInto(rec []byte, e *Ext) error { return decodeInto(rec, false, e) }

func decode(rec []byte, copyBody bool) (*Ext, error) {
	e := new(Ext)
	if err := decodeInto(rec, copyBody, e); err != nil {
		return nil, err
	}
	return e, nil
}

func decodeInto(rec []byte, copyBody bool, e *Ext) error {
	v, err := parse(rec)
	if err != nil {
		return err
	}
	pairs := v.props
	if _, ok := RecordChecksum(pairs); ok &&
		(len(pairs) == crcReservedLen || pairs[len(pairs)-crcReservedLen-1] == PropertySeparator) {
		pairs = pairs[:len(pairs)-crcReservedLen] // skip the trailer: no map slot, no strings
	}
	props, err := DecodeProperties(pairs)
	if err != nil {
		return err
	}
	delete(props, PropertyCRC32)
	var body []byte // nil when empty, either way
	switch {
	case copyBody:
		body = append(body, v.body...)
	case len(v.body) > 0:
		body = v.body[:len(v.body):len(v.body)]
	}
	topic := e.Topic
	if topic != string(v.topic) {
		topic = string(v.topic)
	}
	*e = Ext{
		Message: Message{
			Topic:      topic,
			Flag:       v.flag,
			Body:       body,
			Properties: props,
		},
		QueueID:                   v.queueID,
		StoreSize:                 int32(len(rec)),
		BodyCRC:                   v.bodyCRC,
		QueueOffset:               v.queueOffset,
		PhysicalOffset:            v.physicalOffset,
		SysFlag:                   v.sysFlag,
		BornTimestamp:             v.bornTimestamp,
		BornHost:                  decodeHost(v.bornHost),
		StoreTimestamp:            v.storeTimestamp,
		StoreHost:                 decodeHost(v.storeHost),
		ReconsumeTimes:            v.reconsumeTimes,
		PreparedTransactionOffset: v.preparedTxOff,
	}
	return nil
}

// Dispatch is what the dispatcher needs from a record to build ConsumeQueue
// and IndexFile entries. Strings are copies.
type Dispatch struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	Size           int32
	SysFlag        int32
	StoreTimestamp int64
	TagsHash       int64
	Keys           string // raw KEYS value, space separated
	UniqueKey      string
	// DelayLevel is the DELAY property, or 0.
	DelayLevel int32
	// TimerOutMS is the TIMER_OUT_MS property, or 0.
	TimerOutMS int64
}

// SetProperties sets the fields of d that come from properties — TagsHash,
// Keys, UniqueKey, DelayLevel, TimerOutMS — from props, as DecodeDispatch
// reads them from a record encoded with props (TestSetPropertiesMatchesDecode
// holds the two together); the others are left as they are.
func (d *Dispatch) SetProperties(props map[string]string) {
	d.TagsHash, d.DelayLevel, d.TimerOutMS = 0, 0, 0
	if v, ok := props[PropertyTags]; ok {
		d.TagsHash = TagsHash(v)
	}
	d.Keys = props[PropertyKeys]
	d.UniqueKey = props[PropertyUniqueKey]
	if v, ok := props[PropertyDelayLevel]; ok {
		d.DelayLevel = atoi32([]byte(v))
	}
	if v, ok := props[PropertyTimerOutMS]; ok {
		d.TimerOutMS = atoi64([]byte(v))
	}
}

// DecodeDispatch extracts the dispatch fields from one record without
// building the property map.
func DecodeDispatch(rec []byte) (Dispatch, error) {
	v, err := parse(rec)
	if err != nil {
		return Dispatch{}, err
	}
	d := Dispatch{
		Topic:          string(v.topic),
		QueueID:        v.queueID,
		QueueOffset:    v.queueOffset,
		PhysicalOffset: v.physicalOffset,
		Size:           int32(len(rec)),
		SysFlag:        v.sysFlag,
		StoreTimestamp: v.storeTimestamp,
	}
	err = EachProperty(v.props, func(name, val []byte) error {
		switch string(name) {
		case PropertyTags:
			d.TagsHash = TagsHash(string(val))
		case PropertyKeys:
			d.Keys = string(val)
		case PropertyUniqueKey:
			d.UniqueKey = string(val)
		case PropertyDelayLevel:
			d.DelayLevel = atoi32(val)
		case PropertyTimerOutMS:
			d.TimerOutMS = ParseTimerOutMS(val)
		}
		return nil
	})
	if err != nil {
		return Dispatch{}, err
	}
	return d, nil
}

// ParseTimerOutMS reads a TIMER_OUT_MS value as the dispatch does for the
// tag code: a non-negative decimal of at most 18 digits; anything else is 0.
func ParseTimerOutMS(b []byte) int64 { return atoi64(b) }

// atoi64 parses a non-negative decimal int64; anything else is 0.
func atoi64(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return 0
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// atoi32 parses a decimal int32 the way Java's Integer.parseInt does (an
// optional sign, then digits); anything else, including overflow, is 0.
func atoi32(b []byte) int32 {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
		if n > 1<<31 {
			return 0
		}
	}
	if neg {
		n = -n
	}
	if n > 1<<31-1 {
		return 0
	}
	return int32(n)
}

// RecordProperties returns the PROPERTIES field of a stored record, without
// decoding it: name\x01value pairs separated by \x02 (LookupProperty reads
// one).
func RecordProperties(rec []byte) ([]byte, error) {
	v, err := parse(rec)
	if err != nil {
		return nil, err
	}
	return v.props, nil
}

// LookupProperty finds a property's value in an encoded PROPERTIES field
// (RecordProperties). The value aliases props.
func LookupProperty(props []byte, name string) ([]byte, bool) {
	for len(props) > 0 {
		end := indexByte(props, PropertySeparator)
		pair := props
		if end >= 0 {
			pair, props = props[:end], props[end+1:]
		} else {
			props = nil
		}
		if len(pair) > len(name) && pair[len(name)] == NameValueSeparator && string(pair[:len(name)]) == name {
			return pair[len(name)+1:], true
		}
	}
	return nil, false
}
