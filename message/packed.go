package message

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// packedFixed is the size of a packed entry's fixed fields, the born host
// not counted: ENTRYSIZE, FLAG, SYSFLAG, BORNTIMESTAMP, RECONSUMETIMES and
// the two length fields.
const packedFixed = 4 + 4 + 4 + 8 + 4 + 4 + 2

// MinPackedSize is the smallest packed entry: an IPv4 born host, an empty
// body and no properties.
const MinPackedSize = packedFixed + 8

// Packed is one entry of a packed batch (see "Packed batches" in doc.go),
// its fields pointing into the batch's bytes (Body capped, so that an
// append to it does not write into the batch).
type Packed struct {
	Flag           int32
	SysFlag        int32
	BornTimestamp  int64
	BornHost       []byte // 8 or 20 bytes, as in a record; all zeros: none given
	ReconsumeTimes int32
	Body           []byte
	// Properties holds name\x01value\x02 pairs in increasing name order,
	// without the checksum trailer.
	Properties []byte
}

// AppendPacked appends e's packed entry to dst: its Flag, SysFlag,
// BornTimestamp, BornHost, ReconsumeTimes, Body and Properties (the
// topic and queue travel once for the batch). It fails, leaving dst as it
// was, for properties a broker refuses (ValidateProperties) or too large
// for a record.
func AppendPacked(dst []byte, e *Ext) ([]byte, error) {
	var small [16]property
	ps := small[:0]
	n := 0
	for k, v := range e.Properties {
		if k == "" || k == PropertyCRC32 || hasSeparator(k) || hasSeparator(v) {
			return dst, fmt.Errorf("%w: %q cannot be packed", ErrBadProperty, k)
		}
		n += len(k) + len(v) + 2
		ps = append(ps, property{k, v})
	}
	if n+crcReservedLen > MaxPropertiesSize {
		return dst, fmt.Errorf("%w: properties take %d bytes, at most %d", ErrTooLarge, n+crcReservedLen, MaxPropertiesSize)
	}
	sortByName(ps)
	v6 := isV6(e.BornHost)
	size := packedFixed + hostLen(v6) + len(e.Body) + n
	if size > 1<<31-1 {
		return dst, fmt.Errorf("%w: packed entry of %d bytes", ErrTooLarge, size)
	}
	sysFlag := e.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if v6 {
		sysFlag |= SysFlagBornHostV6
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(size))
	dst = be.AppendUint32(dst, uint32(e.Flag))
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(e.BornTimestamp))
	if e.BornHost.IsValid() {
		dst = appendHost(dst, e.BornHost)
	} else {
		dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	dst = be.AppendUint32(dst, uint32(e.ReconsumeTimes))
	dst = be.AppendUint32(dst, uint32(len(e.Body)))
	dst = append(dst, e.Body...)
	dst = be.AppendUint16(dst, uint16(n))
	return appendSorted(dst, ps), nil
}

// NextPacked reads the first entry of b and returns it with the bytes
// after it. It checks the entry's structure: the sizes add up, and the
// properties are well-formed pairs with non-empty names in strictly
// increasing order, no separator inside a name or value, and not the
// reserved checksum name (ValidateProperties, and no name twice).
func NextPacked(b []byte) (Packed, []byte, error) {
	if len(b) < MinPackedSize {
		return Packed{}, nil, fmt.Errorf("%w: packed entry of %d bytes", ErrCorrupt, len(b))
	}
	be := binary.BigEndian
	size := be.Uint32(b)
	if size < MinPackedSize || uint64(size) > uint64(len(b)) {
		return Packed{}, nil, fmt.Errorf("%w: packed entry size %d, %d bytes left", ErrCorrupt, size, len(b))
	}
	e, rest := b[:size], b[size:]
	p := Packed{
		Flag:          int32(be.Uint32(e[4:])),
		SysFlag:       int32(be.Uint32(e[8:])),
		BornTimestamp: int64(be.Uint64(e[12:])),
	}
	at := 20
	hl := hostLen(p.SysFlag&SysFlagBornHostV6 != 0)
	if len(e) < packedFixed+hl {
		return Packed{}, nil, fmt.Errorf("%w: packed entry of %d bytes for an IPv6 born host", ErrCorrupt, len(e))
	}
	p.BornHost = e[at : at+hl]
	at += hl
	p.ReconsumeTimes = int32(be.Uint32(e[at:]))
	bodyLen := uint64(be.Uint32(e[at+4:]))
	at += 8
	if bodyLen > uint64(len(e)-at-2) {
		return Packed{}, nil, fmt.Errorf("%w: body of %d bytes in a packed entry of %d", ErrCorrupt, bodyLen, len(e))
	}
	p.Body = e[at : at+int(bodyLen) : at+int(bodyLen)] // capped: an append copies
	at += int(bodyLen)
	propLen := int(be.Uint16(e[at:]))
	at += 2
	if propLen != len(e)-at {
		return Packed{}, nil, fmt.Errorf("%w: properties of %d bytes where %d are left", ErrCorrupt, propLen, len(e)-at)
	}
	if propLen+crcReservedLen > MaxPropertiesSize {
		return Packed{}, nil, fmt.Errorf("%w: properties take %d bytes, at most %d", ErrTooLarge, propLen+crcReservedLen, MaxPropertiesSize)
	}
	p.Properties = e[at:]
	if err := checkPackedProperties(p.Properties); err != nil {
		return Packed{}, nil, err
	}
	return p, rest, nil
}

// checkPackedProperties is NextPacked's check of the properties.
func checkPackedProperties(b []byte) error {
	var prev []byte
	for len(b) > 0 {
		end := bytes.IndexByte(b, PropertySeparator)
		if end < 0 {
			return fmt.Errorf("%w: packed properties do not end with a pair separator", ErrBadProperty)
		}
		pair := b[:end]
		b = b[end+1:]
		sep := bytes.IndexByte(pair, NameValueSeparator)
		if sep <= 0 {
			return fmt.Errorf("%w: packed property %q without a name or a separator", ErrBadProperty, pair)
		}
		name, value := pair[:sep], pair[sep+1:]
		if bytes.IndexByte(value, NameValueSeparator) >= 0 {
			return fmt.Errorf("%w: %q contains a separator byte", ErrBadProperty, name)
		}
		if prev != nil && bytes.Compare(prev, name) >= 0 {
			return fmt.Errorf("%w: packed property %q out of order", ErrBadProperty, name)
		}
		if string(name) == PropertyCRC32 {
			return fmt.Errorf("%w: %q is reserved", ErrBadProperty, name)
		}
		prev = name
	}
	return nil
}

// hasBornHost reports whether the entry names a born host (not all zeros).
func (p *Packed) hasBornHost() bool {
	for _, c := range p.BornHost {
		if c != 0 {
			return true
		}
	}
	return false
}

// packedRecordLen returns the size of the record EncodePacked writes for p.
func packedRecordLen(p *Packed, topic string, storeHost netip.AddrPort) int {
	store := hostLen(isV6(storeHost))
	born := len(p.BornHost)
	if !p.hasBornHost() {
		born = store
	}
	return recordSize(born, store, len(p.Body), len(topic), len(p.Properties)+crcReservedLen)
}

// EncodePacked appends the unsealed stored record of entry p (NextPacked)
// for topic and queueID, stored by storeHost, to dst: the record
// EncodeUnsealed writes for the same message, byte for byte, with the
// store host as born host when p names none. The offsets and the store
// timestamp are zeros, for the CommitLog to stamp. On error dst is
// returned unchanged.
func EncodePacked(dst []byte, p *Packed, topic string, queueID int32, storeHost netip.AddrPort) ([]byte, error) {
	if err := checkTopicLen(topic); err != nil {
		return dst, err
	}
	n := packedRecordLen(p, topic, storeHost)
	if n > 1<<31-1 {
		return dst, fmt.Errorf("%w: record of %d bytes", ErrTooLarge, n)
	}
	sysFlag := p.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	storeV6 := isV6(storeHost)
	if storeV6 {
		sysFlag |= SysFlagStoreHostV6
	}
	hasBorn := p.hasBornHost()
	if hasBorn && len(p.BornHost) == 20 || !hasBorn && storeV6 {
		sysFlag |= SysFlagBornHostV6
	}
	magic := magicFor(len(topic))
	start := len(dst)
	dst = slices.Grow(dst, n)
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(n))
	dst = be.AppendUint32(dst, magic)
	dst = be.AppendUint32(dst, Checksum(p.Body))
	dst = be.AppendUint32(dst, uint32(queueID))
	dst = be.AppendUint32(dst, uint32(p.Flag))
	dst = be.AppendUint64(dst, 0) // QUEUEOFFSET
	dst = be.AppendUint64(dst, 0) // PHYSICALOFFSET
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(p.BornTimestamp))
	if hasBorn {
		dst = append(dst, p.BornHost...)
	} else {
		dst = appendHost(dst, storeHost)
	}
	dst = be.AppendUint64(dst, 0) // STORETIMESTAMP
	dst = appendHost(dst, storeHost)
	dst = be.AppendUint32(dst, uint32(p.ReconsumeTimes))
	dst = be.AppendUint64(dst, 0) // PREPAREDTRANSACTIONOFFSET
	dst = appendBodyTopic(dst, p.Body, topic, len(p.Properties)+crcReservedLen)
	dst = append(dst, p.Properties...)
	dst = appendChecksumTrailer(dst)
	if len(dst)-start != n {
		return dst[:start], fmt.Errorf("%w: encoded %d bytes, expected %d", ErrCorrupt, len(dst)-start, n)
	}
	return dst, nil
}

// Ext returns the message entry p holds, for topic and queueID, with its
// own property map (the body still points into the batch).
func (p *Packed) Ext(topic string, queueID int32) (*Ext, error) {
	props, err := DecodeProperties(p.Properties)
	if err != nil {
		return nil, err
	}
	e := &Ext{
		Message:        Message{Topic: topic, Flag: p.Flag, Body: p.Body, Properties: props},
		QueueID:        queueID,
		SysFlag:        p.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6),
		BornTimestamp:  p.BornTimestamp,
		ReconsumeTimes: p.ReconsumeTimes,
	}
	if p.hasBornHost() {
		e.BornHost = decodeHost(p.BornHost)
	}
	return e, nil
}
