package message

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Property keys (RocketMQ's MessageConst).
const (
	PropertyKeys                    = "KEYS"
	PropertyTags                    = "TAGS"
	PropertyWaitStoreMsgOK          = "WAIT"
	PropertyDelayLevel              = "DELAY"
	PropertyRetryTopic              = "RETRY_TOPIC"
	PropertyRealTopic               = "REAL_TOPIC"
	PropertyRealQueueID             = "REAL_QID"
	PropertyTransactionPrepared     = "TRAN_MSG"
	PropertyProducerGroup           = "PGROUP"
	PropertyMinOffset               = "MIN_OFFSET"
	PropertyMaxOffset               = "MAX_OFFSET"
	PropertyUniqueKey               = "UNIQ_KEY"
	PropertyReconsumeTime           = "RECONSUME_TIME"
	PropertyMaxReconsumeTimes       = "MAX_RECONSUME_TIMES"
	PropertyTransactionPreparedQOff = "TRAN_PREPARED_QUEUE_OFFSET"
	PropertyTransactionID           = "__transactionId__"
	PropertyTransactionCheckTimes   = "TRANSACTION_CHECK_TIMES"
	PropertyCheckImmunityTime       = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyOriginMessageID         = "ORIGIN_MESSAGE_ID"
	PropertyConsumeStartTime        = "CONSUME_START_TIME"
	PropertyShardingKey             = "__SHARDINGKEY"
	PropertyTimerDeliverMS          = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec           = "TIMER_DELAY_SEC"
	PropertyTimerDelayMS            = "TIMER_DELAY_MS"
	PropertyDLQOriginTopic          = "DLQ_ORIGIN_TOPIC"
	PropertyDLQOriginMessageID      = "DLQ_ORIGIN_MESSAGE_ID"
	PropertyCRC32                   = "__CRC32#"
)

// Properties the broker sets on timer messages.
const (
	// PropertyTimerOutMS is the due time (ms since the epoch) the broker
	// computed for a timer message.
	PropertyTimerOutMS = "TIMER_OUT_MS"
	// PropertyTimerOrigin is set on a copy of a timer message the broker
	// wrote again: the CommitLog offset of the first copy.
	PropertyTimerOrigin = "TIMER_ORIGIN"
)

// Separators inside the PROPERTIES field.
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
	// KeySeparator separates several values of the KEYS property.
	KeySeparator = " "
)

// MaxPropertiesSize is the largest PROPERTIES field a record can hold
// (a signed 16-bit length), the reserved checksum included.
const MaxPropertiesSize = 32767

// crcReservedLen is the size of the "__CRC32#\x01dddddddddd\x02" trailer.
const crcReservedLen = len(PropertyCRC32) + 1 + 10 + 1

// ErrBadProperty reports a property name or value that cannot be encoded.
var ErrBadProperty = errors.New("illegal property")

// ValidateProperties checks that no name or value contains a separator, that
// names are not empty and do not use the reserved checksum key.
func ValidateProperties(props map[string]string) error {
	_, err := ValidPropertiesLen(props)
	return err
}

// ValidPropertiesLen is ValidateProperties, and on success the length of
// the properties' encoding without the checksum trailer (each pair its
// name, its value and two separators), in the same pass over the map.
func ValidPropertiesLen(props map[string]string) (int, error) {
	n := 0
	for k, v := range props {
		l, err := ValidPropertyLen(k, v)
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, nil
}

// ValidPropertyLen checks one property as ValidPropertiesLen checks each
// of a map's, and returns the length of its encoding.
func ValidPropertyLen(name, value string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("%w: empty name", ErrBadProperty)
	}
	if name == PropertyCRC32 {
		return 0, fmt.Errorf("%w: %q is reserved", ErrBadProperty, name)
	}
	if hasSeparator(name) || hasSeparator(value) {
		return 0, fmt.Errorf("%w: %q contains a separator byte", ErrBadProperty, name)
	}
	return len(name) + len(value) + 2, nil
}

// hasSeparator reports whether s contains either separator byte. Names
// and values are mostly short: one pass over them costs less than two
// calls of strings.IndexByte (strings.ContainsAny builds its byte set on
// every call); a long one gets the vectorised search.
func hasSeparator(s string) bool {
	if len(s) > 64 {
		return strings.IndexByte(s, NameValueSeparator) >= 0 || strings.IndexByte(s, PropertySeparator) >= 0
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == NameValueSeparator || c == PropertySeparator {
			return true
		}
	}
	return false
}

// encodablePropertiesLen returns the encoded length of props without the
// checksum trailer, and rejects what would not decode back to the same map
// — a name containing a separator, a value containing the pair separator,
// or the reserved checksum name. It is deliberately laxer than
// ValidateProperties (an empty name or a \x01 in a value survive a round
// trip, and RocketMQ clients may send them).
func encodablePropertiesLen(props map[string]string) (int, error) {
	n := 0
	for k, v := range props {
		if err := checkEncodable(k, v); err != nil {
			return 0, err
		}
		n += len(k) + len(v) + 2
	}
	return n, nil
}

// checkEncodable is encodablePropertiesLen's check of one property.
func checkEncodable(k, v string) error {
	if strings.IndexByte(k, NameValueSeparator) >= 0 || strings.IndexByte(k, PropertySeparator) >= 0 ||
		strings.IndexByte(v, PropertySeparator) >= 0 {
		return fmt.Errorf("%w: %q contains a separator byte", ErrBadProperty, k)
	}
	if k == PropertyCRC32 {
		return fmt.Errorf("%w: %q is reserved", ErrBadProperty, k)
	}
	return nil
}

// property is one name and value, for encoding in order.
type property struct{ k, v string }

// sortedProperties appends props to dst sorted by name, checked as
// encodablePropertiesLen checks them, and returns their encoded length
// without the checksum trailer, in one pass over the map.
func sortedProperties(dst []property, props map[string]string) ([]property, int, error) {
	n := 0
	for k, v := range props {
		if err := checkEncodable(k, v); err != nil {
			return dst, 0, err
		}
		n += len(k) + len(v) + 2
		dst = append(dst, property{k, v})
	}
	sortByName(dst)
	return dst, n, nil
}

// sortByName sorts ps by name.
func sortByName(ps []property) {
	if len(ps) > 12 {
		slices.SortFunc(ps, func(a, b property) int { return strings.Compare(a.k, b.k) })
		return
	}
	// A message's few properties: insertion sort, no call.
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].k < ps[j-1].k; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// appendSorted appends the pairs k\x01v\x02 of ps, in their order.
func appendSorted(dst []byte, ps []property) []byte {
	for _, p := range ps {
		dst = append(dst, p.k...)
		dst = append(dst, NameValueSeparator)
		dst = append(dst, p.v...)
		dst = append(dst, PropertySeparator)
	}
	return dst
}

// EncodeProperties returns the PROPERTIES encoding of props (without the
// checksum trailer): k\x01v\x02 pairs in sorted key order, so the same
// properties always encode to the same bytes.
func EncodeProperties(props map[string]string) []byte {
	var small [16]property
	ps, n := small[:0], 0
	for k, v := range props {
		ps = append(ps, property{k, v})
		n += len(k) + len(v) + 2
	}
	sortByName(ps)
	return appendSorted(make([]byte, 0, n), ps)
}

// DecodeProperties parses a PROPERTIES field. It accepts a missing trailing
// separator and skips empty pairs; a pair without a name/value separator is
// an error. The names and values are parts of one copy of b (two
// allocations in all, the map and that copy).
func DecodeProperties(b []byte) (map[string]string, error) {
	props := make(map[string]string, bytes.Count(b, []byte{PropertySeparator})+1)
	all := string(b)
	for len(all) > 0 {
		pair, rest, _ := strings.Cut(all, string(rune(PropertySeparator)))
		all = rest
		if len(pair) == 0 {
			continue
		}
		name, value, ok := strings.Cut(pair, string(rune(NameValueSeparator)))
		if !ok {
			return nil, fmt.Errorf("%w: property pair without separator", ErrCorrupt)
		}
		props[name] = value
	}
	return props, nil
}

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }

// checkPropertiesStructure reports whether every non-empty pair of an encoded
// PROPERTIES field (trailer excluded) has a name/value separator, exactly
// what DecodeProperties requires. It allocates nothing.
func checkPropertiesStructure(b []byte) error {
	for len(b) > 0 {
		end := indexByte(b, PropertySeparator)
		pair := b
		if end >= 0 {
			pair, b = b[:end], b[end+1:]
		} else {
			b = nil
		}
		if len(pair) > 0 && indexByte(pair, NameValueSeparator) < 0 {
			return fmt.Errorf("%w: property pair without separator", ErrCorrupt)
		}
	}
	return nil
}
