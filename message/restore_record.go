package message

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Restored is what RestoreRecord tells of the record it wrote: what an
// append and the dispatch of its ConsumeQueue and IndexFile entries need.
type Restored struct {
	Topic     string
	QueueID   int32
	SysFlag   int32
	Keys      string // the KEYS property, or ""
	UniqueKey string // the UNIQ_KEY property, or ""
}

// RestoreRecord is Restore over a stored record, without decoding it: it
// appends to dst the record that EncodeUnsealed writes for
// Restore(Decode(rec), drop...) with StoreHost storeHost and, if setName is
// not "", property setName set to setValue. QUEUEOFFSET, PHYSICALOFFSET and
// STORETIMESTAMP are zero and the checksum digits too: the CommitLog stamps
// and seals the record (Stamp).
//
// The fields and the body are copied, the topic and queue id are taken from
// REAL_TOPIC and REAL_QID, and the property pairs are copied one by one in
// their stored order, except REAL_TOPIC, REAL_QID, the names in drop and the
// checksum trailer; setName replaces its pair in place, or is inserted
// before the first pair whose name sorts after it. So for a record whose
// properties are in Encode's order (sorted by name, each name once: every
// record Bolide writes) the result is byte for byte the record encoded from
// the restored message. BODYCRC is copied, not computed: rec must be a
// record whose body checksum holds (one the CommitLog's recovery or Verify
// accepted).
//
// On error dst is returned unchanged.
func RestoreRecord(dst, rec []byte, storeHost netip.AddrPort, drop []string, setName, setValue string) ([]byte, Restored, error) {
	var r Restored
	if indexByte([]byte(setValue), PropertySeparator) >= 0 || indexByte([]byte(setName), NameValueSeparator) >= 0 ||
		indexByte([]byte(setName), PropertySeparator) >= 0 || setName == PropertyCRC32 {
		return dst, r, fmt.Errorf("%w: %q", ErrBadProperty, setName)
	}
	v, err := parse(rec)
	if err != nil {
		return dst, r, err
	}
	pairs := v.props
	if _, ok := RecordChecksum(pairs); ok &&
		(len(pairs) == crcReservedLen || pairs[len(pairs)-crcReservedLen-1] == PropertySeparator) {
		pairs = pairs[:len(pairs)-crcReservedLen]
	}

	// First pass: the destination, the size of the new properties and the
	// dispatch fields.
	var topic, qid []byte
	var haveTopic, haveQID bool
	propLen := 0
	set := setName == ""
	if err := EachProperty(pairs, func(name, val []byte) error {
		switch string(name) {
		case PropertyRealTopic:
			topic, haveTopic = val, true
			return nil
		case PropertyRealQueueID:
			qid, haveQID = val, true
			return nil
		case PropertyKeys:
			r.Keys = string(val)
		case PropertyUniqueKey:
			r.UniqueKey = string(val)
		}
		if keepPair(name, drop) {
			if !set && string(name) >= setName {
				set = true
				propLen += len(setName) + len(setValue) + 2
				if string(name) == setName {
					return nil
				}
			}
			propLen += len(name) + len(val) + 2
		}
		return nil
	}); err != nil {
		return dst, Restored{}, err
	}
	if !set {
		propLen += len(setName) + len(setValue) + 2
	}
	if setName == PropertyKeys {
		r.Keys = setValue
	} else if setName == PropertyUniqueKey {
		r.UniqueKey = setValue
	}
	if !haveTopic || len(topic) == 0 {
		return dst, Restored{}, fmt.Errorf("record at %d of %s has no %s", v.physicalOffset, v.topic, PropertyRealTopic)
	}
	queueID, ok := parseQueueID(qid)
	if !haveQID || !ok {
		return dst, Restored{}, fmt.Errorf("record at %d of %s has a bad %s %q", v.physicalOffset, v.topic, PropertyRealQueueID, qid)
	}
	if len(topic) > MaxTopicLen {
		return dst, Restored{}, fmt.Errorf("%w: topic length %d", ErrTooLarge, len(topic))
	}
	propLen += crcReservedLen
	if propLen > MaxPropertiesSize {
		return dst, Restored{}, fmt.Errorf("%w: properties take %d bytes, at most %d", ErrTooLarge, propLen, MaxPropertiesSize)
	}
	magic := magicFor(len(topic))
	sysFlag := v.sysFlag &^ SysFlagStoreHostV6
	if isV6(storeHost) {
		sysFlag |= SysFlagStoreHostV6
	}
	n := recordSize(len(v.bornHost), hostLen(isV6(storeHost)), len(v.body), len(topic), propLen)
	if n > 1<<31-1 {
		return dst, Restored{}, fmt.Errorf("%w: record of %d bytes", ErrTooLarge, n)
	}

	start := len(dst)
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(n))
	dst = be.AppendUint32(dst, magic)
	dst = be.AppendUint32(dst, v.bodyCRC)
	dst = be.AppendUint32(dst, uint32(queueID))
	dst = be.AppendUint32(dst, uint32(v.flag))
	dst = be.AppendUint64(dst, 0) // QUEUEOFFSET
	dst = be.AppendUint64(dst, 0) // PHYSICALOFFSET
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(v.bornTimestamp))
	dst = append(dst, v.bornHost...)
	dst = be.AppendUint64(dst, 0) // STORETIMESTAMP
	dst = appendHost(dst, storeHost)
	dst = be.AppendUint32(dst, uint32(v.reconsumeTimes))
	dst = be.AppendUint64(dst, uint64(v.preparedTxOff))
	dst = appendBodyTopic(dst, v.body, topic, propLen)
	set = setName == ""
	_ = EachProperty(pairs, func(name, val []byte) error {
		if !keepPair(name, drop) || string(name) == PropertyRealTopic || string(name) == PropertyRealQueueID {
			return nil
		}
		if !set && string(name) >= setName {
			set = true
			dst = appendPair(dst, setName, setValue)
			if string(name) == setName {
				return nil
			}
		}
		dst = appendPair(dst, name, val)
		return nil
	})
	if !set {
		dst = appendPair(dst, setName, setValue)
	}
	dst = appendChecksumTrailer(dst)
	if len(dst)-start != n {
		return dst[:start], Restored{}, fmt.Errorf("%w: restored %d bytes, expected %d", ErrCorrupt, len(dst)-start, n)
	}
	r.Topic = string(topic)
	r.QueueID = queueID
	r.SysFlag = sysFlag
	return dst, r, nil
}

// SetRecordQueueID rewrites the QUEUEID of an encoded record (before it is
// stamped and sealed: it does not reseal).
func SetRecordQueueID(rec []byte, queueID int32) {
	binary.BigEndian.PutUint32(rec[PosQueueID:], uint32(queueID))
}

// EachProperty calls fn for each name\x01value pair of a PROPERTIES field
// (RecordProperties) as DecodeProperties reads them: empty pairs are
// skipped, a pair without a name/value separator is an error, and an error
// of fn ends the walk.
func EachProperty(props []byte, fn func(name, val []byte) error) error {
	for len(props) > 0 {
		end := indexByte(props, PropertySeparator)
		pair := props
		if end >= 0 {
			pair, props = props[:end], props[end+1:]
		} else {
			props = nil
		}
		if len(pair) == 0 {
			continue
		}
		sep := indexByte(pair, NameValueSeparator)
		if sep < 0 {
			return fmt.Errorf("%w: property pair without separator", ErrCorrupt)
		}
		if err := fn(pair[:sep], pair[sep+1:]); err != nil {
			return err
		}
	}
	return nil
}

// keepPair reports whether a restored record keeps a property: not one
// named in drop, nor the checksum (Decode drops it).
func keepPair(name []byte, drop []string) bool {
	if string(name) == PropertyCRC32 {
		return false
	}
	for _, d := range drop {
		if string(name) == d {
			return false
		}
	}
	return true
}

func appendPair[T string | []byte](dst []byte, name, value T) []byte {
	dst = append(dst, name...)
	dst = append(dst, NameValueSeparator)
	dst = append(dst, value...)
	return append(dst, PropertySeparator)
}

// parseQueueID parses REAL_QID as RealDestination does
// (strconv.ParseInt(v, 10, 32), not negative), without allocating.
func parseQueueID(b []byte) (int32, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > 1<<31-1 {
			return 0, false
		}
	}
	if neg && n != 0 {
		return 0, false
	}
	return int32(n), true
}
